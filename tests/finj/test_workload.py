"""FINJ workload files: strict parsing (bad-input corpus) and the seeded generator's statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nodewatch.tasks.finj.workload import (
    GeneratorSpec,
    Task,
    WorkloadError,
    concat,
    format_workload,
    generate,
    parse_cores,
    parse_text,
    read_workload,
)

HEADER = "timestamp; duration; seqNum; isFault; cores; args\n"
SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "workloads" / "finj_sample_workload.csv"


def test_parse_paper_figure5_style() -> None:
    text = HEADER + "0;1723;1; False; 0-1;./dgemm\n355;244;2; True; 1; faultlib/cpufreq 258\n914;291;3; True; 0;./leak 316 l\n"
    tasks = parse_text(text, n_cores=2)
    assert [t.program for t in tasks] == ["dgemm", "cpufreq", "leak"]
    assert tasks[0].cores == (0, 1) and tasks[1].cores == (1,)
    assert tasks[2].low and tasks[2].label == "leak_l" and not tasks[1].low
    assert tasks[1].duration == 244 and tasks[1].is_fault


def test_roundtrip() -> None:
    tasks = [Task(0, 10, 1, False, None, "stream"), Task(5, 3, 2, True, (1,), "ddot", True)]
    assert parse_text(format_workload(tasks), 2) == tasks


@pytest.mark.skipif(not SAMPLE.is_file(), reason="../shared/data not present")
def test_shared_sample_workload_names_its_first_unknown_program() -> None:
    # the sample runs shell commands (ls, ping) that are no FINJ program of ours: refused, line named
    with pytest.raises(WorkloadError, match=r"finj_sample_workload.csv:2: unknown fault program 'ls'"):
        read_workload(SAMPLE, 2)


BAD = {
    "wrong field count": ("0; 10; 1; True; 0\n", ":2: expected 6"),
    "too many fields": ("0; 10; 1; True; 0; leak; x\n", ":2: expected 6"),
    "negative duration": ("0; -5; 1; True; 0; leak\n", ":2: negative duration"),
    "negative timestamp": ("-1; 5; 1; True; 0; leak\n", ":2: negative timestamp"),
    "nan duration": ("0; nan; 1; True; 0; leak\n", ":2: duration 'nan' is not finite"),
    "huge duration": ("0; 1e30; 1; True; 0; leak\n", ":2: duration 1e30 is out of range"),
    "garbage timestamp": ("abc; 5; 1; True; 0; leak\n", ":2: timestamp 'abc' is not a number"),
    "unknown program": ("0; 5; 1; True; 0; rm -rf /\n", ":2: unknown fault program 'rm'"),
    "app as fault": ("0; 5; 1; True; 0; dgemm\n", ":2: unknown fault program 'dgemm'"),
    "fault as app": ("0; 5; 1; False; 0; leak\n", ":2: unknown application program 'leak'"),
    "core out of range": ("0; 5; 1; True; 7; leak\n", ":2: core 7 out of range"),
    "core range reversed": ("0; 5; 1; True; 1-0; leak\n", ":2: invalid core range"),
    "core garbage": ("0; 5; 1; True; zero; leak\n", ":2: invalid cores"),
    "bad isFault": ("0; 5; 1; yes; 0; leak\n", ":2: isFault 'yes'"),
    "bad seq": ("0; 5; x1; True; 0; leak\n", ":2: seqNum"),
    "extra args": ("0; 5; 1; True; 0; leak --evil\n", ":2: unexpected arguments"),
    "empty args": ("0; 5; 1; True; 0; \n", ":2: empty args"),
    "duplicate seq": ("0; 5; 1; True; 0; leak\n9; 5; 1; True; 0; ddot\n", ":3: duplicate seqNum 1 \\(first on line 2\\)"),
    "hostile path": ("0; 5; 1; True; 0; ../../bin/sh\n", ":2: unknown fault program 'sh'"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_lines_name_the_line(name: str) -> None:
    body, msg = BAD[name]
    with pytest.raises(WorkloadError, match=f"^w.csv{msg}"):
        parse_text(HEADER + body, n_cores=2, source="w.csv")


@pytest.mark.parametrize(
    "data,msg",
    [
        (b"", "empty workload"),
        (b"time;dur\n0;1\n", ":1: header"),
        (HEADER.encode() + b"0; 5; 1; True; 0; le\xffak\n", ":2: not UTF-8"),
        (HEADER.encode() + b"0; 5; 1; True; 0; leak\x00\n", ":2: NUL byte"),
        (HEADER.encode()[:20], ":1: header"),
    ],
)
def test_bad_files(tmp_path: Path, data: bytes, msg: str) -> None:
    p = tmp_path / "w.csv"
    p.write_bytes(data)
    with pytest.raises(WorkloadError, match=msg):
        read_workload(p, 2)


def test_symlink_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text(HEADER + "0; 5; 1; True; 0; leak\n")
    (tmp_path / "link.csv").symlink_to(real)
    with pytest.raises(WorkloadError, match="link.csv: symbolic link"):
        read_workload(tmp_path / "link.csv", 2)


def test_parse_cores() -> None:
    assert parse_cores("None", 4) is None
    assert parse_cores("0,2-3", 4) == (0, 2, 3)
    with pytest.raises(ValueError):
        parse_cores("4", 4)


def test_generator_is_seeded_and_keeps_the_paper_statistics() -> None:
    spec = GeneratorSpec(
        span=200_000, fault_gap_mean=120, fault_dur_mean=60, fault_dur_min=1, fault_dur_max=10_000, min_fault_gap=0
    )
    a, b = generate(spec, 7, 2), generate(spec, 7, 2)
    assert a == b and generate(spec, 8, 2) != a
    faults = [t for t in a if t.is_fault]
    apps = [t for t in a if not t.is_fault]
    # faults never overlap, each on one core
    ends = [t.timestamp + t.duration for t in faults]
    assert all(s >= e for s, e in zip([t.timestamp for t in faults][1:], ends[:-1], strict=False))
    assert all(t.cores is not None and len(t.cores) == 1 for t in faults)
    # Johnson SU durations rescaled to the mean (clipping at 1 s barely moves it)
    assert np.mean([t.duration for t in faults]) == pytest.approx(60, rel=0.08)
    # applications busy ~75 % of the span
    assert sum(t.duration for t in apps) / spec.span == pytest.approx(0.75, abs=0.05)
    # balanced picks: every (fault, intensity) class within one of the others
    from collections import Counter

    c = Counter((t.program, t.low) for t in faults)
    assert len(c) == 16 and max(c.values()) - min(c.values()) <= 1


def test_exponweib_gaps_rescaled_to_mean() -> None:
    # long fault gaps, short faults: start-to-start gaps follow the rescaled exponentiated Weibull
    spec = GeneratorSpec(span=400_000, fault_gap_mean=300, fault_dur_mean=5, fault_dur_min=1, fault_dur_max=20, min_fault_gap=0)
    starts = np.array([t.timestamp for t in generate(spec, 3, 1) if t.is_fault])
    assert np.diff(starts).mean() == pytest.approx(300, rel=0.06)


def test_concat_shifts_and_renumbers() -> None:
    a = [Task(0, 10, 1, False, None, "dgemm")]
    b = [Task(0, 5, 1, True, (0,), "copy")]
    out = concat([a, b], pause=5)
    assert [(t.timestamp, t.seq) for t in out] == [(0, 1), (15, 2)]


def test_generator_rounds_spread_every_program_over_the_span() -> None:
    # defaults (the 2-h campaign's): every program once per round, one intensity per round, alternating, so
    # time-ordered CV folds see every program more than once; faults 60 s apart at least (no window holds two)
    spec = GeneratorSpec(span=8400)
    tasks = generate(spec, 25, 2)
    faults = [t for t in tasks if t.is_fault]
    n = len(spec.faults)
    rounds = [faults[i : i + n] for i in range(0, len(faults), n)]
    assert len(rounds) >= 2
    for r in rounds:
        assert len({t.program for t in r}) == len(r) and len({t.low for t in r}) == 1
    assert [r[0].low for r in rounds[1:]] == [not r[0].low for r in rounds[:-1]]
    gaps = [b.timestamp - (a.timestamp + a.duration) for a, b in zip(faults, faults[1:], strict=False)]
    assert min(gaps) >= 60 - 1
    assert np.mean([t.duration for t in faults]) == pytest.approx(240, rel=0.15)
    # an application overlapping an I/O-error fault is the file I/O application (else the fault has no effect)
    for f in (t for t in faults if t.program == "ioerr"):
        over = [
            a
            for a in tasks
            if not a.is_fault and a.timestamp < f.timestamp + f.duration and f.timestamp < a.timestamp + a.duration
        ]
        assert all(a.program == "fileio" for a in over)
