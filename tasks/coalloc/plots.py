"""PNG figures of the co-allocation capability: the pair heat map and the replay efficiencies (Fig. 2.8 style)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from nodewatch.models.coalloc.frank_tables import APPS, RANKS


def _png(fig) -> bytes:  # noqa: ANN001
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def pairs_heatmap(savings: dict[tuple[str, str], np.ndarray], forbidden: set[tuple[str, str]]) -> bytes:
    """Saving of each pair (1 - COA / STD core hours, %) at each rank count; forbidden pairs marked ×."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(RANKS), figsize=(4 * len(RANKS), 3.8), constrained_layout=True)
    grid = np.full((len(RANKS), len(APPS), len(APPS)), np.nan)
    for (p, q), s in savings.items():
        i, j = APPS.index(p), APPS.index(q)
        grid[:, i, j] = grid[:, j, i] = 100 * s
    lim = float(np.nanmax(np.abs(grid)))
    im = None
    for k, (ax, n) in enumerate(zip(axes, RANKS, strict=True)):
        im = ax.imshow(grid[k], cmap="RdYlGn", vmin=-lim, vmax=lim)
        ax.set_xticks(range(len(APPS)), APPS, rotation=45)
        ax.set_yticks(range(len(APPS)), APPS)
        ax.set_title(f"{n} ranks")
        for i, p in enumerate(APPS):
            for j, q in enumerate(APPS):
                bad = (p, q) in forbidden or (q, p) in forbidden
                ax.text(j, i, f"{grid[k, i, j]:.0f}{'×' if bad else ''}", ha="center", va="center", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.8, label="core-hour saving of COA vs STD (%)")
    fig.suptitle("Frank Table 2.2: saving per pair (× = not co-allocated by the derived twin rule)")
    return _png(fig)


def replay_bars(summary: pd.DataFrame, title: str) -> bytes:
    """E_util, E_comp, E_sched per (algorithm, policy) with 95 % CI bars and the thesis values (◆) where quoted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ("e_util", "e_comp", "e_sched")
    labels = [f"{a}\n{p}" for a, p in zip(summary["algorithm"], summary["policy"], strict=True)]
    x = np.arange(len(summary))
    w = 0.27
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(summary)), 4.2))
    for i, m in enumerate(metrics):
        v = 100 * summary[m].to_numpy(float)
        lo = 100 * summary.get(f"{m}_lo", pd.Series(np.nan, index=summary.index)).to_numpy(float)
        hi = 100 * summary.get(f"{m}_hi", pd.Series(np.nan, index=summary.index)).to_numpy(float)
        err = np.where(np.isfinite(lo), np.vstack([v - lo, hi - v]), 0.0)
        ax.bar(x + (i - 1) * w, v, w, yerr=err, capsize=2, label=m.replace("e_", "E_"))
        th = f"thesis_{m}"
        if th in summary.columns:
            t = 100 * summary[th].to_numpy(float)
            ax.plot(x + (i - 1) * w, t, "k" + "sD^"[i], ms=5, ls="none",
                    label=f"thesis {m.replace('e_', 'E_')}" if np.isfinite(t).any() else None)
    ax.axhline(100, color="grey", lw=0.8)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("efficiency (%)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    return _png(fig)
