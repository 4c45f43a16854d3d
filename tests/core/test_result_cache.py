"""The nightly score cache cannot run code (issue 24, "Code in a cache").

Prefect deserialises a persisted task result with the serializer *named in the result file*, so a
replaced file under ``PREFECT_HOME/storage`` declaring ``pickle`` ran its payload at the next nightly
of that day, whatever serializer the task asked for. The score task now persists nothing through
Prefect; its resume cache is plain JSON in the store (:mod:`nodewatch.tasks.core.result_cache`).
"""

from __future__ import annotations

import base64
import json
import math
from datetime import date, timedelta
from pathlib import Path

import cloudpickle
import pandas as pd
import pytest

from nodewatch.tasks.core.store import Store


class _Payload:
    """Unpickling this creates ``marker`` (stands for any code an attacker would run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):  # noqa: ANN204
        return (open, (self.marker, "w"))


def _plant_pickle_result(path: Path, marker: Path) -> None:
    from prefect import __version__

    payload = base64.b64encode(cloudpickle.dumps(_Payload(marker))).decode()
    record = {"metadata": {"storage_key": str(path), "expiration": None, "serializer": {"type": "pickle"},
                           "prefect_version": __version__, "storage_block_id": None},
              "result": payload}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_tampered_prefect_result_file_is_not_executed(tmp_path, prefect_harness):
    """A cloudpickle payload planted where Prefect's cache of the score task lived never runs."""
    from prefect import flow
    from prefect.settings import get_current_settings

    import nodewatch.flows.nightly as nightly_mod
    from nodewatch.tasks.anomaly.score import ScoreJob

    st = Store(str(tmp_path / "store"))
    jobs = (ScoreJob(st.url, "2026-01-02", 0, "exp", "20260101T000000Z-abcdef"),)
    params = {"jobs": jobs, "fingerprint": "fp", "name": "x"}
    key = nightly_mod._score_cache_key(None, params)  # the key the task was cached under
    marker = tmp_path / "PWNED"
    storage = Path(get_current_settings().results.local_storage_path)
    for where in (storage / key, tmp_path / "prefect-storage" / key):
        _plant_pickle_result(where, marker)

    @flow(name="test-score-cache")
    def run_score() -> str:
        fut = nightly_mod.score_task.submit(jobs, "fp", "x")
        fut.wait()
        return fut.state.type.value

    state = run_score()
    assert not marker.exists(), "the planted pickle payload ran"
    assert state in ("FAILED", "COMPLETED")  # no telemetry in this store: scoring itself fails, loudly


def test_json_cache_round_trip_and_refuses_code(tmp_path):
    from nodewatch.tasks.core.result_cache import load_result, save_result

    st = Store(str(tmp_path / "store"))
    value = [{"batch": 0, "rows": [{"day": date(2026, 1, 2), "peak_time": pd.Timestamp("2026-01-02T03:04:05Z"),
                                    "first_anomalous": None, "mean_score": 0.5, "top_metrics": ["power"],
                                    "nan": float("nan")}], "seconds": 1.5}]
    save_result(st, "k1", value)
    got = load_result(st, "k1", max_age=timedelta(days=30))
    row = got[0]["rows"][0]
    assert row["day"] == date(2026, 1, 2) and row["peak_time"] == pd.Timestamp("2026-01-02T03:04:05Z")
    assert row["first_anomalous"] is None and row["top_metrics"] == ["power"] and math.isnan(row["nan"])
    assert load_result(st, "k1", max_age=timedelta(seconds=-1)) is None  # expired
    # a tampered cache file: Prefect-style class/exception references and a pickle are data or a miss, never code
    path = Path(st.path(*_cache_key_path(st, "k2")))
    path.parent.mkdir(parents=True, exist_ok=True)
    hostile = {"__class__": "os.system", "data": "touch " + str(tmp_path / "PWNED"),
               "x": {"__exc_type__": "subprocess.CalledProcessError", "message": "x"}}
    path.write_text(json.dumps({"written": "2099-01-01T00:00:00+00:00", "value": hostile}))
    assert load_result(st, "k2", max_age=timedelta(days=30)) == hostile
    path.write_bytes(cloudpickle.dumps(_Payload(tmp_path / "PWNED")))
    assert load_result(st, "k2", max_age=timedelta(days=30)) is None
    assert not (tmp_path / "PWNED").exists()


def _cache_key_path(st: Store, key: str) -> tuple[str, ...]:
    from nodewatch.tasks.core.result_cache import cache_parts

    return cache_parts(key)


@pytest.mark.parametrize("bad", [b"", b"{", b"[]", b'{"written": "nope", "value": 1}'])
def test_unreadable_cache_file_is_a_miss(tmp_path, bad):
    from nodewatch.tasks.core.result_cache import cache_parts, load_result

    st = Store(str(tmp_path / "store"))
    p = Path(st.path(*cache_parts("k")))
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(bad)
    assert load_result(st, "k", max_age=timedelta(days=1)) is None
