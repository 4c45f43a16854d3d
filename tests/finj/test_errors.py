"""``tasks/finj/errors.py``: window positions and fault seconds by hand (60-s windows ending every 10 s)."""

from __future__ import annotations

import numpy as np

from nodewatch.tasks.finj.errors import Instance, application, fault_seconds, positions


def test_positions_and_fault_seconds_by_hand() -> None:
    # one fault over seconds [100, 190) (events: start 100, end 190), one application over [0, 400)
    f = Instance("1", "leak", True, False, 100.0, 190.0)
    ends = np.array([90, 159, 170, 189, 190, 249, 250, 310, 320])
    pos = positions(ends, [f])
    # the fault labels seconds 100..189 (dataset.per_second_state: ceil of its times); window [end - 59, end]:
    # 90 -> [31, 90] healthy (no fault second, ends before it); 159, 170, 189 -> inside; 190 -> [131, 190] holds
    # the healthy second 190: boundary; 249 -> [190, 249] and 250 -> [191, 250]: after (first second 1-2 s after
    # the fault's last); 310 -> [251, 310]: 62 s after it, healthy
    assert list(pos) == ["healthy", "inside", "inside", "inside", "boundary", "after", "after", "healthy", "healthy"]
    assert list(fault_seconds(ends, [f])) == [0, 60, 60, 60, 59, 0, 0, 0, 0]
    g = Instance("4", "dial", True, True, 100.4, 120.2)  # fractional times: seconds 101..120
    assert list(fault_seconds(np.array([110, 120, 179, 180]), [g])) == [10, 20, 1, 0]
    assert list(positions(np.array([110, 179, 180]), [g])) == ["boundary", "boundary", "after"]
    apps = [Instance("2", "stream", False, False, 0.0, 400.0), Instance("3", "fileio", False, False, 150.0, 170.0)]
    assert list(application(ends, apps)) == ["stream"] * len(ends)
    assert list(application(np.array([500]), apps)) == ["none"]
