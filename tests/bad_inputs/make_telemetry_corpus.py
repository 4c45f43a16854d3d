"""Generate the bad-input corpus of the telemetry, topology and reservations sources.

``python tests/bad_inputs/make_telemetry_corpus.py OUT_DIR`` writes every file into ``OUT_DIR``
and prints the cases; ``tests/test_telemetry_bad_inputs.py`` calls :func:`generate` into a
temporary directory (nothing is committed but this script), ingests each case through the real
pipeline (``nodewatch.tasks.ingest.pipeline.ingest_files``) and asserts the exact outcome in :class:`Case`:
the quarantined-file message, or the staged / duplicate counts and the quarantine reason of every
rejected line (so no valid row of a bad file can be lost silently: ``rows_in = staged +
quarantined + duplicates`` and the staged count is exact).

Known nodes for the telemetry cases: :data:`KNOWN_NODES` with alias ``n001-ib`` -> ``n001``.
"""

from __future__ import annotations

import gzip
import io
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nodewatch.schemas.telemetry import range_label

KNOWN_NODES = frozenset({"n001", "n002", "n003", "n004", "broadwell-000", "broadwell-003"})
ALIASES = {"n001-ib": "n001"}

RX = "expect_column_values_to_match_regex(node)"
INSET = "expect_column_values_to_be_in_set(node)"
HOSTILE = f"{RX}; {INSET}"
LONG = f"expect_column_value_lengths_to_be_between(node); {INSET}"
"""A name longer than 63 characters fails the node-name length expectation."""
RANGE = "expect_metric_values_in_catalogue_range(value)"
"""Prefix of every range reason; the full reason names metric, range and unit (:func:`range_label`)."""
FIN = "expect_column_values_to_be_finite(value)"
NAN = f"expect_column_values_to_not_be_null(value); {FIN}"
CAT = "expect_metric_in_catalogue(metric)"
TIME = "expect_column_values_to_be_between(time>=1990-01-01T00:00:00+00:00,time<=*"
"""Reasons ending in ``*`` are prefixes (the upper time bound is "now + tolerance")."""

HEADER = "timestamp,node,metric,value"
T0 = pd.Timestamp("2024-03-01T00:00:00Z")


@dataclass
class Case:
    """One bad input and its exact expected outcome.

    Attributes:
        name: case id.
        source: ``telemetry``, ``topology`` or ``reservations``.
        files: file names (in the corpus directory), ingested in this order in one run.
        fmt: ``--format`` value.
        file_error: text the quarantined-file message of the *first* file must contain (``None``: no file error).
        staged: rows staged. duplicates: rows dropped as duplicates.
        quarantined: ``source_offset -> reason`` of every quarantined row (``*`` suffix = prefix match);
            one entry per row, several rows may share an offset (wide formats), so values are lists.
        skipped_files: files skipped as byte-identical to an earlier one.
        prefix_rows: for truncated inputs, the staged rows must be lines 2..k+1 of this many written rows.
    """

    name: str
    source: str
    files: list[str]
    fmt: str = "auto"
    file_error: str | None = None
    staged: int = 0
    duplicates: int = 0
    quarantined: dict[int, list[str]] = field(default_factory=dict)
    skipped_files: int = 0
    prefix_rows: int | None = None


