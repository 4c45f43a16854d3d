"""Privacy by default (issue 24): Slurm user and group names are hashed unless ``--no-hash-users``.

The key is the store's own ``keys/user-hash.key`` (created at first use, mode 0600) unless a
``hash_salt`` is configured; it never appears in a manifest, log, report or artifact.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "jobs"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bad_inputs"))
from make_jobs_corpus import SACCT_HEADER, sacct_row  # noqa: E402

NAMES = ("user001", "user002", "user003", "zoe.private", "grp.secret")


def _inputs(tmp_path: Path) -> list[str]:
    """The sacct fixture plus a dump with a named group, a cancelled job and one unparseable line."""
    extra = tmp_path / "in" / "sacct_private.log"
    extra.parent.mkdir(parents=True, exist_ok=True)
    good = sacct_row(job="700", user="zoe.private", state="CANCELLED by 4242").replace("|users|", "|grp.secret|")
    assert "grp.secret" in good
    extra.write_text("\n".join([SACCT_HEADER, good, "701|zoe.private|grp.secret|this line is not a record"]) + "\n")
    return [str(FIX / "sacct_simple.log"), str(extra)]


def _store_text(root: Path) -> dict[str, bytes]:
    """Every file of the store except ``raw/`` (the landed input bytes) and the key file itself."""
    out = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith("raw/") and rel != "keys/user-hash.key":
            out[rel] = p.read_bytes()
    return out


@pytest.mark.slow
def test_default_ingest_hashes_users_key_file_private_and_stable(prefect_harness, tmp_path, monkeypatch, caplog, capsys):
    from nodewatch.flows.ingest import ingest_jobs
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.ingest.jobs import keyed_hash

    for k in ("NODEWATCH_HASH_USERS", "NODEWATCH_HASH_SALT", "NODEWATCH_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    files = _inputs(tmp_path)
    caplog.set_level(logging.DEBUG)
    stores = []
    for name in ("a", "b"):
        root = tmp_path / name
        m = ingest_jobs(files, store=str(root))
        assert m["status"] in ("completed", "partial") and m["parameters"]["hash_users"] is True
        c = m["counts"]["jobs"]
        assert c["staged"] > 0 and c["quarantined"] >= 1
        stores.append(root)
    logs = caplog.text + "".join(capsys.readouterr())

    root = stores[0]
    key_file = root / "keys" / "user-hash.key"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(key_file.parent).st_mode) == 0o700
    key = key_file.read_text().strip()
    assert len(key) == 64 and int(key, 16) >= 0  # 32 random bytes, hex
    assert key != (stores[1] / "keys" / "user-hash.key").read_text().strip()  # one key per store

    # no clear user/group name (nor the key) in staged, quarantine, manifests, Data Docs or the logs
    for rel, data in _store_text(root).items():
        for n in (*NAMES, key):
            assert n.encode() not in data, (rel, n)
    for n in (*NAMES, key):
        assert n not in logs, n
    staged = Store(str(root)).read_staged("jobs")
    users = set(staged.column("user").to_pylist())
    assert keyed_hash("user001", key) in users and keyed_hash("zoe.private", key) in users
    assert keyed_hash("grp.secret", key) in set(staged.column("group").to_pylist())

    # a second run of the same store (new bytes, same names) gives the same hashes
    again = tmp_path / "in2" / "sacct_again.log"
    again.parent.mkdir()
    again.write_text(SACCT_HEADER + "\n" + sacct_row(job="900", user="zoe.private") + "\n")
    ingest_jobs([str(again)], store=str(root))
    t = Store(str(root)).read_staged("jobs")
    assert t.filter(pc.equal(t.column("job_id"), "900")).column("user").to_pylist() == [keyed_hash("zoe.private", key)]
    assert key_file.read_text().strip() == key  # the key is created once


@pytest.mark.slow
def test_no_hash_users_is_the_explicit_opt_out(prefect_harness, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from nodewatch.flows.cli import app
    from nodewatch.tasks.core.store import Store

    for k in ("NODEWATCH_HASH_USERS", "NODEWATCH_HASH_SALT", "NODEWATCH_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    store = tmp_path / "s"
    r = CliRunner().invoke(app, ["--store", str(store), "ingest", "jobs", str(FIX / "sacct_simple.log"), "--no-hash-users",
                                 "--no-data-docs"])
    assert r.exit_code == 0, r.output
    assert "user001" in set(Store(str(store)).read_staged("jobs").column("user").to_pylist())
    assert not (store / "keys").exists()  # no key is made when nothing is hashed


def test_configured_salt_wins_and_loose_key_file_is_tightened(tmp_path):
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.ingest.jobs import keyed_hash
    from nodewatch.tasks.ingest.run import new_ingestor, user_hash_key

    salt = "configured-salt-0123456789"
    store = Store(str(tmp_path / "s"))
    ing = new_ingestor(store, "jobs", RunRecorder(store, "t", {}), hash_salt=salt)
    ing.add_file(FIX / "sacct_simple.log")
    ing.finish(data_docs=False)
    assert keyed_hash("user001", salt) in set(store.read_staged("jobs").column("user").to_pylist())
    assert not Path(store.root, "keys").exists()
    key = user_hash_key(store)
    path = Path(store.root, "keys", "user-hash.key")
    os.chmod(path, 0o644)
    assert user_hash_key(store) == key and stat.S_IMODE(os.stat(path).st_mode) == 0o600
