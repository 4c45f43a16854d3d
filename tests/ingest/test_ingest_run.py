"""new_ingestor: known nodes from the staged topology, plus configured service hosts."""

from __future__ import annotations

from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.ingest.run import new_ingestor

TOPO = "node,rack,row,chassis,position,architecture\ncn0001,r00,row0,c0,1,x86_64\n"
LOG = (
    "<30>1 2026-01-02T10:00:00Z cn0001 sshd 100 - - Accepted publickey for alice\n"
    "<27>1 2026-01-02T10:01:00Z slurmctl01 slurmctld 7 - - error: Nodes cn0001 not responding, setting DOWN\n"
    "<30>1 2026-01-02T10:02:00Z cn9999 sshd 101 - - Accepted publickey for bob\n"
)


def _ingest(store, source, path, **kw):
    rec = RunRecorder(store, "t", {})
    ing = new_ingestor(store, source, rec, **kw)
    ing.add_file(path)
    res = ing.finish(data_docs=False)
    rec.finish()
    return res


def test_service_hosts_are_known_but_other_unknown_hosts_are_not(store, tmp_path):
    (tmp_path / "topo.csv").write_text(TOPO)
    (tmp_path / "a.log").write_text(LOG)
    assert _ingest(store, "topology", tmp_path / "topo.csv").counts.staged == 1
    res = _ingest(store, "syslog", tmp_path / "a.log", service_hosts=["slurmctl01"])
    assert (res.counts.staged, res.counts.quarantined) == (2, 1)
    nodes = sorted(store.read_staged("syslog").column("node").to_pylist())
    assert nodes == ["cn0001", "slurmctl01"]


def test_without_service_hosts_controller_lines_are_quarantined(store, tmp_path):
    (tmp_path / "topo.csv").write_text(TOPO)
    (tmp_path / "a.log").write_text(LOG)
    _ingest(store, "topology", tmp_path / "topo.csv")
    res = _ingest(store, "syslog", tmp_path / "a.log")
    assert (res.counts.staged, res.counts.quarantined) == (1, 2)
    assert any("in_set" in k for k in res.unexpected)
