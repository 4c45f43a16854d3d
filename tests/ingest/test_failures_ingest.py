"""Failure records through the generic ingest pipeline (staging, quarantine, duplicates, accounting)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "failures"


@pytest.mark.slow
def test_failures_pipeline(store, tmp_path) -> None:
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.ingest.failures import LANL_HEADER, SOURCES
    from nodewatch.tasks.ingest.pipeline import ingest_files

    good = "20,cluster,512,2048,4,13,12,5-Apr,5-Jun,current,part,4,1,1,0,compute,6/21/2005 10:54,6/21/2005 11:00,6,,CPU,,,,,No"
    bad = tmp_path / "lanl_bad.csv"
    bad.write_text("\n".join([
        ",".join(LANL_HEADER),
        good,
        good,  # exact duplicate
        good.replace(",6,,CPU", ",-5,,CPU").replace("10:54", "10:55"),  # negative down time
        good.replace("6/21/2005 11:00", "6/20/2005 11:00").replace("10:54", "10:56"),  # fixed before started
        good.replace("6/21/2005 10:54", "6/21/2095 10:54"),  # future
        good.replace(",13,12,", ",13,x,"),  # unparseable node number
    ]) + "\n")
    rec = RunRecorder(store, "ingest", {"source": "failures"})
    res = ingest_files(store, SOURCES[0], [FIX / "lanl_excerpt.csv", FIX / "pnnl_excerpt.csv", bad], rec, data_docs=False)
    rec.finish()
    c = res.counts
    assert c.rows_in == 60 + 42 + 6
    assert c.rows_in == c.staged + c.quarantined + c.duplicates
    assert c.duplicates >= 1 and c.quarantined == 4
    q = store.read_staged("failures")
    assert q is not None and q.num_rows == c.staged
    import pyarrow as pa

    quarantined = pa.concat_tables([store.read_parquet(p[len(store.root) + 1:]) for p in res.quarantine_files])
    reasons = " | ".join(quarantined.column("reason").to_pylist())
    assert quarantined.num_rows == 4, reasons
    for expected in ("downtime_s", "end>=start", "start", "parse: node number 'x'"):
        assert expected in reasons, reasons
