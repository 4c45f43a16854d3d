"""models/states/ (machine, reference, timeline): the worked example, semantics, and vectorised == reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.models.states.machine import derive_states, loss_table, losses_active_at
from nodewatch.models.states.reference import derive_states_reference
from nodewatch.models.states.timeline import NS_PER_S, Event, Events, Layers, Source, State, to_grid

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

S = NS_PER_S
H = 3600 * S
DAY = 86400 * S


def _ev(rows: list[tuple[int, int, int, int]]) -> Events:
    a = np.array(rows, np.int64).reshape(-1, 4)
    return Events(a[:, 0], a[:, 1], a[:, 2].astype(np.int8), a[:, 3])


def _pairs(tl, node=0):
    m = tl.node == node
    return [(int(s), int(e), State(int(st)).name) for s, e, st in zip(tl.start[m], tl.end[m], tl.state[m], strict=True)]


def _both(*a, **k):
    v = derive_states(*a, **k)
    r = derive_states_reference(*a, **k)
    assert v.equals(r), "vectorised and reference timelines differ"
    return v


def test_worked_example_fig2():
    """Sec. II-C / Fig. 2: loss 6/9 03:29:14 .. 6/13 10:07:09, boot 11 min 17.957 s -> DOWN then BOOTING."""
    t0 = pd.Timestamp("2018-06-09", tz="UTC").value
    t1 = pd.Timestamp("2018-06-14", tz="UTC").value
    nr = pd.Timestamp("2018-06-09T03:29:14Z").value
    now = pd.Timestamp("2018-06-13T10:07:09Z").value
    boot = (11 * 60 + 17.957) * S
    ev = _ev(
        [
            (0, nr, Event.NOT_RESPONDING, 0),
            (1, nr, Event.NOT_RESPONDING, 0),
            (0, now, Event.NOW_RESPONDING, 0),
            (0, now, Event.STARTUP_FINISHED, int(boot)),
        ]
    )
    last_seen = np.array([now, pd.Timestamp("2018-06-10T12:00Z").value])
    tl = _both(ev, Layers.empty(), 2, t0, t1, last_seen=last_seen)
    b0 = pd.Timestamp("2018-06-13T09:55:51.043Z").value
    assert _pairs(tl, 0) == [(t0, nr, "IDLE"), (nr, b0, "DOWN"), (b0, now, "BOOTING"), (now, t1, "IDLE")]
    assert _pairs(tl, 1) == [(t0, nr, "IDLE"), (nr, t1, "CONNECTION_LOSS")]
    # without the boot the loss stays CONNECTION_LOSS (pass 1 of Fig. 2)
    tl1 = _both(_ev([(0, nr, Event.NOT_RESPONDING, 0), (0, now, Event.NOW_RESPONDING, 0)]), Layers.empty(), 1, t0, t1)
    assert _pairs(tl1) == [(t0, nr, "IDLE"), (nr, now, "CONNECTION_LOSS"), (now, t1, "IDLE")]


def test_worked_example_fixture_file():
    """The transcribed fixture through the task-level classifier gives the expected timeline file."""
    from nodewatch.tasks.states.derive import derive_from_tables
    from nodewatch.tasks.states.events import timeline_table

    raw = pd.read_csv(FIXTURES / "states" / "worked_example_syslog.csv")
    syslog = pa.table(
        {
            "time": pa.array(pd.to_datetime(raw["time"], utc=True).astype("datetime64[ns, UTC]")),
            "node": pa.array(raw["node"], pa.string()),
            "app": pa.array(raw["app"], pa.string()),
            "message": pa.array(raw["message"], pa.string()),
        }
    )
    t0, t1 = pd.Timestamp("2018-06-09", tz="UTC").value, pd.Timestamp("2018-06-14", tz="UTC").value
    b = derive_from_tables(syslog, None, None, ["gr0084", "gr0097"], t0, t1)
    got = timeline_table(b).to_pandas()
    # merge the midnight splits back for comparison with the figure
    exp = pd.read_csv(FIXTURES / "states" / "worked_example_expected.csv")
    rows = []
    for r in got.itertuples():
        if rows and rows[-1][0] == r.node and rows[-1][3] == r.state and rows[-1][2] == r.start and rows[-1][4] == r.evidence:
            rows[-1][2] = r.end
        else:
            rows.append([r.node, r.start, r.end, r.state, r.evidence])
    assert len(rows) == len(exp)
    for g, e in zip(rows, exp.itertuples(), strict=True):
        assert (g[0], g[1], g[2], g[3], g[4]) == (e.node, pd.Timestamp(e.start), pd.Timestamp(e.end), e.state, e.evidence)


def test_priorities_and_overlay():
    """Sec. II-C: ADMIN_RESV/UNSCHEDULED_RESV overlay everything; a job beats RESERVED_IDLE; overlay=False drops them."""
    lay = Layers(
        job_node=np.array([0]),
        job_start=np.array([2 * H]),
        job_end=np.array([6 * H]),
        job_ref=np.array([7]),
        resv_node=np.array([0, 0, 0]),
        resv_start=np.array([0, 4 * H, 10 * H]),
        resv_end=np.array([3 * H, 8 * H, 11 * H]),
        resv_state=np.array([State.RESERVED_IDLE, State.ADMIN_RESV, State.UNSCHEDULED_RESV]),
        resv_ref=np.array([0, 1, 2]),
    )
    ev = _ev([(0, 5 * H, Event.NOT_RESPONDING, 0), (0, 9 * H, Event.NOW_RESPONDING, 0)])
    tl = _both(ev, lay, 1, 0, 12 * H)
    assert _pairs(tl) == [
        (0, 2 * H, "RESERVED_IDLE"),
        (2 * H, 4 * H, "JOB_RUNNING"),
        (4 * H, 8 * H, "ADMIN_RESV"),
        (8 * H, 9 * H, "CONNECTION_LOSS"),
        (9 * H, 10 * H, "IDLE"),
        (10 * H, 11 * H, "UNSCHEDULED_RESV"),
        (11 * H, 12 * H, "IDLE"),
    ]
    assert tl.ref[1] == 7 and tl.source[1] == Source.JOB
    tl0 = _both(ev, lay, 1, 0, 12 * H, overlay=False)
    assert _pairs(tl0) == [
        (0, 2 * H, "RESERVED_IDLE"),
        (2 * H, 5 * H, "JOB_RUNNING"),
        (5 * H, 9 * H, "CONNECTION_LOSS"),
        (9 * H, 12 * H, "IDLE"),
    ]


def test_out_of_order_and_duplicate_events():
    rows = [
        (0, 5 * H, Event.NOW_RESPONDING, 0),
        (0, 1 * H, Event.NOT_RESPONDING, 0),
        (0, 2 * H, Event.NOT_RESPONDING, 0),
        (0, 1 * H, Event.NOT_RESPONDING, 0),
        (0, 5 * H, Event.NOW_RESPONDING, 0),
        (0, 7 * H, Event.NOW_RESPONDING, 0),
    ]
    tl = _both(_ev(rows), Layers.empty(), 1, 0, 10 * H)
    tl_sorted = _both(_ev(sorted(rows, key=lambda r: r[1])), Layers.empty(), 1, 0, 10 * H)
    assert tl.equals(tl_sorted)
    assert _pairs(tl) == [(0, H, "IDLE"), (H, 5 * H, "CONNECTION_LOSS"), (5 * H, 10 * H, "IDLE")]
    assert tl.counts["not_responding_repeats"] == 2
    assert tl.counts["now_responding_without_loss"] == 2


def test_node_that_never_boots_back():
    """Open loss: DOWN if the node is silent afterwards, CONNECTION_LOSS if it keeps logging; a late boot closes it."""
    ev = _ev(
        [
            (0, 2 * H, Event.NOT_RESPONDING, 0),
            (1, 2 * H, Event.NOT_RESPONDING, 0),
            (2, 2 * H, Event.NOT_RESPONDING, 0),
            (2, 6 * H, Event.STARTUP_FINISHED, 600 * S),
        ]
    )
    last_seen = np.array([H, 3 * H, 6 * H])
    tl = _both(ev, Layers.empty(), 3, 0, 10 * H, last_seen=last_seen)
    assert _pairs(tl, 0) == [(0, 2 * H, "IDLE"), (2 * H, 10 * H, "DOWN")]
    assert tl.source[tl.node == 0][1] == Source.LOSS_SILENT
    assert _pairs(tl, 1) == [(0, 2 * H, "IDLE"), (2 * H, 10 * H, "CONNECTION_LOSS")]
    assert _pairs(tl, 2) == [
        (0, 2 * H, "IDLE"),
        (2 * H, 6 * H - 600 * S, "DOWN"),
        (6 * H - 600 * S, 6 * H, "BOOTING"),
        (6 * H, 10 * H, "IDLE"),
    ]
    assert tl.counts["losses_open"] == 2 and tl.counts["losses_down_silent"] == 1


def test_boot_before_slurm_notices_and_kernel_only_boot():
    """A reboot finishing shortly before 'not responding' still makes the loss DOWN; a banner alone is BOOTING."""
    ev = _ev(
        [
            (0, 2 * H, Event.STARTUP_FINISHED, 300 * S),
            (0, 2 * H + 240 * S, Event.NOT_RESPONDING, 0),
            (0, 2 * H + 400 * S, Event.NOW_RESPONDING, 0),
            (1, 4 * H, Event.KERNEL_BOOT, 0),
            (1, 4 * H + 5 * S, Event.KERNEL_BOOT, 0),
            (1, 4 * H + 900 * S, Event.NOW_RESPONDING, 0),
        ]
    )
    tl = _both(ev, Layers.empty(), 2, 0, 10 * H)
    assert [p[2] for p in _pairs(tl, 0)] == ["IDLE", "BOOTING", "IDLE", "DOWN", "IDLE"]
    assert _pairs(tl, 1)[1] == (4 * H, 4 * H + 900 * S, "BOOTING")
    assert tl.counts["boots_kernel_only"] == 1


def test_overlapping_reservations_counted():
    lay = Layers(
        np.zeros(0, np.int64),
        *(np.zeros(0, np.int64),) * 3,
        resv_node=np.array([0, 0]),
        resv_start=np.array([H, 2 * H]),
        resv_end=np.array([4 * H, 3 * H]),
        resv_state=np.array([State.ADMIN_RESV, State.ADMIN_RESV]),
        resv_ref=np.array([0, 1]),
    )
    tl = _both(Events.empty(), lay, 1, 0, 5 * H)
    assert _pairs(tl) == [(0, H, "IDLE"), (H, 4 * H, "ADMIN_RESV"), (4 * H, 5 * H, "IDLE")]
    assert tl.counts["overlapping_reservations"] == 1 and tl.counts["overlapping_jobs"] == 0


def test_overlapping_jobs_counted_apart_from_reservations():
    lay = Layers(
        job_node=np.array([0, 0, 0]),
        job_start=np.array([H, 2 * H, 6 * H]),
        job_end=np.array([3 * H, 4 * H, 7 * H]),
        job_ref=np.array([0, 1, 2]),
        resv_node=np.array([0]),
        resv_start=np.array([0]),
        resv_end=np.array([5 * H]),
        resv_state=np.array([State.RESERVED_IDLE]),
        resv_ref=np.array([0]),
    )
    tl = _both(Events.empty(), lay, 1, 0, 8 * H)
    assert tl.counts["overlapping_jobs"] == 1 and tl.counts["overlapping_reservations"] == 0


def test_loss_table_and_losses_active_at():
    """The unclipped loss table behind derive_states: real ends, the explaining boot, open losses."""
    ev = _ev(
        [
            (0, 2 * H, Event.NOT_RESPONDING, 0),
            (0, 5 * H, Event.STARTUP_FINISHED, 600 * S),
            (0, 5 * H + 60 * S, Event.NOW_RESPONDING, 0),
            (1, 3 * H, Event.NOT_RESPONDING, 0),
        ]
    )
    losses, boots = loss_table(ev, 2, 4 * H)
    assert losses.start.tolist() == [2 * H, 3 * H] and losses.end.tolist() == [5 * H + 60 * S, 4 * H]
    assert losses.open.tolist() == [False, True]
    assert losses.responding.tolist() == [5 * H + 60 * S, -1]
    assert [State(x).name for x in losses.state] == ["DOWN", "DOWN"]
    assert losses.source.tolist() == [Source.LOSS_BOOT, Source.LOSS_SILENT]
    b = losses.boot[0]
    assert boots.start[b] == 5 * H - 600 * S and boots.end[b] == 5 * H and losses.boot[1] == -1
    # in effect at 4 h: both (node 1's loss is open at the end of the data); at 6 h: only the open one
    assert losses_active_at(losses, 4 * H).tolist() == [0, 1]
    assert losses_active_at(losses, 6 * H).tolist() == [1]
    assert losses_active_at(losses, 2 * H).tolist() == []


def _random_case(seed: int, n_nodes: int = 6):
    r = np.random.default_rng(seed)
    n_ev, n_jobs, n_resv = 80, 40, 5
    ev = Events(
        r.integers(0, n_nodes, n_ev),
        r.integers(-H, DAY + H, n_ev) // (60 * S) * 60 * S,
        r.integers(1, 5, n_ev).astype(np.int8),
        r.integers(60, 1200, n_ev) * S,
    )
    js = r.integers(-H, DAY, n_jobs)
    rs = r.integers(0, DAY, n_resv)
    lay = Layers(
        r.integers(0, n_nodes, n_jobs),
        js,
        js + r.integers(60, 20000, n_jobs) * S,
        r.integers(0, 50, n_jobs),
        r.integers(0, n_nodes, n_resv),
        rs,
        rs + r.integers(600, 40000, n_resv) * S,
        r.choice([6, 7, 8], n_resv),
        np.arange(n_resv),
    )
    return ev, lay, n_nodes, 0, DAY, r.integers(0, DAY, n_nodes)


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_equals_reference_random(seed):
    a = _random_case(seed)
    for ov in (True, False):
        v = _both(*a, overlay=ov)
        # timeline tiles the window for every node
        for n in range(a[2]):
            m = v.node == n
            assert v.start[m][0] == 0 and v.end[m][-1] == DAY
            assert np.array_equal(v.start[m][1:], v.end[m][:-1])


def test_to_grid_samples_minute_starts():
    ev = _ev([(0, 90 * S, Event.NOT_RESPONDING, 0), (0, 150 * S, Event.NOW_RESPONDING, 0)])
    tl = derive_states(ev, Layers.empty(), 1, 0, 5 * 60 * S)
    g = to_grid(tl, 1, 0, 5 * 60 * S)
    assert g.tolist() == [[State.IDLE, State.IDLE, State.CONNECTION_LOSS, State.IDLE, State.IDLE]]
    with pytest.raises(ValueError):
        to_grid(tl, 1, 0, 5 * 60 * S + 1)


def test_down_ends_with_boot_and_long_wait_is_connection_loss():
    """After the boot, waiting for 'now responding' beyond the grace is CONNECTION_LOSS; a short wait is dropped."""
    ev = _ev(
        [
            (0, 1 * H, Event.NOT_RESPONDING, 0),
            (0, 3 * H, Event.STARTUP_FINISHED, 600 * S),
            (0, 5 * H, Event.NOW_RESPONDING, 0),
            (1, 1 * H, Event.NOT_RESPONDING, 0),
            (1, 3 * H, Event.STARTUP_FINISHED, 600 * S),
            (1, 3 * H + 30 * S, Event.NOW_RESPONDING, 0),
        ]
    )
    tl = _both(ev, Layers.empty(), 2, 0, 6 * H)
    assert _pairs(tl, 0) == [
        (0, H, "IDLE"),
        (H, 3 * H - 600 * S, "DOWN"),
        (3 * H - 600 * S, 3 * H, "BOOTING"),
        (3 * H, 5 * H, "CONNECTION_LOSS"),
        (5 * H, 6 * H, "IDLE"),
    ]
    assert _pairs(tl, 1) == [
        (0, H, "IDLE"),
        (H, 3 * H - 600 * S, "DOWN"),
        (3 * H - 600 * S, 3 * H, "BOOTING"),
        (3 * H, 6 * H, "IDLE"),
    ]
    assert tl.counts["losses_tail_connection_loss"] == 1
