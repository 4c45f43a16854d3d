"""RunRecorder.after_finish: pointer moves wait for the run's end (docs/store.md: CURRENT only after the run finished)."""

from __future__ import annotations

import pytest

from nodewatch.tasks.core.runs import RunRecorder


@pytest.mark.parametrize(("status", "error", "moved"), [(None, None, True), (None, "one bad file", True),
                                                         ("failed", None, False)])
def test_publish_runs_after_a_completed_or_partial_manifest_only(store, status, error, moved):
    rec = RunRecorder(store, "nightly", {})
    rec.write()
    seen = []

    def publish() -> None:  # the manifest is final when the pointer moves
        seen.append(store.read_json("runs", f"{rec.run_id}.json")["status"])
        store.set_current("syslog/miner", rec.run_id)

    rec.after_finish(publish)
    assert store.current("syslog/miner") is None  # nothing moved while the run is running
    if error:
        rec.error(error)
    m = rec.finish(status)
    assert seen == ([m.status] if moved else [])
    assert (store.current("syslog/miner") == rec.run_id) is moved
    rec.finish(status)  # a second finish does not publish again
    assert len(seen) == (1 if moved else 0)