def _t(minute: int) -> str:
    return (T0 + pd.Timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _csv(rows: list[str], header: str = HEADER) -> bytes:
    return ("\n".join([header, *rows]) + "\n").encode()


def _long_parquet(n: int) -> bytes:
    t = pd.date_range(T0, periods=n, freq="min")
    tab = pa.table({"timestamp": t, "node": ["n001"] * n, "metric": ["temp_cpu0"] * n, "value": np.linspace(30, 60, n)})
    buf = io.BytesIO()
    pq.write_table(tab, buf, row_group_size=max(1, n // 4))
    return buf.getvalue()


def _turin(columns: tuple[str, ...] = ("power", "cpu1", "cpu2", "cpus_alloc"), n: int = 10, physical: bool = False) -> bytes:
    """A Turin per-node file: standardised values (float32, -1..1, like the older ADMIRE files) or, with
    ``physical``, values in units like ``turin/raw/`` (power 200.. W with one 0.155 W sensor fault, degC, CPU counts)."""
    if physical:
        phys = {"power": np.r_[0.155, np.linspace(200, 600, n - 1)], "cpu1": np.linspace(30, 80, n),
                "cpu2": np.linspace(31, 61, n), "cpus_alloc": np.arange(n, dtype=float) % 49}
        data = {c: pa.array(phys[c], pa.float64()) for c in columns}
    else:
        data = {c: pa.array(np.linspace(-1, 1, n), pa.float32()) for c in columns}
    data["date"] = pd.date_range(T0, periods=n, freq="min")
    buf = io.BytesIO()
    pq.write_table(pa.table(data), buf)
    return buf.getvalue()


def generate(out: Path, seed: int = 0) -> list[Case]:
    """Write the corpus into ``out`` and return its cases with their expected outcomes."""
    out.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    cases: list[Case] = []

    def put(name: str, data: bytes) -> str:
        (out / name).write_bytes(data)
        return name

    good = [f"{_t(i)},n00{1 + i % 4},temp_cpu0,{40 + i}" for i in range(4)]
    cases.append(Case("good long CSV", "telemetry", [put("good.csv", _csv(good))], staged=4))
    cases.append(
        Case(
            "duplicate file in one run",
            "telemetry",
            [put("dupfile_a.csv", _csv(good[:3])), put("dupfile_b.csv", _csv(good[:3]))],
            staged=3,
            skipped_files=1,
        )
    )
    cases.append(
        Case(
            "duplicate rows",
            "telemetry",
            [put("duprows.csv", _csv([good[0], good[1], good[0], good[0], good[2]]))],
            staged=3,
            duplicates=2,
        )
    )
    cases.append(Case("alias resolved", "telemetry", [put("alias.csv", _csv([f"{_t(0)},n001-ib,power_node,250"]))], staged=1))

    latin = _csv([good[0]]) + f"{_t(1)},n".encode() + b"\xe9ud,temp_cpu0,41\n" + good[2].encode() + b"\n"
    cases.append(
        Case(
            "Latin-1 bytes in a UTF-8 file",
            "telemetry",
            [put("latin1.csv", latin)],
            staged=2,
            quarantined={3: ["parse: invalid UTF-8 in column node"]},
        )
    )
    cases.append(
        Case(
            "NUL byte in a node name",
            "telemetry",
            [put("nul.csv", _csv([good[0], f"{_t(1)},n0\x0001,temp_cpu0,41", good[2]]))],
            staged=2,
            quarantined={3: [HOSTILE]},
        )
    )
    cases.append(
        Case(
            "NUL bytes in the header",
            "telemetry",
            [put("nulheader.csv", b"time\x00stamp,node,metric,value\n")],
            file_error="cannot tell the format",
        )
    )
    cases.append(Case("random bytes", "telemetry", [put("random.csv", rnd.randbytes(5000))], file_error="cannot tell the format"))
    cases.append(Case("empty file", "telemetry", [put("empty.csv", b"")], file_error="empty or unreadable file"))

    n_trunc = 20000
    stamps = pd.date_range(T0, periods=n_trunc, freq="s").strftime("%Y-%m-%dT%H:%M:%SZ")
    body = _csv([f"{s},n001,temp_cpu0,{i / 1000:.3f}" for i, s in enumerate(stamps)])
    gz = gzip.compress(body, mtime=0)
    cases.append(
        Case(
            "truncated gzip",
            "telemetry",
            [put("truncated.csv.gz", gz[: len(gz) // 2])],
            file_error="stream ends unexpectedly after line",
            prefix_rows=n_trunc,
        )
    )
    pqb = _long_parquet(100)
    cases.append(
        Case(
            "truncated parquet",
            "telemetry",
            [put("truncated.parquet", pqb[: int(len(pqb) * 0.6)])],
            fmt="long-parquet",
            file_error="not a readable parquet file",
        )
    )
    cases.append(Case("parquet, auto-detected", "telemetry", [put("long.parquet", pqb)], staged=100))

    ranges = [
        good[0],
        f"{_t(1)},n001,power_node,-5",
        f"{_t(2)},n001,temp_cpu0,1e30",
        f"{_t(3)},n001,temp_cpu1,nan",
        f"{_t(4)},n001,temp_inlet,inf",
        f"{_t(5)},n001,temp_exhaust,-inf",
        f"{_t(6)},n001,no_such_metric,1",
        f"{_t(7)},n001,mem_used,-1",
        f"{_t(8)},n001,power_cpu,300",
    ]
    cases.append(
        Case(
            "out of range, NaN/inf, unknown metric",
            "telemetry",
            [put("ranges.csv", _csv(ranges))],
            staged=2,
            quarantined={
                3: [range_label("power_node")],
                4: [range_label("temp_cpu0")],
                5: [NAN],
                6: [FIN],
                7: [FIN],
                8: [CAT],
                9: [range_label("mem_used")],
            },
        )
    )
    times = [
        good[0],
        "2099-01-01T00:00:00Z,n001,temp_cpu0,40",
        "1980-06-01T00:00:00Z,n001,temp_cpu0,40",
        "1970-01-01T00:00:00Z,n001,temp_cpu0,40",
        "0,n001,temp_cpu0,40",
        f"{_t(5)},n001,temp_cpu0,40",
    ]
    cases.append(
        Case(
            "timestamps in the future / before 1990 / epoch 0",
            "telemetry",
            [put("times.csv", _csv(times))],
            staged=2,
            quarantined={3: [TIME], 4: [TIME], 5: [TIME], 6: [TIME]},
        )
    )
    jump = [f"{_t(i)},n002,temp_inlet,20" for i in range(3)]
    jump += [
        "2031-03-01T00:03:00Z,n002,temp_inlet,20",
        "2031-03-01T00:04:00Z,n002,temp_inlet,20",
    ]  # clock jumps a few years ahead
    jump += [f"{_t(i)},n002,temp_inlet,20" for i in (5, 6)]
    # counter whose clock steps back one minute: the repeated time carries a different value
    jump += [
        f"{_t(0)},n002,net_rx_bytes,0",
        f"{_t(1)},n002,net_rx_bytes,600",
        f"{_t(2)},n002,net_rx_bytes,1200",
        f"{_t(2)},n002,net_rx_bytes,1500",
        f"{_t(3)},n002,net_rx_bytes,2100",
    ]
    cases.append(
        Case(
            "clock jumps",
            "telemetry",
            [put("clockjump.csv", _csv(jump))],
            staged=5 + 3,
            quarantined={
                5: [TIME],
                6: [TIME],
                9: ["parse: counter net_rx_bytes: first sample of the counter series in this file, no rate"],
                12: ["parse: counter net_rx_bytes: two different counter values at the same time"],
            },
        )
    )
    counters = [
        f"{_t(0)},n003,ib_rx_bytes,1000",
        f"{_t(1)},n003,ib_rx_bytes,7000",
        f"{_t(2)},n003,ib_rx_bytes,600",
        f"{_t(3)},n003,ib_rx_bytes,nan",
        f"{_t(4)},n003,ib_rx_bytes,1800",
    ]
    cases.append(
        Case(
            "counter reset and NaN counter",
            "telemetry",
            [put("counters.csv", _csv(counters))],
            staged=3,
            quarantined={
                2: ["parse: counter ib_rx_bytes: first sample of the counter series in this file, no rate"],
                5: ["parse: counter ib_rx_bytes: counter value is NaN or infinite"],
            },
        )
    )
    # one name per node: n001.other-cluster would be n001 (domain stripped), so the unknown FQDN is n099's
    unknown = [good[0], f"{_t(1)},n999,temp_cpu0,40", f"{_t(2)},n099.other-cluster,temp_cpu0,40"]
    cases.append(
        Case("unknown nodes", "telemetry", [put("unknown.csv", _csv(unknown))], staged=1, quarantined={3: [INSET], 4: [INSET]})
    )
    hostile = [
        good[0],
        f"{_t(1)},../../etc,temp_cpu0,40",
        f"{_t(2)},{'n' * 300},temp_cpu0,40",
        f"{_t(3)},n\u043e01,temp_cpu0,40",
        f"{_t(4)},n00１,temp_cpu0,40",
        f"{_t(5)},-n001,temp_cpu0,40",
        good[1],
    ]
    cases.append(
        Case(
            "hostile node names",
            "telemetry",
            [put("hostile.csv", _csv(hostile))],
            staged=2,
            quarantined={3: [HOSTILE], 4: [LONG], 5: [HOSTILE], 6: [HOSTILE], 7: [HOSTILE]},
        )
    )
    cases.append(
        Case(
            "1 MB single line",
            "telemetry",
            [put("longline.csv", _csv([good[0], f"{_t(1)},{'x' * (1 << 20)},temp_cpu0,1"]))],
            staged=1,
            quarantined={3: [LONG]},
        )
    )
    cases.append(
        Case(
            "wrong field counts and bad values",
            "telemetry",
            [
                put(
                    "fields.csv",
                    _csv(
                        [
                            good[0],
                            f"{_t(1)},n001,temp_cpu0",
                            f"{_t(2)},n001,temp_cpu0,1,2",
                            f"{_t(3)},n001,temp_cpu0,forty",
                            "yesterday,n001,temp_cpu0,4",
                            good[1],
                        ]
                    ),
                )
            ],
            staged=2,
            quarantined={
                3: ["parse: expected 4 fields, found 3"],
                4: ["parse: expected 4 fields, found 5"],
                5: ["parse: value 'forty' is not a number"],
                6: ["parse: unparseable time 'yesterday'"],
            },
        )
    )
    cases.append(
        Case(
            "wrong column set (long CSV)",
            "telemetry",
            [put("wrongcols.csv", _csv([], "timestamp,node,value"))],
            fmt="long-csv",
            file_error="line 1: missing columns ['metric']",
        )
    )
    cases.append(
        Case(
            "wrong column set (auto)",
            "telemetry",
            [put("wrongcols2.csv", _csv([], "timestamp,host,metric,value"))],
            file_error="cannot tell the format",
        )
    )
    ldms = (
        "#Time,Time_usec,ProducerName,component_id,job_id,temp_cpu0,power_node\n"
        "1709251200.0,0,n001,1,0,40,300\n1709251201.0,0,n001,1,0,41\n1709251202.0,0,n001,1,0,x,-3\n"
    )
    cases.append(
        Case(
            "LDMS with short line, bad cell, negative power",
            "telemetry",
            [put("ldms.csv", ldms.encode())],
            staged=2,
            quarantined={
                3: ["parse: expected 7 fields, found 6"],
                4: ["parse: value of temp_cpu0 is not a number", range_label("power_node")],
            },
        )
    )

    tdir = out / "turin"
    tdir.mkdir(exist_ok=True)
    (tdir / "broadwell-000.parquet").write_bytes(_turin())
    # standardised (older ADMIRE files): staged as <name>_std, unit "1", never as watts or degC
    cases.append(Case("Turin file, standardised", "telemetry", ["turin/broadwell-000.parquet"], staged=40))
    (tdir / "broadwell-003.parquet").write_bytes(_turin(physical=True))
    cases.append(
        Case(
            "Turin file in physical units, one 0.155 W reading",
            "telemetry",
            ["turin/broadwell-003.parquet"],
            staged=39,
            quarantined={0: [range_label("power")]},
        )
    )
    (tdir / "broadwell-00\u0661.parquet").write_bytes(_turin())
    cases.append(
        Case(
            "Turin file with a look-alike digit in its name",
            "telemetry",
            ["turin/broadwell-00\u0661.parquet"],
            file_error="file name does not give a valid node name",
        )
    )
    (tdir / "..parquet").write_bytes(_turin())
    cases.append(
        Case(
            "Turin file named ..parquet", "telemetry", ["turin/..parquet"], file_error="file name does not give a valid node name"
        )
    )
    (tdir / "broadwell-001.parquet").write_bytes(_turin(("power", "cpu1", "cpus_alloc")))
    cases.append(
        Case(
            "Turin file missing a column",
            "telemetry",
            ["turin/broadwell-001.parquet"],
            fmt="turin-parquet",
            file_error="missing columns ['cpu2'] for a Turin per-node file",
        )
    )
    turin_bad = _turin()
    cases.append(
        Case(
            "Turin truncated",
            "telemetry",
            [put("broadwell-002.parquet", turin_bad[: len(turin_bad) // 2])],
            fmt="turin-parquet",
            file_error="not a readable parquet file",
        )
    )

    topo_h = "node,rack,row,chassis,position,architecture,aliases"
    topo = [
        "n001,r00,0,0,0,broadwell,n001-ib;n001.cluster",
        "n002,r00,0,0,x,broadwell,",  # 3: bad position
        "n003,r00,0,1,2,broadwell,n001-ib",  # 4: alias claimed twice (and 2 above)
        "../../etc,r00,0,1,3,broadwell,",  # 5: hostile node
        "n004,r00,0,1,3,broadwell,n007",  # 6: alias is another node's name
        "n005,r01,0,0,0,skylake,",  # 7: listed twice, differently (8)
        "n005,r02,0,0,0,skylake,",
        "n006,r01,0,0,1,skylake,bad/alias",  # 9: alias not a valid name
        "n007,r01,0,0,2,skylake,",
        "n007,r01,0,0,2,skylake,",  # 11: exact repeat: duplicate
    ]
    amb = "expect_aliases_unambiguous(aliases)"
    conf = "expect_node_unique_in_snapshot(node)"
    cases.append(
        Case(
            "topology",
            "topology",
            [put("topology.csv", _csv(topo, topo_h))],
            staged=1,
            duplicates=1,
            quarantined={
                2: [amb],
                3: ["parse: position 'x' is not an integer"],
                4: [amb],
                5: ["expect_column_values_to_match_regex(node)"],
                6: [amb],
                7: [conf],
                8: [conf],
                9: ["expect_list_values_to_match_regex(aliases)"],
            },
        )
    )
    cases.append(
        Case(
            "topology missing a column",
            "topology",
            [put("topology_cols.csv", _csv([], "node,rack,row,chassis,position"))],
            fmt="topology-csv",
            file_error="line 1: missing columns ['architecture']",
        )
    )
    res_h = "name,start,end,nodes,flags,users"
    res = [
        'maint_row0,2024-03-01T08:00:00,2024-03-01T12:00:00,n[001-003],"MAINT,IGNORE_JOBS",root',
        "backwards,2024-03-02T08:00:00,2024-03-01T08:00:00,n004,MAINT,root",  # 3: end before start
        "weird,2024-03-03T08:00:00,2024-03-03T09:00:00,n004,FOO!,root",  # 4: malformed flag
        "broken,2024-03-04T08:00:00,2024-03-04T09:00:00,n[001-,MAINT,root",  # 5: hostlist
        "hostile,2024-03-05T08:00:00,2024-03-05T09:00:00,../../etc,MAINT,root",  # 6: hostile node
        "badtime,tomorrow,2024-03-05T09:00:00,n001,MAINT,root",  # 7
        "gpu,2024-03-06T08:00:00,2024-03-06T09:00:00,(null),,",  # 8: no nodes: fine
    ]
    cases.append(
        Case(
            "reservations",
            "reservations",
            [put("reservations.csv", _csv(res, res_h))],
            staged=2,
            quarantined={
                3: ["expect_column_pair_values_a_to_be_greater_than_b(end>=start)"],
                4: ["expect_reservation_flags_to_match_regex(flags)"],
                5: ["parse: hostlist 'n[001-': unbalanced '[' (missing ']')"],
                6: ["expect_list_values_to_match_regex(node_list)"],
                7: ["parse: unparseable start time 'tomorrow'"],
            },
        )
    )
    return cases


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_telemetry_corpus.py OUT_DIR")
    for c in generate(Path(sys.argv[1])):
        print(f"{c.source:13} {c.name:50} {', '.join(c.files)}")
