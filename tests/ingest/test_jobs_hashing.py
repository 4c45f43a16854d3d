"""User hashing of the staged jobs table (settings hash_users + hash_salt)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.jobs import HASH_HEX_CHARS, IDENTITY_COLUMNS, hash_identities, keyed_hash
from nodewatch.tasks.ingest.run import new_ingestor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bad_inputs"))
from make_jobs_corpus import SACCT_HEADER, sacct_row  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "jobs"
SALT1, SALT2 = "first-secret-salt-0123", "second-secret-salt-4567"
HEX = re.compile(rf"^[0-9a-f]{{{HASH_HEX_CHARS}}}$")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    """The sacct + SWF fixtures plus a sacct file with a cancelled job and a row validation quarantines."""
    d = tmp_path_factory.mktemp("hash_inputs")
    extra = d / "sacct_cancel.log"
    extra.write_text(
        "\n".join(
            [
                SACCT_HEADER,
                sacct_row(job="500", user="zoe.private", state="CANCELLED by 4242"),
                # a job that ran on 0 nodes (a never-started job's NNodes 0 is staged as null since issue 24)
                sacct_row(job="501", user="quinn.quarantined", nnodes="0", nodelist="None assigned"),
            ]
        )
        + "\n"
    )
    return [FIX / "sacct_simple.log", FIX / "KTH-SP2-1996-2.1-cln-head.swf", extra]


def _ingest(root: Path, files: list[Path], salt: str | None) -> tuple[Store, pa.Table]:
    store = Store(str(root))
    rec = RunRecorder(store, "t", {})
    ing = new_ingestor(store, "jobs", rec, hash_salt=salt)
    for f in files:
        ing.add_file(f)
    ing.finish(data_docs=False)
    rec.finish()
    return store, store.read_staged("jobs").sort_by([("system", "ascending"), ("job_id", "ascending"), ("step", "ascending")])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, inputs) -> dict[str, tuple[Store, pa.Table]]:
    root = tmp_path_factory.mktemp("hash_runs")
    return {
        name: _ingest(root / name, inputs, salt) for name, salt in [("plain", None), ("a", SALT1), ("b", SALT1), ("c", SALT2)]
    }


def test_keyed_hash_is_hmac_sha256_truncated():
    import hashlib
    import hmac

    assert keyed_hash("alice", SALT1) == hmac.new(SALT1.encode(), b"alice", hashlib.sha256).hexdigest()[:16]
    assert HEX.match(keyed_hash("", SALT1)) and keyed_hash("alice", SALT1) != keyed_hash("alice", SALT2)
    t = pa.table({"user": ["a", None, "a"], "group": pa.array([None, None, None], pa.string()), "nodes": [1, 2, 3]})
    h = hash_identities(t, SALT1)
    assert h.column("user").to_pylist() == [keyed_hash("a", SALT1), None, keyed_hash("a", SALT1)]
    assert h.column("group").null_count == 3 and h.column("nodes") == t.column("nodes")
    with pytest.raises(ValueError, match="non-empty salt"):
        hash_identities(t, "")


def test_staged_identities_hashed_stable_and_salt_dependent(runs):
    plain, a, b, c = (runs[k][1] for k in ("plain", "a", "b", "c"))
    assert plain.num_rows == a.num_rows == b.num_rows == c.num_rows > 0
    for col in IDENTITY_COLUMNS:
        raw = plain.column(col).to_pylist()
        assert any(v is not None for v in raw), col
        ha, hb, hc = a.column(col).to_pylist(), b.column(col).to_pylist(), c.column(col).to_pylist()
        assert ha == hb  # same salt, another run: same values
        assert [v is None for v in ha] == [v is None for v in raw]  # null stays null
        assert ha == [None if v is None else keyed_hash(v, SALT1) for v in raw]
        assert all(HEX.match(v) for v in ha if v is not None)
        assert all(x != y for x, y in zip(ha, hc, strict=True) if x is not None)  # another salt: other values
    # every other column is untouched
    others = [n for n in plain.column_names if n not in IDENTITY_COLUMNS and n != "source_sha256"]
    assert a.select(others).equals(plain.select(others))


def test_raw_names_absent_from_staged_and_quarantined_rows(runs):
    plain_store, plain = runs["plain"]
    store, _ = runs["a"]
    names = {v for col in IDENTITY_COLUMNS for v in plain.column(col).to_pylist() if v is not None}
    names |= {"zoe.private", "4242", "quinn.quarantined"}
    assert {"user001", "zoe.private", "4242", "12"} <= names
    files = sorted(Path(store.root, "staged", "jobs").rglob("*.parquet"))
    assert files
    words = sorted(n for n in names if not n.isdigit())  # (SWF's numeric uids also occur as job ids)
    for f in files:
        t = pq.read_table(f)
        for name in t.column_names:
            if pa.types.is_string(t.schema.field(name).type):
                values = sorted(names) if name in IDENTITY_COLUMNS else words
                assert not pc.any(pc.is_in(t.column(name), value_set=pa.array(values))).as_py(), (f, name)
    q = pa.concat_tables(pq.read_table(f) for f in Path(store.root, "quarantine", "jobs").rglob("*.parquet"))
    raw = q.filter(pc.equal(q.column("source_offset"), 3)).column("raw").to_pylist()
    assert len(raw) == 1 and "quinn.quarantined" not in raw[0] and keyed_hash("quinn.quarantined", SALT1) in raw[0]


def test_empty_salt_uses_the_store_key(tmp_path):
    """``hash_salt=""`` (hashing on, no salt configured) hashes with the store's key file."""
    store, staged = _ingest(tmp_path / "s", [FIX / "sacct_simple.log"], "")
    key = Path(store.root, "keys", "user-hash.key").read_text().strip()
    assert len(key) == 64
    users = [u for u in staged.column("user").to_pylist() if u is not None]
    assert users and "user001" not in users and keyed_hash("user001", key) in users
