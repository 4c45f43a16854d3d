"""PaRS anonymisation: keyed, template-preserving, reversible only with the key, key never in outputs."""

from __future__ import annotations

import csv
import os
import stat
import sys
from pathlib import Path

import pytest

from nodewatch.models.syslog.metrics import grouping_scores
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.syslog.anonymise import AnonKeyError, Anonymiser, anon_key, open_mapping, reveal, seal_mapping
from nodewatch.tasks.syslog.templates import TemplateMiner

LOGHUB = Path(__file__).resolve().parents[3] / "shared" / "data" / "loghub"
KEY = b"0123456789abcdef0123456789abcdef"

LINES = [
    "Accepted publickey for alice from 10.1.2.3 port 5022 ssh2",
    "Accepted publickey for bob from 10.9.9.9 port 6000 ssh2",
    "pam_unix(sshd:session): session opened for user alice by (uid=0)",
    "pam_unix(sshd:session): session opened for user carol by (uid=0)",
    "(root) CMD (run-parts /etc/cron.hourly)",
    "(siavash) CMD (/usr/lib32/lm/lm1 1 1)",
    "nfs: server nfs01 not responding, still trying",
    "mail to admin@example.org failed",
]


def _anonymise(lines, key=KEY, numbers=False):
    m = TemplateMiner()
    a = m.assign(lines)
    t = m.templates()
    an = Anonymiser(key, numbers=numbers)
    return a, an, an.messages(lines, [t.get(int(i)) for i in a.template_id])


def test_sensitive_parts_hashed_constants_kept():
    _, an, out = _anonymise(LINES)
    joined = " ".join(out)
    for secret in ("alice", "bob", "carol", "10.1.2.3", "siavash", "/etc/cron.hourly", "/usr/lib32/lm/lm1",
                   "admin@example.org", "(root)"):
        assert secret not in joined, (secret, out)
    assert out[0].startswith("Accepted publickey for ") and " port 5022 " in out[0]  # numbers kept by default
    assert out[6].startswith("nfs: server a0") and out[6].endswith(" not responding, still trying")  # host name hashed
    # same input, same key -> same hash; different key -> different hash
    assert _anonymise(LINES)[2] == out
    assert _anonymise(LINES, key=b"another key of 32 bytes or more!!")[2] != out


def test_mapping_reversible_only_with_the_key():
    _, an, out = _anonymise(LINES)
    blob = seal_mapping(KEY, an.mapping)
    assert b"alice" not in blob and KEY not in blob
    tok = out[0].split()[3]
    assert reveal(KEY, blob, [tok, "a0ffffffffff"]) == {tok: "alice", "a0ffffffffff": None}
    with pytest.raises(AnonKeyError, match="wrong key or damaged"):
        open_mapping(b"wrong key wrong key wrong key!!!", blob)
    with pytest.raises(AnonKeyError):
        open_mapping(KEY, blob[:-3] + b"xxx")


def test_anonymised_log_gives_the_same_templates_and_sg():
    a, _, out = _anonymise(LINES * 5)
    b = TemplateMiner().assign(out)
    assert grouping_scores(a.template_id.tolist(), b.template_id.tolist())["GA"] == 1.0
    assert len(out) == len(LINES) * 5  # one output line per input line: SG per node and window unchanged


@pytest.mark.skipif(not LOGHUB.exists(), reason="../shared/data/loghub not present on this machine")
@pytest.mark.parametrize("name", ["BGL", "HPC"])
def test_same_grouping_on_loghub(name):
    with (LOGHUB / f"{name}_2k.log_structured_corrected.csv").open(encoding="utf-8", newline="") as f:
        msgs = [r["Content"] for r in csv.DictReader(f)]
    a, _, out = _anonymise(msgs)
    b = TemplateMiner().assign(out)
    assert grouping_scores(a.template_id.tolist(), b.template_id.tolist())["GA"] == 1.0


def test_hostile_messages():
    lines = ["", "   ", "x" * 100_000, "\x00\x01 \ufffd user \u202eevil", "user", "\udcff broken surrogate"]
    _, an, out = _anonymise(lines)
    assert len(out) == len(lines)
    assert "\u202eevil" not in out[3]  # the word after 'user' is hashed, control characters with it


def test_key_file_created_private_and_env_override(tmp_path, monkeypatch):
    monkeypatch.delenv("NODEWATCH_SYSLOG_SECRET", raising=False)
    store = Store(str(tmp_path / "s"))
    k1 = anon_key(store)
    assert k1 == anon_key(store) and len(k1) >= 32
    p = tmp_path / "s" / "keys" / "syslog-anon.key"
    if sys.platform != "win32":
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    monkeypatch.setenv("NODEWATCH_SYSLOG_SECRET", "a-long-site-secret-from-the-vault")
    assert anon_key(store) == b"a-long-site-secret-from-the-vault"
    monkeypatch.setenv("NODEWATCH_SYSLOG_SECRET", "short")
    with pytest.raises(AnonKeyError, match="shorter than 16"):
        anon_key(store)
    monkeypatch.delenv("NODEWATCH_SYSLOG_SECRET")
    p.write_bytes(b"abc")
    with pytest.raises(AnonKeyError, match="damaged"):
        anon_key(store)


def test_filtered_anonymised_uses_only_hash_and_time():
    """The filtered + anonymised variant (paper §III-E: "detected based on their hash key and time-stamp"): an outside
    party mines the anonymised text with its own miner and filters on those ids, node and time only; here that drops
    exactly the lines the raw variant drops (cron on every node every 10 min: frequent/common/periodic; rare errors
    kept)."""
    import numpy as np

    from nodewatch.models.syslog.filtering import filtered_templates

    msgs, node, t = [], [], []
    for n in range(10):
        for k in range(144):
            msgs.append(f"pam_unix(crond:session): session opened for user root by (uid={k % 3})")
            node.append(n)
            t.append(k * 600 + n)
        if n < 2:
            msgs.append(f"EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#{n} from user u{n}x")
            node.append(n)
            t.append(5000 + n)
    raw_ids, _, anon = _anonymise(msgs)
    assert not any("EDAC" in m and "u0x" in m for m in anon)
    anon_ids = TemplateMiner().assign(anon).template_id  # no access to the raw templates
    nodes, times = np.array(node), np.array(t, np.int64) * 10**9
    fr = filtered_templates(raw_ids.template_id, nodes, times, 0.05, 0.5, node_share=0.5)
    fa = filtered_templates(anon_ids, nodes, times, 0.05, 0.5, node_share=0.5)
    drop_r = np.isin(raw_ids.template_id, list(fr))
    drop_a = np.isin(anon_ids, list(fa))
    assert drop_r.sum() == 1440 and np.array_equal(drop_r, drop_a)
