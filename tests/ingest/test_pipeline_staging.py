"""Staging (tasks/ingest/spool.py, dedupe.py, staging.py): sort + dedupe + conflicts, in memory and spilled per bucket."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.ingest import spool
from nodewatch.tasks.ingest.dedupe import _lsd_order
from nodewatch.tasks.ingest.ingestor import Ingestor
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.spool import ORDER, _buckets
from nodewatch.tasks.ingest.staging import _take_columns
from nodewatch.tasks.ingest.validation import _DICT


def _lines(seed: int, n: int) -> list[tuple[int, str, int, str, int, str]]:
    """(pri, time, node, app, pid, message) with many exact duplicates and same-key conflicts, over two days."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        if rows and rng.random() < 0.15:
            pri, t, node, app, pid, msg = rng.choice(rows)
            if rng.random() < 0.3:
                pri = pri ^ 1  # same key, different severity: a conflict
            rows.append((pri, t, node, app, pid, msg))
            continue
        day = rng.choice([5, 6])
        t = f"2026-01-{day:02d}T{rng.randrange(24):02d}:{rng.randrange(3):02d}:00.{rng.randrange(3):06d}Z"
        app = rng.choice(["sshd", "kernel", "slurmd"])
        pid = rng.choice(["-", "17", "4242"])
        rows.append((rng.choice([30, 31, 86]), t, f"cn{rng.randrange(40):04d}", app, pid, rng.choice(["a", "b", "c c"])))
    return rows


def _write(path, rows):
    path.write_text("".join(f"<{pri}>1 {t} {node} {app} {pid} - - {msg}\n" for pri, t, node, app, pid, msg in rows))
    return path


def _reference(files_rows, staged_before=()):
    """Pure-Python dedupe in arrival order: (staged keys+values, dups, conflicts)."""
    first: dict[tuple, tuple] = {}
    for key, values in staged_before:
        first.setdefault(key, values)
    staged, dups, conflicts = [], 0, 0
    for rows in files_rows:
        for pri, t, node, app, pid, msg in rows:
            key = (node, t, app, None if pid == "-" else int(pid), msg)
            values = (pri >> 3, pri & 7)
            if key not in first:
                first[key] = values
                staged.append((key, values))
            elif first[key] == values:
                dups += 1
            else:
                conflicts += 1
    return staged, dups, conflicts


def _ingest(store, paths, run):
    rec = RunRecorder(store, run, {})
    res = ingest_files(store, sources()["syslog"], paths, rec, data_docs=False)
    rec.finish()
    return res


def _staged(store, res):
    tables = [store.read_parquet(p.split(store.root + "/", 1)[1]) for p in sorted(res.staged_files)]
    return pa.concat_tables(tables) if tables else None


def _quarantined(store, res):
    tables = [store.read_parquet(p.split(store.root + "/", 1)[1]) for p in sorted(res.quarantine_files)]
    return pa.concat_tables(tables) if tables else None


def _keys(t):
    iso = [x.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for x in t.column("time").to_pylist()]
    cols = [t.column(c).to_pylist() for c in ("node", "app", "pid", "message", "facility", "severity")]
    return [((n, ts, a, p, m), (f, s)) for ts, n, a, p, m, f, s in zip(iso, *cols, strict=True)]


@pytest.mark.parametrize("spool_bytes", [spool.SPOOL_BYTES, 3000])
def test_staging_matches_reference_dedupe_in_memory_and_spilled(tmp_path, monkeypatch, spool_bytes):
    from nodewatch.tasks.core.store import Store

    monkeypatch.setattr(spool, "SPOOL_BYTES", spool_bytes)  # 3000: spilled to disk, staged one bucket at a time
    rows_a, rows_b = _lines(1, 400), _lines(2, 300)
    rows_b += random.Random(3).sample(rows_a, 60)  # the second file repeats some lines of the first
    a, b = _write(tmp_path / "a.log", rows_a), _write(tmp_path / "b.log", rows_b)
    store = Store(str(tmp_path / f"store-{spool_bytes}"))
    res = _ingest(store, [a, b], "r1")
    staged, dups, conflicts = _reference([rows_a, rows_b])
    assert dups > 50 and conflicts > 10
    c = res.counts
    assert (c.rows_in, c.staged, c.duplicates, c.quarantined) == (700 + 60, len(staged), dups, conflicts)
    got = _staged(store, res)
    assert sorted(_keys(got), key=repr) == sorted(staged, key=repr)
    for f in res.inputs:  # per-file counts add up
        assert f.counts.rows_in == f.counts.staged + f.counts.duplicates + f.counts.quarantined
    # each file: buckets in order, each sorted by the unique key
    key_cols = [(k, "ascending") for k in ("node", "time", "app", "pid", "message")]
    for p in res.staged_files:
        t = store.read_parquet(p.split(store.root + "/", 1)[1])
        b_ = _buckets(t.column("node"), t.num_rows)
        t2 = t.append_column("b", pa.array(b_)).sort_by([("b", "ascending"), *key_cols]).drop_columns(["b"])
        assert t.equals(t2)
    # a second run: c.log overlaps what is staged (duplicates) and disagrees on some lines (conflicts)
    rows_c = random.Random(4).sample(rows_a + rows_b, 80) + _lines(5, 50)
    rows_c = [(r[0] ^ 1, *r[1:]) if i % 7 == 0 else r for i, r in enumerate(rows_c)]
    cfile = _write(tmp_path / "c.log", rows_c)
    res2 = _ingest(store, [cfile], "r2")
    staged2, dups2, conflicts2 = _reference([rows_c], staged_before=staged)
    assert dups2 > 20 and conflicts2 > 5
    c2 = res2.counts
    assert (c2.staged, c2.duplicates, c2.quarantined) == (len(staged2), dups2, conflicts2)
    q = _quarantined(store, res2)
    if conflicts2:
        assert set(q.column("reason").to_pylist()) == {
            "conflicting_duplicate(node,time,app,pid,message): same key as an earlier row with different values"
        }


