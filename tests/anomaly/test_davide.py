"""Real labelled data: the D.A.V.I.D.E. node (tasks/anomaly/davide.py, benchmarks/alert_davide.py).

The counts are those of ../shared/data/PROVENANCE.md (24,813 rows; 864 dead-sensor rows; 20,283 normal,
4,004 misconfig_type1, 526 misconfig_type2); the AUCs are the figures of docs/alerts.md. Skipped, with the
reason, when the shared data folder is absent. The parser's bad-input corpus runs everywhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from nodewatch.tasks.anomaly.davide import DATA_FILE, PERIODS_FILE, read_davide, windows

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "telemetry" / "davide"
PERIODS = "start,end,label\n2018-04-12 11:50:00,2018-04-13 09:08:00,misconfig_type1\n"


@pytest.mark.skipif(not (DATA / DATA_FILE).is_file(), reason=f"D.A.V.I.D.E. extract not present at {DATA}")
def test_davide_counts_and_aucs() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from alert_davide import baseline_score, temporal_score

    from nodewatch.models.anomaly.metrics import pooled_auc

    dv = read_davide(DATA)
    assert len(dv.samples) == 24_813 and dv.dead_rows == 864 and dv.bad_rows == 0
    assert dv.samples["label"].value_counts().to_dict() == {"": 20_283, "misconfig_type1": 4_004, "misconfig_type2": 526}
    w = windows(dv)
    import pandas as pd

    split = int(np.searchsorted(w["times"], pd.Timestamp("2018-04-07", tz="UTC")))
    assert split == 3360 and w["label"][split:].sum() == 1520
    y = w["label"][split:]
    ours = pooled_auc(temporal_score(w, split)[split:], y)
    base = pooled_auc(baseline_score(w, split)[split:], y)
    # docs/alerts.md: power alone does not separate the governor misconfigurations (both about 0.48)
    assert ours == pytest.approx(0.483, abs=0.01) and base == pytest.approx(0.480, abs=0.01)


def _write(tmp_path: Path, data: bytes, periods: bytes = PERIODS.encode()) -> Path:
    (tmp_path / DATA_FILE).write_bytes(data)
    (tmp_path / PERIODS_FILE).write_bytes(periods)
    return tmp_path


GOOD = (b"time_stamp,node_id,power\n2018-04-12 11:45:00,davide19,470.1\n2018-04-12 11:50:00,davide19,480.5\n"
        b"2018-04-12 11:55:00,davide19,0.155\n")


@pytest.mark.parametrize("data, rows, bad, dead", [
    (GOOD, 3, 0, 1),
    (GOOD[:-8], 2, 1, 0),  # truncated last line (no power): one bad row
    (GOOD + b"garbage,,\n\x00\x01\x02\n", 3, 2, 1),
    (GOOD + b"2018-04-12 11:45:00,davide19,999\n", 3, 1, 1),  # duplicate time: first kept
    (GOOD + b"2018-13-45 99:99:99,davide19,1\n2018-04-12 12:00:00,davide19,nan\n2018-04-12 12:05:00,davide19,inf\n", 3, 3, 1),
    (GOOD.replace(b"470.1", b"\xff\xfe470.1"), 2, 1, 1),  # wrong encoding: the row is bad, not the file
])
def test_parser_bad_inputs(tmp_path: Path, data: bytes, rows: int, bad: int, dead: int) -> None:
    dv = read_davide(_write(tmp_path, data))
    assert len(dv.samples) == rows and dv.bad_rows == bad
    assert int(dv.samples["power"].isna().sum()) == dv.dead_rows
    assert dv.samples["label"].tolist()[-1] == "misconfig_type1" or rows < 3


def test_parser_refuses_missing_columns_and_links(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="missing column"):
        read_davide(_write(tmp_path, b"when,power\n2018-04-12 11:45:00,470\n"))
    with pytest.raises(ValueError, match="missing column"):
        read_davide(_write(tmp_path, GOOD, b"start,stop\n"))
    real = tmp_path / "real.csv"
    real.write_bytes(GOOD)
    d = tmp_path / "linked"
    d.mkdir()
    (d / DATA_FILE).symlink_to(real)
    (d / PERIODS_FILE).write_text(PERIODS)
    with pytest.raises(Exception, match="(?i)link|regular|unsafe"):
        read_davide(d)
