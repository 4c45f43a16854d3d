"""Counter -> rate conversion (tasks/core/counters.py): hand-computed rates, resets, repeats, batches."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from nodewatch.tasks.core.counters import CONFLICT, FIRST, NONFINITE, OK, RESET, CounterState, counter_rates, rates_with_state

S = 1_000_000_000  # ns per second


def test_rates_hand_computed_and_first_sample():
    rate, status = counter_rates(np.zeros(3, int), np.array([0, 10, 30]) * S, np.array([100.0, 200.0, 260.0]))
    assert np.isnan(rate[0]) and status[0] == FIRST
    assert rate[1:].tolist() == [10.0, 3.0]
    assert status[1:].tolist() == [OK, OK]


def test_unsorted_input_and_two_series_returned_in_input_order():
    series = np.array([1, 0, 1, 0])
    t = np.array([20, 10, 0, 0]) * S
    v = np.array([50.0, 40.0, 10.0, 0.0])
    rate, status = counter_rates(series, t, v)
    assert status.tolist() == [OK, OK, FIRST, FIRST]
    assert rate[0] == 2.0 and rate[1] == 4.0


def test_reset_is_taken_from_zero_or_nan():
    t = np.array([0, 10, 20]) * S
    v = np.array([1000.0, 1100.0, 50.0])
    rate, status = counter_rates(np.zeros(3, int), t, v)
    assert status[2] == RESET and rate[2] == 5.0  # 50 / 10 s: restarted from 0
    rate, status = counter_rates(np.zeros(3, int), t, v, on_reset="nan")
    assert status[2] == RESET and np.isnan(rate[2])


def test_repeated_row_copies_rate_and_conflict_is_nan():
    t = np.array([0, 10, 10, 10, 20]) * S
    v = np.array([0.0, 100.0, 100.0, 100.0, 300.0])
    rate, status = counter_rates(np.zeros(5, int), t, v)
    assert rate[1:4].tolist() == [10.0, 10.0, 10.0]
    assert status[1:4].tolist() == [OK, OK, OK]
    assert rate[4] == 20.0
    rate, status = counter_rates(np.zeros(3, int), np.array([0, 10, 10]) * S, np.array([0.0, 100.0, 90.0]))
    assert CONFLICT in status.tolist()


def test_nonfinite_skipped_without_breaking_series():
    t = np.array([0, 10, 20]) * S
    v = np.array([0.0, np.nan, 200.0])
    rate, status = counter_rates(np.zeros(3, int), t, v)
    assert status.tolist() == [FIRST, NONFINITE, OK]
    assert rate[2] == 10.0


def test_state_carries_series_across_batches():
    st = CounterState()
    node = pa.array(["n1", "n1"])
    met = pa.array(["net_rx_bytes", "net_rx_bytes"])
    r1, s1, st = rates_with_state(node, met, np.array([0, 10]) * S, np.array([0.0, 50.0]), st)
    assert s1.tolist() == [FIRST, OK] and r1[1] == 5.0
    r2, s2, st = rates_with_state(pa.array(["n1", "n2"]), met, np.array([20, 20]) * S, np.array([150.0, 7.0]), st)
    assert r2[0] == 10.0 and s2.tolist() == [OK, FIRST]
    # an exact repeat of the last sample of the previous batch keeps that sample's rate
    r3, s3, st = rates_with_state(pa.array(["n1"]), pa.array(["net_rx_bytes"]), np.array([20]) * S, np.array([150.0]), st)
    assert r3[0] == 10.0 and s3[0] == OK


# --------------------------------------------------------------------------- series across files and runs
def _day_file(path, day: int, minutes, values) -> None:
    lines = ["time,node,metric,value"]
    for m, v in zip(minutes, values, strict=True):
        lines.append(f"2026-01-{day:02d}T{m // 60:02d}:{m % 60:02d}:00Z,n1,net_rx_bytes,{v}")
        lines.append(f"2026-01-{day:02d}T{m // 60:02d}:{m % 60:02d}:00Z,n1,cpu0_load,1.0")
    path.write_text("\n".join(lines) + "\n")


def test_counter_series_continue_across_runs_within_max_gap(tmp_path):
    """Day 2's first sample is differenced against day 1's last (staged by an earlier run); a seed
    older than 1 h (a backfilled earlier day) is not used; the same file twice adds nothing."""
    import pyarrow.compute as pc

    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.ingest.pipeline import ingest_files
    from nodewatch.tasks.ingest.registry import sources

    store = Store(str(tmp_path / "store"))

    def ingest(path):
        rec = RunRecorder(store, "ingest", {})
        res = ingest_files(store, sources()["telemetry"], [path], rec, data_docs=False)
        rec.finish()
        return res

    def rates(date: str) -> list[float]:
        t = store.read_staged("telemetry")
        t = t.filter(pc.and_(pc.equal(t["metric"], "net_rx_bytes_rate"), pc.equal(pc.strftime(t["time"], "%Y-%m-%d"), date)))
        return t.sort_by("time")["value"].to_pylist()

    d1, d2, d5 = tmp_path / "d1.csv", tmp_path / "d2.csv", tmp_path / "d5.csv"
    _day_file(d1, 1, [1438, 1439], [1000, 1600])  # 23:58, 23:59
    _day_file(d2, 2, [0, 1], [2200, 2500])  # 00:00, 00:01
    _day_file(d5, 5, [0, 1], [9000, 9600])
    r1 = ingest(d1)
    assert r1.counts.quarantined == 1 and rates("2026-01-01") == [10.0]  # first sample ever: no rate
    r2 = ingest(d2)
    assert r2.counts.quarantined == 0 and rates("2026-01-02") == [10.0, 5.0]  # 00:00 against 23:59 of day 1
    assert store.exists("state/counters/telemetry.parquet")
    r5 = ingest(d5)  # seed is 2 days older than the file: not used
    assert r5.counts.quarantined == 1 and rates("2026-01-05") == [10.0]
    d0 = tmp_path / "d0.csv"  # backfill of an earlier day: seeds are newer than the file, nothing changes
    _day_file(d0, 1, [600, 601], [100, 160])
    r0 = ingest(d0)
    assert r0.counts.quarantined == 1 and rates("2026-01-01") == [1.0, 10.0]
    again = ingest(d2)
    assert again.inputs[0].status == "skipped-duplicate-file" and rates("2026-01-02") == [10.0, 5.0]


def test_merge_states_keeps_the_newest_sample_per_series():
    from nodewatch.tasks.core.counters import merge_states

    a = CounterState(
        ["n1", "n2"], ["m", "m"], np.array([10, 50]), np.array([1.0, 2.0]), np.array([0.1, 0.2]), np.array([0, 0], np.int8)
    )
    b = CounterState(
        ["n1", "n3"], ["m", "m"], np.array([20, 5]), np.array([3.0, 4.0]), np.array([np.nan, 0.4]), np.array([1, 0], np.int8)
    )
    m = merge_states([a, b])
    got = {(n, k): (int(t), v) for n, k, t, v in zip(m.node, m.metric, m.time_ns, m.value, strict=True)}
    assert got == {("n1", "m"): (20, 3.0), ("n2", "m"): (50, 2.0), ("n3", "m"): (5, 4.0)}
    c = CounterState(["n2"], ["m"], np.array([50]), np.array([9.0]), np.array([0.0]), np.array([0], np.int8))
    assert merge_states([a, c]).value.tolist() == [1.0, 9.0]  # same time: the later state wins
    assert merge_states([c, a]).value.tolist() == [1.0, 2.0]