def test_spilled_and_in_memory_staging_write_identical_files(tmp_path, monkeypatch):
    from nodewatch.tasks.core.store import Store

    rows_a, rows_b = _lines(11, 500), _lines(12, 500)
    a, b = _write(tmp_path / "a.log", rows_a), _write(tmp_path / "b.log", rows_b)
    out = {}
    for spool_bytes in (spool.SPOOL_BYTES, 4000):
        monkeypatch.setattr(spool, "SPOOL_BYTES", spool_bytes)
        store = Store(str(tmp_path / f"s{spool_bytes}"))
        res = _ingest(store, [a, b], "run")
        out[spool_bytes] = (_staged(store, res).drop_columns([]), _quarantined(store, res), res.counts)
    (s1, q1, c1), (s2, q2, c2) = out.values()
    assert s1.equals(s2) and c1 == c2
    assert (q1 is None and q2 is None) or q1.equals(q2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lsd_order_is_arrows_stable_sort(seed):
    import numpy as np
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    n = 5000
    t0 = 1_700_000_000 * 10**9
    cols = {
        "node": pa.array(rng.integers(0, 30, n), pa.int32(), mask=rng.random(n) < 0.05),
        "time": pa.array(np.sort(rng.integers(0, 50, n)) * 10**9 + t0, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        "small": pa.array(rng.integers(-5, 5, n), pa.int64(), mask=rng.random(n) < 0.05),
        "metric": pa.array(rng.integers(0, 3, n), pa.int16()),
        "message": pa.array(rng.choice(np.array(["b", "a", "c", None], object), n), pa.string()),
        "flag": pa.array(rng.random(n) < 0.5),
    }
    for sort_cols, exact in (
        (["node", "time", "metric"], []),
        (["node", "time", "metric", "message"], ["message"]),
        (["flag", "small", "node", "message"], ["message"]),
    ):
        got = _lsd_order(cols, sort_cols, exact, n)
        want = pc.sort_indices(
            pa.table({c: cols[c] for c in sort_cols}), sort_keys=[(c, "ascending", "at_end") for c in sort_cols]
        )
        assert got is not None and got.tolist() == want.to_numpy().tolist(), sort_cols
    assert _lsd_order(cols, ["message", "node"], ["message"], n) is None  # no integer prefix
    wide = {"pid": pa.array(rng.integers(0, 10**9, n), mask=rng.random(n) < 0.1), **cols}
    assert _lsd_order(wide, ["pid"], [], n) is None  # far from sorted: left to Arrow
    for sort_cols in (["node", "pid", "message"], ["node", "time", "pid", "metric"], ["time", "pid"]):
        got = _lsd_order(wide, sort_cols, ["message"] if "message" in sort_cols else [], n)
        want = pc.sort_indices(
            pa.table({c: wide[c] for c in sort_cols}), sort_keys=[(c, "ascending", "at_end") for c in sort_cols]
        )
        assert got is not None and got.tolist() == want.to_numpy().tolist(), sort_cols


def test_staged_file_reads_back_as_the_staged_schema_with_plain_strings(tmp_path):
    """Dictionary-encoded columns are written from their codes without the stored Arrow schema:
    readers get exactly the staged schema (plain strings, nullability, metadata), the same rows."""
    import pyarrow.parquet as pq

    from nodewatch.tasks.core.store import Store

    store = Store(str(tmp_path / "store"))
    f = _write(tmp_path / "a.log", _lines(3, 400))
    spec = sources()["syslog"]
    res = ingest_files(store, spec, [f], RunRecorder(store, "t", {}), data_docs=False)
    assert res.staged_files
    ing = Ingestor(store, spec, RunRecorder(store, "t2", {}))
    for path in res.staged_files:
        t = pq.read_table(path)
        assert t.schema.equals(ing.staged_schema, check_metadata=True)
        assert pq.ParquetFile(path).schema_arrow.equals(ing.staged_schema, check_metadata=True)
        assert set(t.column("source_sha256").to_pylist()) == {res.inputs[0].sha256}


def test_take_columns_slices_consecutive_rows_and_keeps_dictionaries():
    t = pa.table(
        {
            "node": pa.array(["b", "a", "b", "c"]).dictionary_encode(),
            "value": pa.array([1.0, 2.0, 3.0, 4.0]),
            ORDER: pa.array([0, 0, 1, 1], pa.int32()),
        }
    )
    schema = pa.schema([("node", pa.string()), ("value", pa.float64()), ("source_sha256", pa.string())])
    shas = pa.array(["s0", "s1"])
    for rows in ([1, 2], [3, 0, 2], [0, 1, 2, 3], [2]):
        plain = _take_columns(t, np.array(rows), shas, schema)
        assert plain.schema == schema
        enc = _take_columns(t, np.array(rows), shas, schema, dictionaries=True)
        assert enc.column("node").type == _DICT and enc.column("source_sha256").type == _DICT
        assert enc.cast(schema).equals(plain)
        assert plain.column("node").to_pylist() == [["b", "a", "b", "c"][i] for i in rows]
        assert plain.column("source_sha256").to_pylist() == [["s0", "s0", "s1", "s1"][i] for i in rows]
