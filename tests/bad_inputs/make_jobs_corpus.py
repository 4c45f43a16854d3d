"""Generate the bad-input corpus for the job-record parsers (``tests/bad_inputs/jobs/``).

Run ``python tests/bad_inputs/make_jobs_corpus.py`` to (re)write the files; ``tests/test_jobs_parsers.py``
checks that the committed files equal what this script generates and that every file gives its
expected outcome (:data:`EXPECTED`): either an :class:`~nodewatch.tasks.ingest.inputs.InputError` whose message
contains the given text, or parsed rows plus rejects with exact reasons (by line number).
``quarantined`` gives the exact reason (failing expectations, ``; ``-joined) with which the GX suite of
``schemas/jobs.py`` then quarantines a parsed row, and ``duplicates`` how many rows are dropped as
duplicates (both checked by ``tests/test_jobs_ingest_pipeline.py``).
"""

from __future__ import annotations

import gzip
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "jobs"

SWF_HEADER = """; Version: 2.2
; Computer: Test cluster
; UnixStartTime: 1700000000
; TimeZoneString: UTC
; MaxNodes: 4
; MaxProcs: 16
; Partition: 1 batch
;
"""
SWF_JOBS = [
    "    1      0     10    100    4    -1   -1    4    600   -1  1  7  3  -1  1  1 -1 -1",
    "    2     60     -1    200    8    -1   -1    8   1200   -1  0  7  3  -1  1  1 -1 -1",
    "    3    120      5     50   16    -1   -1   16    300   -1  5  8  3  -1  1  1 -1 -1",
]

SWF_NEVER_STARTED = [
    # cancelled in the queue after 74 s (run time -1): staged, no start/elapsed, nodes from the 8 requested procs
    "    4    180     74     -1   -1    -1   -1    8    300   -1  5  7  3  -1  1  1 -1 -1",
    # failed in the queue (run time 0, no processors at all; LLNL-Thunder has 1,058 such): staged, nodes null
    "    5    240     -1      0   -1    -1   -1   -1    600   -1  0  7  3  -1  1  1 -1 -1",
    # status -1 (UNKNOWN) and no run time: staged as never started
    "    6    300     10     -1   -1    -1   -1    4    600   -1 -1  7  3  -1  1  1 -1 -1",
    # wait time unknown but a run time: it ran (start null, elapsed 100): staged
    "    7    360     -1    100    4    -1   -1    4    600   -1  1  7  3  -1  1  1 -1 -1",
    # COMPLETED without a run time: bad data, quarantined
    "    8    420      5     -1    4    -1   -1    4    600   -1  1  7  3  -1  1  1 -1 -1",
    # ran 50 s on an unknown number of processors: bad data, quarantined
    "    9    480      5     50   -1    -1   -1   -1    600   -1  1  7  3  -1  1  1 -1 -1",
]
"""SWF lines of jobs that never started (valid records) and of near misses that stay quarantined."""

SACCT_HEADER = (
    "JobID|JobIDRaw|Cluster|Partition|User|Group|JobName|Submit|Start|End|Elapsed|Timelimit|State|ExitCode|NNodes|NCPUS|NodeList"
)


def swf_job(job: str = "4", submit: str = "180", wait: str = "0", run: str = "10", procs: str = "4", part: str = "1") -> str:
    """One SWF job line (other fields fixed)."""
    return f"{job:>5} {submit:>6} {wait:>6} {run:>6} {procs:>4}    -1   -1 {procs:>4}    600   -1  1  7  3  -1  1 {part:>2} -1 -1"


def sacct_row(
    job: str = "100",
    nodelist: str = "n[01-02]",
    nnodes: str = "2",
    start: str = "2024-03-01T10:00:00",
    end: str = "2024-03-01T11:00:00",
    elapsed: str = "01:00:00",
    user: str = "alice",
    name: str = "job",
    state: str = "COMPLETED",
    submit: str = "2024-03-01T09:59:00",
) -> str:
    """One ``sacct -P`` line of :data:`SACCT_HEADER` with the given values."""
    raw = job.split(".")[0]
    return "|".join(
        [
            job,
            raw,
            "testcl",
            "batch",
            user,
            "users",
            name,
            submit,
            start,
            end,
            elapsed,
            "02:00:00",
            state,
            "0:0",
            nnodes,
            "8",
            nodelist,
        ]
    )


def _t(seconds: int) -> datetime:
    """The UTC time ``seconds`` after the corpus SWF header's UnixStartTime."""
    return datetime.fromtimestamp(1_700_000_000 + seconds, UTC)


