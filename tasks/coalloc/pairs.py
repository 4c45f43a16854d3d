"""The pair table of ``nodewatch coalloc pairs``: Table 2.2 recomputed, slowdowns, the fitted model, the twin rules."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from nodewatch.models.coalloc.frank_tables import APPS, PAIRS, RANKS
from nodewatch.models.coalloc.interference import (
    InterferenceModel,
    derived_forbidden_pairs,
    measured_slowdown,
    pair_core_hours,
)


def pairs_table(min_saving: float = 0.10, extra_ranks: Sequence[int] = ()) -> pd.DataFrame:
    """One row per unordered pair and rank count.

    Measured rank counts (``source = table``) carry Table 2.2's STD/PCK/COA core hours recomputed from
    Table 2.1 and the measured slowdowns; ``extra_ranks`` rows (``source = fit``) carry the log-linear
    model's slowdowns and the saving it implies (STD runtimes from the fit too). ``allowed_no_twins`` is
    the thesis heuristic, ``allowed_measured`` the rule derived from the savings at ``min_saving``.
    """
    model = InterferenceModel().fit()
    meas = measured_slowdown()
    forbidden = derived_forbidden_pairs(min_saving)
    rows = []
    for p, q in PAIRS:
        i, j = APPS.index(p), APPS.index(q)
        base = {"app": p, "partner": q, "allowed_no_twins": p != q, "allowed_measured": (p, q) not in forbidden}
        for k, n in enumerate(RANKS):
            std, pck, coa = pair_core_hours(p, q, n)
            rows.append({**base, "ranks": n, "source": "table", "std_core_h": std, "pck_core_h": pck, "coa_core_h": coa,
                         "slowdown_app": meas[i, j, k], "slowdown_partner": meas[j, i, k], "saving": 1 - coa / std})
        for n in extra_ranks:
            sp, sq = float(model.slowdown(i, j, n)), float(model.slowdown(j, i, n))
            tp, tq = float(model.std_runtime(i, n)), float(model.std_runtime(j, n))
            std = (tp + tq) * n / 3600
            coa = (tp * sp + tq * sq) * (n / 2) / 3600
            rows.append({**base, "ranks": int(n), "source": "fit", "std_core_h": std, "pck_core_h": np.nan,
                         "coa_core_h": coa, "slowdown_app": sp, "slowdown_partner": sq, "saving": 1 - coa / std})
    return pd.DataFrame(rows)


def fit_summary() -> dict[str, float | str]:
    """The model's form and its errors (for the CLI and the docs)."""
    e = InterferenceModel().fit().fit_error_
    assert e is not None
    return {"form": "ln s_P|Q(n) = a + b log2(n/512), least squares per ordered pair; n clamped to [512, 4096]",
            **{k: float(v) for k, v in e.__dict__.items()}}
