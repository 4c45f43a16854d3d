"""FINJ workload files: parse (strictly, before anything runs) and generate (seeded).

Format (Netti et al., Sec. 3.1 and Fig. 5): a header ``timestamp; duration; seqNum; isFault; cores; args``
then one task per line, fields separated by ``;`` (spaces/tabs around fields ignored):

* ``timestamp``: start offset in seconds from the first task (number >= 0);
* ``duration``: the task's maximum allowed duration in seconds (number >= 0; 0 = the engine's cap);
* ``seqNum``: unique integer id;
* ``isFault``: ``True``/``False``;
* ``cores``: ``None`` (all cores) or a list such as ``0-7``, ``6``, ``0,2-3`` (each < the core count);
* ``args``: a program of this package (``tasks/finj/programs.py``) and an optional ``l`` for low intensity,
  e.g. ``leak l``. A path prefix (``faultlib/leak 300 l``, FINJ's own style) is accepted: the basename
  names the program and a bare number (FINJ's duration argument) is ignored.

Any malformed line is a :class:`WorkloadError` naming the file and line; nothing is started.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nodewatch.tasks.finj.catalog import APPS, FAULTS

HEADER = ("timestamp", "duration", "seqNum", "isFault", "cores", "args")
MAX_LINES = 1_000_000
MAX_SECONDS = 10 * 365 * 86400.0


class WorkloadError(ValueError):
    """A workload file that cannot be run (one line, names the file and line)."""


@dataclass(frozen=True)
class Task:
    """One workload entry (FINJ Sec. 3.1)."""

    timestamp: float
    duration: float
    seq: int
    is_fault: bool
    cores: tuple[int, ...] | None
    program: str
    low: bool = False

    @property
    def label(self) -> str:
        """Class label of a fault task (``leak`` or ``leak_l``); applications have none."""
        return f"{self.program}_l" if self.low else self.program

    def args(self) -> str:
        """The ``args`` field as written back to a workload file."""
        return f"{self.program} l" if self.low else self.program


def parse_cores(text: str, n_cores: int) -> tuple[int, ...] | None:
    """``None`` or a core list like ``0-3,6``; raises ValueError for anything else or a core >= ``n_cores``."""
    t = text.strip()
    if t in ("None", ""):
        return None
    out: set[int] = set()
    for part in t.split(","):
        m = re.fullmatch(r"\s*(\d{1,4})\s*(?:-\s*(\d{1,4})\s*)?", part)
        if not m:
            raise ValueError(f"invalid cores {text.strip()!r}: use None, N, N-M or a comma list")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError(f"invalid core range {part.strip()!r}")
        if hi >= n_cores:
            raise ValueError(f"core {hi} out of range: this machine has cores 0-{n_cores - 1}")
        out.update(range(lo, hi + 1))
    return tuple(sorted(out))


def _number(field: str, what: str) -> float:
    try:
        v = float(field)
    except ValueError:
        raise ValueError(f"{what} {field!r} is not a number") from None
    if not math.isfinite(v):
        raise ValueError(f"{what} {field!r} is not finite")
    if v < 0:
        raise ValueError(f"negative {what} {field}")
    if v > MAX_SECONDS:
        raise ValueError(f"{what} {field} is out of range (> 10 years)")
    return v


def _program(args: str, is_fault: bool) -> tuple[str, bool]:
    toks = args.split()
    if not toks:
        raise ValueError("empty args")
    prog = toks[0].rsplit("/", 1)[-1]
    rest = [t for t in toks[1:] if not re.fullmatch(r"\d+", t)]
    known = FAULTS if is_fault else APPS
    if prog not in known:
        kind = "fault" if is_fault else "application"
        raise ValueError(f"unknown {kind} program {prog[:40]!r} (known: {', '.join(sorted(known))})")
    if rest not in ([], ["l"], ["low"]):
        raise ValueError(f"unexpected arguments {' '.join(rest)[:40]!r} (only 'l' for low intensity)")
    return prog, bool(rest)


def parse_line(line: str, n_cores: int) -> Task:
    """One task line -> :class:`Task` (ValueError with the reason)."""
    fields = [f.strip() for f in line.split(";")]
    if len(fields) != len(HEADER):
        raise ValueError(f"expected {len(HEADER)} ';'-separated fields ({'; '.join(HEADER)}), got {len(fields)}")
    ts = _number(fields[0], "timestamp")
    dur = _number(fields[1], "duration")
    if not re.fullmatch(r"\d{1,9}", fields[2]):
        raise ValueError(f"seqNum {fields[2][:20]!r} is not a non-negative integer")
    if fields[3] not in ("True", "False", "true", "false"):
        raise ValueError(f"isFault {fields[3][:20]!r} must be True or False")
    is_fault = fields[3].lower() == "true"
    cores = parse_cores(fields[4], n_cores)
    prog, low = _program(fields[5], is_fault)
    return Task(ts, dur, int(fields[2]), is_fault, cores, prog, low)


def parse_text(text: str, n_cores: int, source: str = "<workload>") -> list[Task]:
    """Parse a whole workload; the first problem raises :class:`WorkloadError` naming ``source:line``."""
    tasks: list[Task] = []
    seqs: dict[int, int] = {}
    header_seen = False
    for no, raw in enumerate(text.splitlines(), start=1):
        if no > MAX_LINES:
            raise WorkloadError(f"{source}: more than {MAX_LINES} lines")
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not header_seen:
            names = tuple(f.strip() for f in line.split(";"))
            if names != HEADER:
                raise WorkloadError(f"{source}:{no}: header must be '{'; '.join(HEADER)}'")
            header_seen = True
            continue
        try:
            task = parse_line(line, n_cores)
        except ValueError as e:
            raise WorkloadError(f"{source}:{no}: {e}") from None
        if task.seq in seqs:
            raise WorkloadError(f"{source}:{no}: duplicate seqNum {task.seq} (first on line {seqs[task.seq]})")
        seqs[task.seq] = no
        tasks.append(task)
    if not header_seen:
        raise WorkloadError(f"{source}: empty workload (no header)")
    return sorted(tasks, key=lambda t: (t.timestamp, t.seq))


def read_workload(path: str | os.PathLike[str], n_cores: int | None = None) -> list[Task]:
    """Read and validate a workload file (regular file, UTF-8, at most 64 MiB)."""
    from nodewatch.tasks.core.files import UnsafeInputError, open_regular

    n = n_cores or os.cpu_count() or 1
    p = Path(path)
    try:
        with os.fdopen(open_regular(p), "rb") as fh:
            data = fh.read(64 * 2**20 + 1)
    except UnsafeInputError as e:
        raise WorkloadError(f"{p.name}: {str(e).split(': ', 1)[-1]}") from None
    except OSError as e:
        raise WorkloadError(f"{p.name}: cannot read: {e.strerror or e}") from None
    if len(data) > 64 * 2**20:
        raise WorkloadError(f"{p.name}: larger than 64 MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise WorkloadError(f"{p.name}:{line}: not UTF-8 text") from None
    if "\x00" in text:
        raise WorkloadError(f"{p.name}:{text[: text.index(chr(0))].count(chr(10)) + 1}: NUL byte")
    return parse_text(text, n, p.name)


def format_workload(tasks: Sequence[Task]) -> str:
    """Workload file text for ``tasks``."""
    lines = ["; ".join(HEADER)]
    for t in tasks:
        cores = "None" if t.cores is None else ",".join(map(str, t.cores))
        lines.append(f"{t.timestamp:.0f}; {t.duration:.0f}; {t.seq}; {t.is_fault}; {cores}; {t.args()}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class GeneratorSpec:
    """Statistics of a generated workload (Netti et al. Sec. 5.2).

    Fault inter-arrival times: exponentiated Weibull (``scipy.stats.exponweib`` shapes ``a``, ``c``) rescaled
    so that its mean is ``fault_gap_mean`` s; fault durations: Johnson SU (``scipy.stats.johnsonsu`` shapes
    ``a``, ``b``) rescaled to a mean of ``fault_dur_mean`` s, clipped to [``fault_dur_min``, ``fault_dur_max``].
    The paper does not publish its fitted shapes (fitted on Grid'5000 failure-trace data); the defaults
    here are ours and are written into every generated workload's manifest. Applications: normal
    durations (mean ``app_dur_mean``), gaps chosen so that applications run ``busy`` (75 %) of the time.
    """

    span: float = 7500.0
    fault_gap_mean: float = 330.0
    fault_dur_mean: float = 240.0
    fault_dur_min: float = 120.0
    fault_dur_max: float = 480.0
    weib_a: float = 2.0
    weib_c: float = 1.2
    jsu_a: float = -1.0
    jsu_b: float = 1.5
    app_dur_mean: float = 300.0
    app_dur_sd: float = 60.0
    busy: float = 0.75
    faults: tuple[str, ...] = tuple(sorted(FAULTS))
    apps: tuple[str, ...] = tuple(sorted(APPS))
    low: bool = True
    """Also pick low-intensity variants (FINJ's 'l'; the class label is the program either way)."""
    min_fault_gap: float = 60.0
    """Healthy seconds between the end of a fault and the next fault (faults never overlap; with >= 60 s no
    60-s window holds two faults)."""
    io_faults: tuple[str, ...] = ("ioerr",)
    """Faults only I/O-bound applications can show (the I/O-error shim fails their reads/writes): an application
    that overlaps one of them runs ``fileio`` (the paper injects its disk faults in blocks of I/O applications,
    Table 1); ``fileio`` also runs at other times, picked like any application."""
    core_ids: tuple[int, ...] | None = None
    """The target node's cores when the campaign is pinned to some of them (e.g. ``(1,)``: a 1-core node on
    core 1): applications run on all of them, each fault on one of them. ``None``: all cores of the node."""
    balanced: bool = True
    """Pick faults from shuffled rounds of all programs (every program once per round; intensity alternates
    from one round to the next, starting at random), so every program recurs all along the span and
    time-ordered CV folds each see most programs (FINJ picks uniformly at random; this is the same
    distribution without its count imbalance)."""


def _scaled(dist, mean: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of a frozen scipy distribution multiplied so the distribution's mean is ``mean``."""
    m = float(dist.mean())
    return dist.rvs(size=n, random_state=rng) * (mean / m)


def generate(spec: GeneratorSpec, seed: int, n_cores: int) -> list[Task]:
    """A seeded workload of ``spec.span`` seconds: applications on all cores, faults on one random core."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    tasks: list[Task] = []
    # applications: back-to-back with normal gaps so that sum(durations) ~= busy * span
    t = 0.0
    gap_mean = spec.app_dur_mean * (1 - spec.busy) / spec.busy
    while t < spec.span:
        dur = float(np.clip(rng.normal(spec.app_dur_mean, spec.app_dur_sd), 30.0, None))
        dur = min(dur, spec.span - t)
        if dur >= 30:
            tasks.append(Task(round(t), round(dur), 0, False, spec.core_ids, str(rng.choice(spec.apps))))
        t += dur + max(5.0, rng.normal(gap_mean, gap_mean / 4))
    # faults: exponentiated-Weibull gaps between starts, Johnson SU durations, never overlapping
    n = int(spec.span / spec.fault_gap_mean * 3) + 10
    jsu = stats.johnsonsu(spec.jsu_a, spec.jsu_b)
    shift = -float(jsu.ppf(0.001))  # Johnson SU has support on all reals: shift to positive before scaling
    durs = (jsu.rvs(size=n, random_state=rng) + shift) * (spec.fault_dur_mean / (float(jsu.mean()) + shift))
    durs = np.clip(durs, spec.fault_dur_min, spec.fault_dur_max)
    gaps = _scaled(stats.exponweib(spec.weib_a, spec.weib_c), spec.fault_gap_mean, n, rng)
    bag: list[tuple[str, bool]] = []
    rounds = int(rng.integers(2))
    t, end_prev = 0.0, -math.inf
    for gap, dur in zip(gaps, durs, strict=True):
        t = max(t + float(gap), end_prev + spec.min_fault_gap)
        if t + dur > spec.span:
            break
        if spec.balanced:
            if not bag:
                low_round = spec.low and rounds % 2 == 1
                bag = [(spec.faults[i], low_round) for i in rng.permutation(len(spec.faults))]
                rounds += 1
            prog, low = bag.pop()
        else:
            prog = str(rng.choice(spec.faults))
            low = bool(spec.low and rng.random() < 0.5)
        core = int(rng.choice(spec.core_ids)) if spec.core_ids else int(rng.integers(n_cores))
        tasks.append(Task(round(t), round(float(dur)), 0, True, (core,), prog, low))
        end_prev = round(t) + round(float(dur))
    io_spans = [(x.timestamp, x.timestamp + x.duration) for x in tasks if x.is_fault and x.program in spec.io_faults]
    if io_spans and "fileio" in APPS:
        tasks = [
            Task(x.timestamp, x.duration, 0, False, x.cores, "fileio", x.low)
            if not x.is_fault and any(a < x.timestamp + x.duration and x.timestamp < b for a, b in io_spans)
            else x
            for x in tasks
        ]
    tasks.sort(key=lambda x: (x.timestamp, x.is_fault))
    return [Task(x.timestamp, x.duration, i + 1, x.is_fault, x.cores, x.program, x.low) for i, x in enumerate(tasks)]


def concat(blocks: Sequence[Sequence[Task]], pause: float = 30.0) -> list[Task]:
    """Blocks one after the other (each shifted to start ``pause`` s after the previous block's last end),
    renumbered: the paper's dataset is such blocks (CPU/memory faults with CPU applications, disk faults with
    I/O applications, Table 1)."""
    out: list[Task] = []
    offset = 0.0
    for block in blocks:
        end = 0.0
        for x in block:
            out.append(Task(x.timestamp + offset, x.duration, 0, x.is_fault, x.cores, x.program, x.low))
            end = max(end, x.timestamp + x.duration)
        offset += end + pause
    return [Task(x.timestamp, x.duration, i + 1, x.is_fault, x.cores, x.program, x.low) for i, x in enumerate(out)]
