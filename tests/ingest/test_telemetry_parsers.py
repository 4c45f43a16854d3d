"""Telemetry parsers (tasks/ingest/telemetry.py) and the per-metric checks of schemas/telemetry.py."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nodewatch.schemas.metrics import CATALOGUE, COUNTERS, STAGED_METRICS
from nodewatch.schemas.telemetry import ROW_CHECKS, TELEMETRY, metric_range_violations, range_label
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import InputError
from nodewatch.tasks.ingest.telemetry import (
    SOURCES,
    parse_ldms_csv,
    parse_long_csv,
    parse_long_parquet,
    parse_turin_parquet,
    sniff_ldms_csv,
    sniff_long_csv,
    sniff_long_parquet,
    sniff_turin_parquet,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "telemetry"


def run(parser, data: bytes, name: str = "f", **kw) -> tuple[pa.Table, pa.Table]:
    res = list(parser(io.BytesIO(data), ParseContext(name=name, **kw)))
    rows = pa.concat_tables([r.rows for r in res]) if res else None
    rej = pa.concat_tables([r.rejects for r in res]) if res else None
    return rows, rej


def parquet_bytes(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return buf.getvalue()


def ts(s: str) -> pd.Timestamp:
    return pd.Timestamp(s, tz="UTC")


# ------------------------------------------------------------------------------------ catalogue
def test_catalogue_counters_have_rate_gauges_and_no_counter_is_staged():
    assert len(STAGED_METRICS) >= 50
    for c in COUNTERS:
        assert CATALOGUE[c + "_rate"].kind == "gauge"
        assert c not in STAGED_METRICS
    assert CATALOGUE["net_rx_bytes_rate"].unit == "By s-1"
    assert CATALOGUE["net_rx_packets_rate"].unit == "s-1"
    # Turin metrics in their physical units (../shared/data/PROVENANCE.md); the standardised copies are <name>_std
    assert [CATALOGUE[n].unit for n in ("power", "cpu1", "cpu2", "cpus_alloc")] == ["W", "degC", "degC", "1"]
    for name in ("power", "cpu1", "cpu2", "cpus_alloc"):
        assert CATALOGUE[name + "_std"].unit == "1"


def test_metric_range_violations_and_row_checks():
    t = pa.table(
        {
            "metric": ["temp_cpu0", "temp_cpu0", "nosuch", "power_node", "power_node", "net_rx_bytes_rate"],
            "value": [50.0, 1e30, 1.0, -5.0, math.inf, 1e3],
        }
    )
    reasons = metric_range_violations(t).to_pylist()
    assert reasons[0] is None and reasons[5] is None
    assert reasons[1] == "expect_metric_values_in_catalogue_range(value): temp_cpu0=1e+30 outside [-20, 130] degC"
    assert reasons[2].startswith("expect_metric_in_catalogue(metric): unknown metric 'nosuch'")
    assert reasons[3] == "expect_metric_values_in_catalogue_range(value): power_node=-5 outside [1, 20000] W"
    assert reasons[4] == "expect_column_values_to_be_finite(value): power_node=inf"
    checks = dict(ROW_CHECKS[0](t))
    # one range label per metric, naming its range and unit
    assert checks[range_label("temp_cpu0")].tolist() == [False, True, False, False, False, False]
    assert checks[range_label("power_node")].tolist() == [False, False, False, True, False, False]
    assert range_label("power_node") == "expect_metric_values_in_catalogue_range(value): power_node outside [1, 20000] W"
    assert checks["expect_metric_in_catalogue(metric)"].tolist() == [False, False, True, False, False, False]
    assert checks["expect_column_values_to_be_finite(value)"].tolist() == [False, False, False, False, True, False]


def test_source_spec():
    (spec,) = SOURCES
    assert spec.name == "telemetry" and spec.table is TELEMETRY
    assert {f.name for f in spec.formats} == {"long-parquet", "long-csv", "ldms-csv", "turin-parquet"}
    assert TELEMETRY.unique_key == ("node", "time", "metric")


# ------------------------------------------------------------------------------------ long CSV
def test_long_csv_times_offsets_and_aliases():
    data = (
        b"timestamp,node,metric,value\n"
        b"2024-01-01T00:00:00Z,n1,temp_cpu0,41.5\n"
        b"\n"
        b"2024-01-01 01:00:00+01:00,alias-of-n2,temp_cpu0,42\n"
        b"2024-01-01T00:00:30.5,n1,power_node, 300 \n"
        b"1704067260,n1,power_node,301\n"
    )
    rows, rej = run(parse_long_csv, data, aliases={"alias-of-n2": "n2"}, tz="Europe/Rome")
    assert rej.num_rows == 0
    d = rows.to_pydict()
    assert d["node"] == ["n1", "n2", "n1", "n1"]
    assert d["source_offset"] == [2, 4, 5, 6]  # blank line 3 keeps the numbering
    assert d["value"] == [41.5, 42.0, 300.0, 301.0]
    assert d["time"][0] == ts("2024-01-01T00:00:00")
    assert d["time"][1] == ts("2024-01-01T00:00:00")
    assert d["time"][2] == ts("2023-12-31T23:00:30.5")  # naive: read in Europe/Rome
    assert d["time"][3] == ts("2024-01-01T00:01:00")
    assert rows.schema.equals(TELEMETRY.arrow_schema(), check_metadata=False)


def test_long_csv_time_header_and_column_order():
    rows, rej = run(parse_long_csv, b"node,value,metric,time\nn1,1.5,load1,2024-05-01T00:00:00Z\n")
    assert rows.to_pydict()["value"] == [1.5] and rows.to_pydict()["metric"] == ["load1"]


def test_long_csv_bad_lines_are_rejected_with_line_numbers_and_no_good_row_lost():
    data = (
        b"timestamp,node,metric,value\n"
        b"2024-01-01T00:00:00Z,n1,load1,1\n"  # 2 ok
        b"2024-01-01T00:01:00Z,n1,load1\n"  # 3 too few fields
        b"2024-01-01T00:02:00Z,n\xe91,load1,3\n"  # 4 latin-1
        b"2024-01-01T00:03:00Z,n1,load1,abc\n"  # 5 not a number
        b"yesterday,n1,load1,5\n"  # 6 bad time
        b"2024-01-01T00:04:00Z,n1,load1,6,7\n"  # 7 too many fields
        b"2024-01-01T00:05:00Z,n1,load1,nan\n"  # 8 parsed (NaN is rejected by validation)
        b"2024-01-01T00:06:00Z,n1,load1,8\n"  # 9 ok
    )
    rows, rej = run(parse_long_csv, data)
    assert rows.column("source_offset").to_pylist() == [2, 8, 9]
    assert math.isnan(rows.column("value")[1].as_py())
    got = dict(zip(rej.column("source_offset").to_pylist(), rej.column("reason").to_pylist(), strict=True))
    assert got == {
        3: "parse: expected 4 fields, found 3",
        4: "parse: invalid UTF-8 in column node",
        5: "parse: value 'abc' is not a number",
        6: "parse: unparseable time 'yesterday'",
        7: "parse: expected 4 fields, found 5",
    }
    assert rows.num_rows + rej.num_rows == 8


def test_long_csv_small_blocks_keep_line_numbers(monkeypatch):
    import nodewatch.tasks.ingest._vectorised as tel

    monkeypatch.setattr(tel, "CSV_BLOCK", 64)
    lines = [b"time,node,metric,value"]
    for i in range(200):
        good = f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}Z,n1,load1,{i}".encode()
        lines.append(b"2024-01-01T00:00:00Z,n1" if i % 7 == 3 else good)
    rows, rej = run(parse_long_csv, b"\n".join(lines) + b"\n")
    offs = rows.column("source_offset").to_numpy()
    vals = rows.column("value").to_numpy()
    assert np.array_equal(offs, vals.astype(int) + 2)  # value i sits on line i + 2
    assert sorted(rej.column("source_offset").to_pylist()) == [i + 2 for i in range(200) if i % 7 == 3]


def test_long_csv_missing_columns_is_a_file_error():
    with pytest.raises(InputError, match=r"^f\.csv: line 1: missing columns \['value'\]"):
        run(parse_long_csv, b"timestamp,node,metric\n2024-01-01T00:00:00Z,n1,load1\n", name="f.csv")
    with pytest.raises(InputError, match="duplicate header columns"):
        run(parse_long_csv, b"time,node,metric,value,node\n", name="f.csv")
    with pytest.raises(InputError, match="header is not UTF-8"):
        run(parse_long_csv, b"\xff\xfe\x00garbage\n", name="f.csv")


# ------------------------------------------------------------------------------------ counters in parsers
def test_counters_become_rates_first_sample_rejected():
    data = b"time,node,metric,value\n" + b"".join(
        f"2024-01-01T00:00:{s:02d}Z,n1,net_rx_bytes,{v}\n".encode() for s, v in [(0, 1000), (10, 2000), (20, 500)]
    )
    rows, rej = run(parse_long_csv, data)
    assert rows.column("metric").to_pylist() == ["net_rx_bytes_rate", "net_rx_bytes_rate"]
    assert rows.column("value").to_pylist() == [100.0, 50.0]  # reset at 20 s: 500 B / 10 s from 0
    assert rej.to_pydict()["reason"] == ["parse: counter net_rx_bytes: first sample of the counter series in this file, no rate"]
    assert rej.to_pydict()["source_offset"] == [2]


def test_counter_series_continue_across_batches():
    n = 50
    t = pd.date_range("2024-01-01", periods=n, freq="10s", tz="UTC")
    tab = pa.table({"timestamp": t, "node": ["n1"] * n, "metric": ["ib_rx_bytes"] * n, "value": np.arange(n) * 100.0})
    rows, rej = run(parse_long_parquet, parquet_bytes(tab), batch_rows=7)
    assert rej.num_rows == 1 and rows.num_rows == n - 1
    assert set(rows.column("value").to_pylist()) == {10.0}


# ------------------------------------------------------------------------------------ long parquet
def test_long_parquet_types():
    tab = pa.table(
        {
            "time": pa.array([pd.Timestamp("2024-01-01 01:00")] * 2, pa.timestamp("us")),  # naive -> ctx.tz
            "node": pa.array(["n1", "n2"]).dictionary_encode(),
            "metric": ["load1", "mem_used"],
            "value": pa.array([1, 2], pa.int32()),
            "extra": [1, 2],
        }
    )
    rows, rej = run(parse_long_parquet, parquet_bytes(tab), tz="Europe/Berlin")
    d = rows.to_pydict()
    assert d["time"] == [ts("2024-01-01 00:00")] * 2
    assert d["node"] == ["n1", "n2"] and d["value"] == [1.0, 2.0] and d["source_offset"] == [0, 1]


def test_long_parquet_string_times_and_wrong_columns():
    tab = pa.table(
        {"timestamp": ["2024-01-01T00:00:00Z", "garbage"], "node": ["n1", "n1"], "metric": ["load1"] * 2, "value": [1.0, 2.0]}
    )
    rows, rej = run(parse_long_parquet, parquet_bytes(tab))
    assert rows.num_rows == 1 and rej.to_pydict()["reason"] == ["parse: unparseable time 'garbage'"]
    bad = pa.table({"time": [1], "host": ["n1"], "value": [1.0]})
    with pytest.raises(InputError, match=r"^x\.parquet: missing columns \['node', 'metric'\]"):
        run(parse_long_parquet, parquet_bytes(bad), name="x.parquet")


# ------------------------------------------------------------------------------------ LDMS
def test_ldms_wide_csv_is_melted():
    data = (
        b"#Time,Time_usec,ProducerName,component_id,job_id,load1,mem_used,temp_cpu0\n"
        b"1704067200.002370,2370,c0-0,1,0,0.5,12.25,40\n"
        b"1704067201.000000,0,c0-1,2,0,0.75,,41\n"
    )
    rows, rej = run(parse_ldms_csv, data)
    d = rows.to_pydict()
    assert d["node"] == ["c0-0", "c0-0", "c0-0", "c0-1", "c0-1"]
    assert d["metric"] == ["load1", "mem_used", "temp_cpu0", "load1", "temp_cpu0"]
    assert d["value"] == [0.5, 12.25, 40.0, 0.75, 41.0]
    assert d["time"][0] == pd.Timestamp(1704067200_002370_000, tz="UTC")
    assert d["source_offset"] == [2, 2, 2, 3, 3]
    assert rej.to_pydict() == {"source_offset": [3], "raw": ["mem_used="], "reason": ["parse: value of mem_used is empty"]}


def test_ldms_requires_producer():
    with pytest.raises(InputError, match="not an LDMS CSV header"):
        run(parse_ldms_csv, b"#Time,load1\n1,2\n", name="l.csv")


# ------------------------------------------------------------------------------------ Turin
def test_turin_fixture():
    rows, rej = run(parse_turin_parquet, (FIX / "broadwell-000.parquet").read_bytes(), name="broadwell-000.parquet")
    assert rej.num_rows == 0 and rows.num_rows == 30 * 4
    d = rows.slice(0, 4).to_pydict()
    assert d["node"] == ["broadwell-000"] * 4
    # the fixture is a slice of the older, standardised Turin files (power -0.281): staged as <name>_std
    assert d["metric"] == ["power_std", "cpu1_std", "cpu2_std", "cpus_alloc_std"]
    assert d["time"] == [ts("2023-06-23 15:13")] * 4
    src = pq.read_table(FIX / "broadwell-000.parquet")
    assert d["value"][0] == float(src.column("power")[0].as_py())
    # the long-parquet format hands a Turin layout over to the Turin parser
    rows2, _ = run(parse_long_parquet, (FIX / "broadwell-000.parquet").read_bytes(), name="broadwell-000.parquet")
    assert rows2.equals(rows)


@pytest.mark.parametrize("name", ["..parquet", "bröadwell-000.parquet", "broadwell\u2010000.parquet", "a" * 70 + ".parquet"])
def test_turin_hostile_file_names(name):
    with pytest.raises(InputError, match="file name does not give a valid node name"):
        run(parse_turin_parquet, (FIX / "broadwell-000.parquet").read_bytes(), name=name)


def test_all_real_turin_files(shared_data):
    files = sorted((shared_data / "telemetry" / "turin").glob("*/*.parquet"))
    assert len(files) == 132
    total = 0
    for p in files:
        with open(p, "rb") as f:
            for r in parse_turin_parquet(f, ParseContext(name=p.name)):
                assert r.rejects.num_rows == 0
                assert not any(ROW_CHECKS[0](r.rows)[i][1].any() for i in range(3))
                assert set(r.rows.column("metric").to_pylist()) == {"power_std", "cpu1_std", "cpu2_std", "cpus_alloc_std"}
                total += r.rows.num_rows
    assert total == 189_222 * 4


# ------------------------------------------------------------------------------------ sniffing
def test_sniffers():
    turin = (FIX / "broadwell-000.parquet").read_bytes()
    long_pq = parquet_bytes(pa.table({"time": [1], "node": ["n"], "metric": ["load1"], "value": [1.0]}))
    long_csv = b"timestamp,node,metric,value\n"
    ldms = b"#Time,Time_usec,ProducerName,component_id,job_id,load1\n"
    rnd = np.random.default_rng(0).bytes(4096)
    table = {
        "turin": (turin, [0.0, 0.0, 0.0, 1.0]),
        "long_pq": (long_pq, [1.0, 0.0, 0.0, 0.0]),
        "long_csv": (long_csv, [0.0, 1.0, 0.0, 0.0]),
        "ldms": (ldms, [0.0, 0.0, 1.0, 0.0]),
        "random": (rnd, [0.0, 0.0, 0.0, 0.0]),
        "big parquet": (b"PAR1" + rnd, [0.6, 0.0, 0.0, 0.4]),
    }
    for what, (head, want) in table.items():
        got = [sniff_long_parquet(head), sniff_long_csv(head), sniff_ldms_csv(head), sniff_turin_parquet(head)]
        assert got == want, what


def test_quoted_header_names():
    rows, rej = run(parse_long_csv, b'"timestamp","node","metric","value"\n2024-01-01T00:00:00Z,n1,load1,1\n')
    assert rows.num_rows == 1 and rej.num_rows == 0
    assert sniff_long_csv(b'"timestamp","node","metric","value"\n') == 1.0
