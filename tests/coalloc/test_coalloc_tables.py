"""Table 2.1 / 2.2 of Frank ch. 2 as transcribed, the interference model fitted to them and the twin rule."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.coalloc.frank_tables import APPS, COLUMNS, PAIRS, RANKS, TABLE_2_1, TABLE_2_2
from nodewatch.models.coalloc.interference import (
    InterferenceModel,
    allowed_matrix,
    derived_forbidden_pairs,
    measured_savings,
    measured_slowdown,
    pair_core_hours,
)


def test_transcription_shape() -> None:
    assert set(TABLE_2_1) == set(APPS) and len(PAIRS) == 15 and set(TABLE_2_2) == set(PAIRS)
    for app in APPS:
        for kind in ("runtime", "corehours"):
            assert set(TABLE_2_1[app][kind]) == set(RANKS)
            assert all(len(v) == len(COLUMNS) for v in TABLE_2_1[app][kind].values())


@pytest.mark.parametrize("app", APPS)
def test_table_2_1_core_hours_follow_from_runtimes(app: str) -> None:
    """T = t · c / 3600 with c = ranks (STD, OVR) or ranks / 2 (PCK, COA), within the printed rounding."""
    for n in RANKS:
        for i, col in enumerate(COLUMNS):
            cores = n if col in ("STD", "OVR") else n / 2
            assert TABLE_2_1[app]["runtime"][n][i] * cores / 3600 == pytest.approx(
                TABLE_2_1[app]["corehours"][n][i], abs=0.05 + 1e-9), (app, n, col)


def test_example_from_the_issue() -> None:
    std, _pck, _coa = pair_core_hours("gtc", "amg", 512)
    assert std == pytest.approx(31.6 + 10.9, abs=0.06)  # 42.5 from the rounded cells, 42.6 printed
    assert round(std, 1) == 42.6


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "+".join(p))
def test_table_2_2_recomputed_from_table_2_1_every_cell(pair: tuple[str, str]) -> None:
    """Every (STD, PCK, COA) cell of Table 2.2 = T_P + T_Q of Table 2.1, within the printed rounding (0.05)."""
    for n in RANKS:
        got = pair_core_hours(*pair, n)
        want = TABLE_2_2[pair][n]
        for g, w, name in zip(got, want, ("STD", "PCK", "COA"), strict=True):
            assert g == pytest.approx(w, abs=0.05 + 1e-9), (pair, n, name, g, w)


def test_table_2_2_from_rounded_core_hours_within_two_roundings() -> None:
    c = COLUMNS.index
    worst = 0.0
    for (p, q), rows in TABLE_2_2.items():
        for n, (std, pck, coa) in rows.items():
            ch = TABLE_2_1
            worst = max(worst, abs(ch[p]["corehours"][n][c("STD")] + ch[q]["corehours"][n][c("STD")] - std),
                        abs(ch[p]["corehours"][n][c("PCK")] + ch[q]["corehours"][n][c("PCK")] - pck),
                        abs(ch[p]["corehours"][n][c(q)] + ch[q]["corehours"][n][c(p)] - coa))
    assert worst <= 0.1 + 1e-9


def test_slowdowns_hand_computed() -> None:
    s = measured_slowdown()
    assert s[APPS.index("gtc"), APPS.index("amg"), 0] == pytest.approx(341.8 / 222.3)
    assert s[APPS.index("snap"), APPS.index("ghost"), 3] == pytest.approx(611.8 / 293.5)
    assert (s > 1).all() and (s < 2.8).all()


def test_fig_2_7_pairs_from_the_savings() -> None:
    """Fig. 2.7: all but five pairs save >= 10 %; up to 25 % for amg+milc, amg+ghost, milc+milc."""
    assert derived_forbidden_pairs(0.10) == {("milc", "ghost"), ("milc", "snap"), ("ghost", "ghost"),
                                             ("ghost", "snap"), ("snap", "snap")}
    sav = measured_savings()
    top3 = sorted(sav, key=lambda k: -sav[k].mean())[:3]
    assert set(top3) == {("amg", "milc"), ("amg", "ghost"), ("milc", "milc")}
    assert sav[("ghost", "ghost")][3] < 0  # GHOST+GHOST at 4,096 ranks costs more than STD (Table 2.2)


def test_policies() -> None:
    assert not allowed_matrix("exclusive").any() and allowed_matrix("naive").all()
    nt = allowed_matrix("no_twins")
    assert not nt.diagonal().any() and nt.sum() == 20
    m = allowed_matrix("measured")
    assert (m == m.T).all() and m.sum() == 25 - 2 * 3 - 2  # 3 mixed + 2 twin pairs forbidden
    with pytest.raises(ValueError, match="unknown policy"):
        allowed_matrix("bogus")


def test_fitted_model_errors_and_generalisation() -> None:
    m = InterferenceModel().fit()
    e = m.fit_error_
    assert e.slowdown_in_sample_mean < 0.03 and e.slowdown_loo_mean < 0.06 and e.slowdown_loo_max < 0.25
    i, j = APPS.index("gtc"), APPS.index("amg")
    for k, n in enumerate(RANKS):  # close to the measured points
        assert float(m.slowdown(i, j, n)) == pytest.approx(measured_slowdown()[i, j, k], rel=0.11)
    # unseen rank counts: between the neighbours' fit, clamped outside [512, 4096]
    assert float(m.slowdown(i, j, 100)) == pytest.approx(float(m.slowdown(i, j, 512)))
    assert float(m.slowdown(i, j, 10**6)) == pytest.approx(float(m.slowdown(i, j, 4096)))
    mid = float(m.slowdown(i, j, 1536))
    lo, hi = sorted([float(m.slowdown(i, j, 1024)), float(m.slowdown(i, j, 2048))])
    assert lo <= mid <= hi
    sm = m.slowdown_matrix(np.array([i, i]), np.array([512, 1536]))
    assert sm[0, j] == pytest.approx(341.8 / 222.3) and sm[1, j] == pytest.approx(mid)


def test_unfitted_model_raises() -> None:
    with pytest.raises(RuntimeError, match="not fitted"):
        InterferenceModel().slowdown(0, 1, 512)
