"""Usability report of the registered predictor (Frank sec. 4.1.4, 4.3.1, Fig. 4.12).

For each voting scheme: the rates of its FPS row, ``UC`` (eq. 4.4) at the site's node count, and the
largest machine on which ``UC`` stays below the 5 % criterion (also as a power of two, the
allocation sizes of Fig. 4.12), beside the thesis's rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nodewatch.models.predict.uc import P_E_MOGON, largest_usable_nodes, uc_from_rates
from nodewatch.tasks.core.escape import md


def usability(params: dict[str, Any], site_nodes: int, limit: float = 0.05) -> pd.DataFrame:
    """One row per scheme of the run's FPS table: UC at ``site_nodes`` and the largest n with UC < ``limit``."""
    rows = []
    for r in params.get("fps", []):
        fpr = r.get("fpr")
        if fpr is None or not np.isfinite(fpr):
            continue
        ours = str(r.get("source", "")).startswith("nodewatch")
        p_e = float(params.get("p_e", P_E_MOGON)) if ours else P_E_MOGON
        rows.append(
            {
                "scheme": r["scheme"],
                "source": r["source"],
                "tpr": None if r.get("tpr_all_failures_known") is False else r.get("tpr"),
                "tpr_precursor": r.get("tpr_precursor"),
                "fpr": fpr,
                "uc_site": float(uc_from_rates(fpr, site_nodes, p_e)),
                "largest_n": largest_usable_nodes(fpr, limit, p_e),
                "largest_pow2": largest_usable_nodes(fpr, limit, p_e, powers_of_two=True),
                "usable_at_site": bool(float(uc_from_rates(fpr, site_nodes, p_e)) < limit),
            }
        )
    return pd.DataFrame(rows)


def usability_markdown(df: pd.DataFrame, site_nodes: int, limit: float = 0.05) -> str:
    """Markdown of :func:`usability` (scheme names escaped: they come from a stored file)."""
    lines = [
        f"| scheme | source | tpr (all failures) | tpr (failures with a precursor) | fpr | UC({site_nodes:,}) | "
        f"largest n with UC < {limit:.0%} | as power of two | usable here |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def rate(v: Any) -> str:
        return "NA" if v is None or not np.isfinite(float(v)) else f"{float(v):.4f}"

    for r in df.to_dict(orient="records"):
        lines.append(
            f"| {md(r['scheme'])} | {md(r['source'])} | {rate(r['tpr'])} | {rate(r.get('tpr_precursor'))} | {r['fpr']:.2e} | "
            f"{r['uc_site']:.4f} | {r['largest_n']:,} | {r['largest_pow2']:,} | {'yes' if r['usable_at_site'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"
