"""rsyslog's high-precision file format (``RSYSLOG_FileFormat``): ``TIMESTAMP host tag[pid]: message``.

What rsyslog writes with ``$ActionFileDefaultTemplate RSYSLOG_FileFormat`` (and journald/syslog-ng
setups that forward in the same shape), e.g.::

    2026-01-05T03:12:44.123456+01:00 cn0042 kernel: EDAC MC0: 1 CE memory read error
    2026-01-05T02:12:45Z cn0042 slurmd[2113]: launch task StepId=77.0

* TIMESTAMP is RFC 3339 exactly as in RFC 5424 (fraction up to 9 digits, ``Z`` or ``+hh:mm``;
  :func:`nodewatch.tasks.ingest.syslog_rfc5424.rfc3339_fast`), converted to UTC: unlike RFC 3164 the year
  and the zone are in the line, so no inference is needed.
* ``host tag[pid]: message`` is split exactly like the RFC 3164 file form
  (:func:`nodewatch.tasks.ingest.syslog_rfc3164.host_tag_fast`): a first word ending in ``:`` is the tag,
  otherwise ``app``/``pid`` are null and the rest is the message.
* There is no PRI in this template, so ``facility`` and ``severity`` are null.
"""

from __future__ import annotations

import re

import numpy as np

from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.syslog_blocks import Block, const_str, masked
from nodewatch.tasks.ingest.syslog_rfc3164 import host_tag_arrays, host_tag_columns, host_tag_slow, sniff_share
from nodewatch.tasks.ingest.syslog_rfc5424 import rfc3339_slow

FORMAT = "rsyslog"
_YEAR_RE = re.compile(r"\d{4}-")  # starts like an RFC 3339 date: later faults get a precise reason


def fast(block: Block, idx: np.ndarray, ctx: ParseContext) -> tuple[dict, np.ndarray]:
    """Compiled parse of well-formed lines; returns (columns of accepted lines, accepted mask).

    One pass of :func:`nodewatch.tasks.ingest._syslog_kernel.scan_rsyslog` (timestamp as
    :func:`~nodewatch.tasks.ingest.syslog_rfc5424.rfc3339_fast`, then ``host tag[pid]: message`` as
    :func:`~nodewatch.tasks.ingest.syslog_rfc3164.host_tag_fast`); other lines go to :func:`slow`.
    """
    from nodewatch.tasks.ingest import _syslog_kernel as kern

    s = block.starts[idx]
    e = block.ends[idx]
    n = len(idx)
    ok, time = np.empty(n, np.bool_), np.empty(n, np.int64)
    pos = host_tag_arrays(n)
    kern.scan_rsyslog(
        block.buf, s, e, ok, time, pos["hs"], pos["he"], pos["tag_end"], pos["pid"], pos["ms"], pos["has_tag"], pos["has_pid"]
    )
    k = None if ok.all() else ok
    time = time if k is None else time[k]
    m = len(time)
    none = np.ones(m, bool)
    cols = {
        "time": time,
        **host_tag_columns(block, pos, e, k),
        "facility": masked(np.zeros(m, np.int64), none),
        "severity": masked(np.zeros(m, np.int64), none),
        "source_format": const_str(FORMAT, m),
    }
    return cols, ok


def slow(line: str, ctx: ParseContext) -> dict | str:
    """Per-line parser (the reference the vectorised pass must agree with): raw row or reject reason."""
    ts, sep, rest = line.partition(" ")
    if not sep or not _YEAR_RE.match(ts):
        return "parse: not an rsyslog file-format line (expected 'TIMESTAMP host tag: message')"
    time = rfc3339_slow(ts)
    if isinstance(time, str):
        return time
    if not rest or rest.startswith(" "):
        return "parse: no host name after the timestamp"
    return {"time": time, **host_tag_slow(rest), "facility": None, "severity": None, "source_format": FORMAT}


_SNIFF_RE = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d) \S+ ")


def sniff(head: bytes) -> float:
    """Share of the first non-empty lines (up to 200) that look like ``RSYSLOG_FileFormat``."""
    return sniff_share(head, _SNIFF_RE)
