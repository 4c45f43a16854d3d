"""Units that are true (issue 24): physical units and ranges per metric, standardised data under its own name.

Before: the Turin metrics were catalogued as standardised (unit "1", range ±1e4) although
``turin/raw/`` holds W, degC and CPU counts, and a node power of 0.155 W (D.A.V.I.D.E.'s failed-sensor
stretch) passed the range check of ``power_node`` ([0, 20000] W).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nodewatch.schemas.cubes import metric_attrs
from nodewatch.schemas.metrics import CATALOGUE
from nodewatch.schemas.telemetry import ROW_CHECKS, range_label
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.telemetry import parse_turin_parquet

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "telemetry"
TURIN = ("power", "cpu1", "cpu2", "cpus_alloc")


def _ingest(tmp: Path, files: dict[str, bytes]):
    d = tmp / "in"
    d.mkdir(exist_ok=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    store = Store(str(tmp / "store"))
    res = ingest_files(store, sources()["telemetry"], [d / n for n in files], RunRecorder(store, "ingest", {}), data_docs=False)
    q = pa.concat_tables([pq.read_table(f) for f in res.quarantine_files]) if res.quarantine_files else None
    return store, res, q


def _turin_bytes(values: dict[str, np.ndarray], dtype: pa.DataType = pa.float64()) -> bytes:
    n = len(next(iter(values.values())))
    t = pa.table({"date": pd.date_range("2023-06-23", periods=n, freq="min", tz="UTC"),
                  **{c: pa.array(v, dtype) for c, v in values.items()}})
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


def _metrics(data: bytes, name: str = "broadwell-000.parquet") -> set[str]:
    out: set[str] = set()
    for r in parse_turin_parquet(io.BytesIO(data), ParseContext(name=name)):
        out |= set(r.rows.column("metric").to_pylist())
    return out


def test_catalogue_units_and_ranges():
    assert [(CATALOGUE[m].unit, CATALOGUE[m].min, CATALOGUE[m].max) for m in TURIN] == [
        ("W", 1.0, 20_000.0), ("degC", -20.0, 130.0), ("degC", -20.0, 130.0), ("1", 0.0, 4096.0)
    ]
    for m in TURIN:
        std = CATALOGUE[f"{m}_std"]
        assert (std.unit, std.kind) == ("1", "gauge") and "standardised" in std.long_name
        assert "standardised" not in CATALOGUE[m].long_name
    assert CATALOGUE["power_node"].min == 1.0  # 0.155 W is a failed sensor, not a node's power
    # the cube takes its attrs from the catalogue (schemas/cubes.metric_attrs -> metric_units, valid_min/max)
    assert metric_attrs("power") == {"units": "W", "long_name": "node input power (Turin)", "kind": "gauge",
                                     "valid_min": 1.0, "valid_max": 20_000.0}
    assert metric_attrs("cpu1")["units"] == "degC" and metric_attrs("power_std")["units"] == "1"


def test_node_power_of_0155_w_is_quarantined_with_its_reason(tmp_path):
    csv_text = (
        "timestamp,node,metric,value\n"
        "2018-04-03T12:00:00Z,davide19,power_node,0.155\n"
        "2018-04-03T12:05:00Z,davide19,power_node,470.5\n"
        "2018-04-03T12:10:00Z,davide19,power_node,25000\n"
    )
    store, res, q = _ingest(tmp_path, {"p.csv": csv_text.encode()})
    assert (res.counts.staged, res.counts.quarantined) == (1, 2)
    reason = "expect_metric_values_in_catalogue_range(value): power_node outside [1, 20000] W"
    got = sorted(zip(q.column("source_offset").to_pylist(), q.column("reason").to_pylist(), strict=True))
    assert got == [(2, reason), (4, reason)]
    assert store.read_staged("telemetry").column("value").to_pylist() == [470.5]


def test_turin_physical_and_standardised_files_are_told_apart(tmp_path):
    n = 20
    physical = {"power": np.linspace(136, 608, n), "cpu1": np.linspace(28, 88, n), "cpu2": np.full(n, 40.0),
                "cpus_alloc": np.arange(n) % 49.0}
    assert _metrics(_turin_bytes(physical)) == set(TURIN)
    # float32 is not the clue: physical values written as float32 stay physical
    assert _metrics(_turin_bytes(physical, pa.float32())) == set(TURIN)
    # a few faulty readings do not flip a physical file: they are quarantined by the range check
    glitch = {**physical, "power": np.r_[-1.0, 0.155, physical["power"][2:]]}
    assert _metrics(_turin_bytes(glitch)) == set(TURIN)
    # standardised: power mostly negative (impossible in W), or cpus_alloc mostly fractional (impossible as a count)
    z = {c: (v - v.mean()) / (v.std() or 1.0) for c, v in physical.items()}
    assert _metrics(_turin_bytes(z)) == {f"{m}_std" for m in TURIN}
    busy = {**z, "power": np.abs(z["power"]) + 0.5, "cpus_alloc": np.full(n, 0.25)}  # all-positive z power
    assert _metrics(_turin_bytes(busy)) == {f"{m}_std" for m in TURIN}
    # the fixture: the first 30 rows of an older ADMIRE file (power -0.281)
    assert _metrics((FIX / "broadwell-000.parquet").read_bytes()) == {f"{m}_std" for m in TURIN}

    store, res, q = _ingest(tmp_path, {"broadwell-003.parquet": _turin_bytes(glitch)})
    assert (res.counts.staged, res.counts.quarantined) == (4 * n - 2, 2)
    assert set(q.column("reason").to_pylist()) == {range_label("power")}


def _real_turin(shared: Path, sub: str) -> list[Path]:
    files = sorted((shared / "telemetry" / "turin" / sub).glob("*/*.parquet"))
    if len(files) != 132:
        pytest.skip(f"../shared/data/telemetry/turin/{sub}: {len(files)} files, not the 132 of PROVENANCE.md")
    return files


def test_real_turin_raw_files_are_physical(shared_data):
    """turin/raw/: every file physical (power 136-608 W, cpu1/cpu2 28-88 degC, cpus_alloc 0-48), all in range."""
    lo, hi = {}, {}
    for p in _real_turin(shared_data, "raw"):
        with open(p, "rb") as f:
            for r in parse_turin_parquet(f, ParseContext(name=p.name)):
                assert r.rejects.num_rows == 0
                assert not any(mask.any() for _, mask in ROW_CHECKS[0](r.rows)), p
                t = r.rows.group_by("metric").aggregate([("value", "min"), ("value", "max")]).to_pylist()
                for row in t:
                    m = row["metric"]
                    lo[m] = min(lo.get(m, np.inf), row["value_min"])
                    hi[m] = max(hi.get(m, -np.inf), row["value_max"])
    assert set(lo) == set(TURIN)
    assert (lo["power"], hi["power"]) == (136.0, 608.0)
    assert (min(lo["cpu1"], lo["cpu2"]), max(hi["cpu1"], hi["cpu2"])) == (28.0, 88.0)
    assert (lo["cpus_alloc"], hi["cpus_alloc"]) == (0.0, 48.0)


def test_real_turin_standardised_files_are_std(shared_data):
    files = sorted((shared_data / "telemetry" / "turin").glob("*/*.parquet"))  # history/, valid_data/ (not raw/)
    if len(files) != 132:
        pytest.skip(f"../shared/data/telemetry/turin: {len(files)} standardised files, not 132")
    for p in files:
        with open(p, "rb") as f:
            assert _metrics(f.read(), p.name) == {f"{m}_std" for m in TURIN}, p


def test_real_davide_power_failed_sensor_stretch_is_quarantined(shared_data, tmp_path):
    """D.A.V.I.D.E. node power (W) as long CSV: the 864 readings of about 0.155 W are quarantined, the rest staged."""
    src = shared_data / "telemetry" / "davide" / "davide19_bbb_20180303_000001_20180530_050001.csv"
    if not src.is_file():
        pytest.skip(f"{src} not present")
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["timestamp", "node", "metric", "value"])
    n = low = 0
    with open(src, newline="") as f:
        for row in csv.DictReader(f):
            w.writerow([row["time_stamp"].replace(" ", "T") + "Z", row["node_id"], "power_node", row["power"]])
            n += 1
            low += float(row["power"]) < 1.0
    assert (n, low) == (24_813, 864)
    _, res, q = _ingest(tmp_path, {"davide19.csv": out.getvalue().encode()})
    assert (res.counts.rows_in, res.counts.quarantined, res.counts.staged) == (n, low, n - low)
    assert set(q.column("reason").to_pylist()) == {range_label("power_node")}