@dataclass(frozen=True)
class Expect:
    """Expected parser outcome for one corpus file."""

    error: str | None = None  # InputError message must contain this
    rows: int | None = None  # number of parsed rows
    rejects: dict[int, str] = field(default_factory=dict)  # line -> exact reason
    values: dict[str, list[object]] = field(default_factory=dict)  # column -> parsed values
    quarantined: dict[int, str] = field(default_factory=dict)  # line -> exact reason the GX suite quarantines it with
    duplicates: int = 0  # rows the pipeline drops as duplicates


def _swf(lines: list[str], header: str = SWF_HEADER, eol: str = "\n") -> bytes:
    return (header + "\n".join(lines) + "\n").replace("\n", eol).encode()


def _sacct(lines: list[str], header: str = SACCT_HEADER, eol: str = "\n") -> bytes:
    return (eol.join([header, *lines]) + eol).encode()


def _cut_gzip(data: bytes) -> bytes:
    """Gzip ``data`` and keep only the first half of the compressed bytes (a truncated download)."""
    z = gzip.compress(data, mtime=0)
    return z[: len(z) // 2]


def build() -> dict[str, bytes]:
    """File name -> content of every corpus file (deterministic)."""
    rng = random.Random(20240301)
    garbage = bytes(rng.randrange(256) for _ in range(4096))
    good_swf = _swf(SWF_JOBS)
    good_sacct = _sacct([sacct_row(), sacct_row(job="101", nodelist="n03", nnodes="1")])
    files: dict[str, bytes] = {
        # --- SWF ---
        "swf_empty.swf": b"",
        "swf_garbage.swf": garbage,
        "swf_wrong_delimiter.swf": _swf([",".join(line.split()) for line in SWF_JOBS]),
        "swf_truncated_line.swf": good_swf + b"    4    180     1",
        "swf_truncated.swf.gz": _cut_gzip(
            _swf([swf_job(job=str(i), submit=str(i * 7), run=str(rng.randrange(1, 99999))) for i in range(1, 2001)])
        ),
        "swf_crlf.swf": _swf(SWF_JOBS, eol="\r\n"),
        "swf_non_utf8.swf": _swf(SWF_JOBS).replace(b"Test cluster", b"Ume\xe5 cluster")
        + swf_job(part="\xff\xfe").encode("latin-1")
        + b"\n",
        "swf_negative_runtime.swf": _swf([*SWF_JOBS, swf_job(run="-5")]),
        "swf_nodes_zero.swf": _swf([*SWF_JOBS, swf_job(procs="0")]),
        "swf_duplicate_rows.swf": _swf([*SWF_JOBS, SWF_JOBS[0]]),
        "swf_future.swf": _swf([*SWF_JOBS, swf_job(submit="9999999999")]),
        "swf_too_many_fields.swf": _swf([*SWF_JOBS, SWF_JOBS[0] + " 7"]),
        "swf_fractional_id.swf": _swf([*SWF_JOBS, swf_job(job="4.5")]),
        # --- sacct ---
        "sacct_empty.log": b"",
        "sacct_garbage.log": garbage,
        "sacct_wrong_delimiter.log": good_sacct.replace(b"|", b","),
        "sacct_missing_columns.log": _sacct(["100|testcl|2024-03-01T10:00:00|2"], header="JobID|Cluster|Start|NNodes"),
        "sacct_crlf.log": _sacct([sacct_row(), sacct_row(job="101", nodelist="n03", nnodes="1")], eol="\r\n"),
        # a latin-1 job name (column not kept: row accepted) and a latin-1 user name (kept: row rejected)
        "sacct_non_utf8.log": _sacct([sacct_row(name="cafe"), sacct_row(job="101", user="bXb")])
        .replace(b"|cafe|", b"|caf\xe9|")
        .replace(b"|bXb|", b"|b\xffb|"),
        "sacct_truncated.log": good_sacct + sacct_row(job="102").encode()[:40],
        "sacct_truncated.log.gz": _cut_gzip(
            _sacct([sacct_row(job=str(100 + i), user=f"u{rng.randrange(10**6)}") for i in range(2000)])
        ),
        "sacct_end_before_start.log": _sacct(
            [sacct_row(start="2024-03-01T12:00:00", end="2024-03-01T11:00:00", elapsed="00:00:00")]
        ),
        # a job that ran on 0 nodes: bad data (a never-started job's NNodes 0 is "none allocated": see below)
        "sacct_nodes_zero.log": _sacct([sacct_row(nnodes="0", nodelist="None assigned")]),
        "sacct_never_started.log": _sacct(
            [
                sacct_row(nnodes="0", nodelist="None assigned", state="PENDING", start="Unknown", end="Unknown",
                          elapsed="00:00:00"),
                sacct_row(job="101", nnodes="2", nodelist="None assigned", state="CANCELLED by 4242", start="Unknown",
                          end="2024-03-01T10:30:00", elapsed="00:00:00"),
                sacct_row(job="102", nnodes="1", nodelist="None assigned", start="Unknown", end="Unknown",
                          elapsed="00:00:00"),  # COMPLETED without ever starting: bad data
                sacct_row(job="103", state="RUNNING", end="Unknown", elapsed="00:10:00"),
            ]
        ),
        "swf_never_started.swf": _swf([*SWF_JOBS, *SWF_NEVER_STARTED]),
        "sacct_bad_hostlist.log": _sacct(
            [sacct_row(), sacct_row(job="101", nodelist="n[1-"), sacct_row(job="102", nodelist="n[5-3]")]
        ),
        "sacct_hostile_nodes.log": _sacct(
            [
                sacct_row(job="101", nodelist="../x"),
                sacct_row(job="102", nodelist="/"),
                sacct_row(job="103", nodelist="n1,n\x00x"),
                sacct_row(job="104", nodelist=".."),
            ]
        ),
        "sacct_duplicate_rows.log": _sacct([sacct_row(), sacct_row()]),
        "sacct_bad_values.log": _sacct([sacct_row(elapsed="1:xx"), sacct_row(job="abc"), sacct_row(start="2024-13-45T99:00:00")]),
        "sacct_future.log": _sacct([sacct_row(submit="2099-01-01T00:00:00", start="2099-01-01T00:00:00", end="Unknown")]),
        "sacct_pipes_and_newlines.log": _sacct(
            [sacct_row(name="a|b"), sacct_row(job="101", name="x\ny|z"), sacct_row(job="102")]
        ),
    }
    return files


EXPECTED: dict[str, Expect] = {
    "swf_empty.swf": Expect(error="swf_empty.swf: empty file (0 bytes), line 0"),
    "swf_garbage.swf": Expect(error="swf_garbage.swf: not an SWF trace ("),
    "swf_wrong_delimiter.swf": Expect(error="swf_wrong_delimiter.swf: not an SWF trace (field 1 (job_number) is not a number"),
    "swf_truncated_line.swf": Expect(rows=3, rejects={12: "parse: expected 18 whitespace-separated fields, found 3"}),
    "swf_truncated.swf.gz": Expect(error="swf_truncated.swf.gz: stream ends unexpectedly"),
    "swf_crlf.swf": Expect(rows=3, values={"elapsed_s": [100, 200, 50], "nodes": [1, 2, 4]}),
    "swf_non_utf8.swf": Expect(rows=3, rejects={12: "parse: field 16 (partition) is not a number"}),
    "swf_negative_runtime.swf": Expect(
        rows=4,
        values={"elapsed_s": [100, 200, 50, -5]},
        quarantined={
            12: "expect_column_values_to_be_between(elapsed_s>=0); "
            "expect_column_pair_values_a_to_be_greater_than_b(end_time>=start_time)"
        },
    ),
    "swf_nodes_zero.swf": Expect(
        rows=4,
        values={"nodes": [1, 2, 4, 0]},
        quarantined={12: "expect_column_values_to_be_between(nodes>=1); expect_column_values_to_be_between(cores>=1)"},
    ),
    "swf_duplicate_rows.swf": Expect(rows=4, values={"job_id": ["1", "2", "3", "1"]}, duplicates=1),  # of line 9
    "swf_future.swf": Expect(
        rows=3, rejects={12: "parse: time is more than 1 day after the file's reference time (future timestamp)"}
    ),
    "swf_too_many_fields.swf": Expect(rows=3, rejects={12: "parse: expected 18 whitespace-separated fields, found 19"}),
    "swf_fractional_id.swf": Expect(
        rows=3, rejects={12: "parse: job number, processors, requested time, status, user, group and partition must be integers"}
    ),
    "sacct_empty.log": Expect(error="sacct_empty.log: empty file (0 bytes), line 0"),
    "sacct_garbage.log": Expect(error="sacct_garbage.log: not a sacct -P dump"),
    "sacct_wrong_delimiter.log": Expect(
        error="sacct_wrong_delimiter.log: not a sacct -P dump (first line has no '|'-separated header), line 1"
    ),
    "sacct_missing_columns.log": Expect(
        error="sacct_missing_columns.log: sacct header lacks required column(s) Submit, End, State, line 1"
    ),
    "sacct_crlf.log": Expect(rows=2, values={"job_id": ["100", "101"], "node_list": [["n01", "n02"], ["n03"]]}),
    "sacct_non_utf8.log": Expect(rows=1, rejects={3: "parse: column User is not valid UTF-8"}),
    "sacct_truncated.log": Expect(rows=2, rejects={4: "parse: record has 8 fields, header has 17 (truncated record?)"}),
    "sacct_truncated.log.gz": Expect(
        error="sacct_truncated.log.gz: stream ends unexpectedly (truncated archive (gzip stream ends before its end "
        "marker after 142360 decompressed bytes); re-fetch the file for the rest), line 989"
    ),
    "sacct_end_before_start.log": Expect(
        rows=1, quarantined={2: "expect_column_pair_values_a_to_be_greater_than_b(end_time>=start_time)"}
    ),
    "sacct_nodes_zero.log": Expect(
        rows=1,
        values={"nodes": [0], "node_list": [None], "elapsed_s": [3600]},
        quarantined={2: "expect_column_values_to_be_between(nodes>=1)"},
    ),
    # jobs that never started are valid records (issue 24): staged with their state, no start/elapsed
    "sacct_never_started.log": Expect(
        rows=4,
        values={
            "state": ["PENDING", "CANCELLED", "COMPLETED", "RUNNING"],
            "start_time": [None, None, None, datetime(2024, 3, 1, 10, tzinfo=UTC)],
            "elapsed_s": [None, None, None, 600],
            "nodes": [None, 2, 1, 2],
            "end_time": [None, datetime(2024, 3, 1, 10, 30, tzinfo=UTC), None, None],
        },
        quarantined={4: "expect_column_values_to_be_in_set(state, job never started)"},
    ),
    "swf_never_started.swf": Expect(
        rows=9,
        values={
            "state": ["COMPLETED", "FAILED", "CANCELLED", "CANCELLED", "FAILED", "UNKNOWN", "COMPLETED", "COMPLETED",
                      "COMPLETED"],
            "start_time": [_t(10), None, _t(125), None, None, None, None, None, _t(485)],
            "elapsed_s": [100, 200, 50, None, None, None, 100, None, 50],
            "nodes": [1, 2, 4, 2, None, 1, 1, 1, None],
        },
        quarantined={
            16: "expect_column_values_to_be_in_set(state, job never started)",
            17: "expect_column_values_to_not_be_null(nodes, job started)",
        },
    ),
    "sacct_bad_hostlist.log": Expect(
        rows=1,
        rejects={3: "parse: hostlist 'n[1-': unbalanced '[' (missing ']')", 4: "parse: hostlist 'n[5-3]': reversed range '5-3'"},
    ),
    "sacct_hostile_nodes.log": Expect(
        rows=0,
        rejects={
            2: "parse: invalid node name '../x' in NodeList",
            3: "parse: invalid node name '/' in NodeList",
            4: "parse: invalid node name 'n\\x00x' in NodeList",
            5: "parse: invalid node name '..' in NodeList",
        },
    ),
    "sacct_duplicate_rows.log": Expect(rows=2, values={"job_id": ["100", "100"]}, duplicates=1),  # of line 2
    "sacct_bad_values.log": Expect(
        rows=0,
        rejects={
            2: "parse: bad duration '1:xx' (expected [D-]HH:MM:SS)",
            3: "parse: bad JobID 'abc'",
            4: "parse: bad Start time '2024-13-45T99:00:00' (expected YYYY-MM-DDTHH:MM:SS)",
        },
    ),
    "sacct_future.log": Expect(
        rows=0,
        rejects={2: "parse: Submit 2099-01-01T00:00:00 is more than 1 day after the file's reference time (future timestamp)"},
    ),
    "sacct_pipes_and_newlines.log": Expect(rows=3, values={"job_id": ["100", "101", "102"], "source_offset": [2, 3, 5]}),
}


def write(dest: Path = OUT_DIR) -> list[Path]:
    """Write the corpus into ``dest``; returns the written paths."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data in build().items():
        p = dest / name
        p.write_bytes(data)
        out.append(p)
    return out


if __name__ == "__main__":
    paths = write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR)
    print(f"wrote {len(paths)} files to {paths[0].parent}")
