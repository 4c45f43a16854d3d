"""Counter -> rate conversion (tasks/counters.py): hand-computed rates, resets, repeats, batches."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tasks.counters import CONFLICT, FIRST, NONFINITE, OK, RESET, CounterState, counter_rates, rates_with_state

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
