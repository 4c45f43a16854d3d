"""Names of the FINJ programs this package runs (fault programs of Netti et al. Sec. 5.2, and applications)."""

from __future__ import annotations

FAULTS = frozenset({"leak", "memeater", "ddot", "dial", "cpufreq", "pagefail", "ioerr", "copy"})
"""The eight fault programs (Netti et al. Sec. 5.2)."""

APPS = frozenset({"dgemm", "stream", "linsolve", "fileio"})
"""Application stand-ins (numpy/Python): DGEMM, STREAM triad, an HPL-like dense solve, a Bonnie/IOzone-like
file write/read loop. They are ours, not the benchmarks of the paper."""

HEALTHY = "healthy"
