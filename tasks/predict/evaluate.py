"""Monte-Carlo cross-validation of the lead-time ensemble and the FPS table (Frank sec. 4.3, Table 4.1 c/d).

Each of ``splits`` rounds draws a random split *by group* (a failure event, or an ok node-day, never cut
in two): 50 % of the groups train the six networks, 25 % train the LSTM voter (its own 60/40 split picks
its threshold, sec. 4.3), 25 % are the test set on which every scheme is scored.

Training positives are the failures *with a precursor* only (``train_positives="precursor"``, the default):
the thesis mines a failure event only where an anomaly precedes the failure (sec. 4.2.2), and a failure
without a precursor is, in its windows, an ok sequence with the label "failure". Measured on the 1000-node
60-day simulator (train seed 1, test seed 2): training on all failures gave 1NN fpr 1.2e-3 and 6NN 1.1e-4,
training on precursor failures 4.6e-4 and 0 at the same recall (0.75 / 0.65 of precursor failures). The test
split still holds every failure: tpr is reported over all failures and over precursor failures. The table reports the
mean over rounds of tpr / fpr / ppv and UC(1024) (eq. 4.4 with P(E) of the simulated data) beside the
thesis's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nodewatch.models.predict.ensemble import LeadTimeEnsemble, fit_lstm_voter, history_index, unanimous, voter_sequences
from nodewatch.models.predict.uc import largest_usable_nodes, rates, uc_from_rates
from nodewatch.tasks.predict.dataset import ANOMALY_KINDS, Sequences, hard_strata

THESIS_ROWS = [
    {"scheme": "unanimous@1NN", "tpr": 0.8461, "ppv": 0.9655, "fpr": 0.00292, "uc_1024": 0.9498},
    {"scheme": "unanimous@2NN", "tpr": 0.7795, "ppv": 0.9884, "fpr": 0.00088, "uc_1024": 0.5945},
    {"scheme": "unanimous@4NN", "tpr": 0.7302, "ppv": 0.9944, "fpr": 0.00040, "uc_1024": 0.3361},
    {"scheme": "unanimous@6NN", "tpr": 0.6918, "ppv": 0.9970, "fpr": 0.00020, "uc_1024": 0.1852},
    {"scheme": "lstm@6NN", "tpr": 0.7448, "ppv": 0.9992, "fpr": 0.00004, "uc_1024": 0.0417},
]
"""Frank Table 4.1 c) and d) (MOGON I)."""
SCHEMES = tuple(f"unanimous@{k}NN" for k in range(1, 7)) + ("lstm@6NN",)
"""1 to 6 networks with a unanimous vote (Table 4.1 c prints 1, 2, 4, 6), and the LSTM voter (Table 4.1 d)."""


VOTER_STEPS = 8
"""Successive prediction steps the LSTM voter reads. The thesis does not say how many: chosen among 1, 2, 4, 8 on
development seeds 4 and 5 only (rounds 4 -> 5, 5 -> 4; never on the evaluation seeds 1-3), docs/predict.md, sixth pass."""
VOTER_STRIDE_S = 60.0
"""Seconds between them: the thesis starts a classification sequence every 15 s, "modified to how far apart final
predictions should be" (sec. 4.2.3); our ok training data hold every 4th 15-s step, so 60 s."""


@dataclass
class FoldResult:
    """Rates of every scheme on one test split."""

    rows: list[dict[str, Any]]


def _split_groups(groups: np.ndarray, rng: np.random.Generator, shares: tuple[float, float]) -> tuple[np.ndarray, ...]:
    u = np.unique(groups)
    perm = rng.permutation(u)
    a, b = int(shares[0] * len(u)), int((shares[0] + shares[1]) * len(u))
    parts = (perm[:a], perm[a:b], perm[b:])
    return tuple(np.isin(groups, p) for p in parts)


def training_mask(y: np.ndarray, has_precursor: np.ndarray, train_positives: str = "precursor") -> np.ndarray:
    """Sequences the networks may learn from: every ok sequence, and the failures with a precursor (or all)."""
    if train_positives not in ("precursor", "all"):
        raise ValueError(f"train_positives must be 'precursor' or 'all', got {train_positives!r}")
    if train_positives == "all":
        return np.ones(len(y), bool)
    return (np.asarray(y) == 0) | np.asarray(has_precursor, bool)


def fit_ensemble_and_voter(
    pos: Sequences,
    neg: Sequences,
    hard: Sequences | None = None,
    epochs: int = 300,
    seed: int = 0,
    voter_share: float = 0.25,
    voter_target_fpr: float = 5e-5,
    train_positives: str = "precursor",
    stratify: bool = True,
    voter_hard: bool = True,
    voter_steps: int | tuple[int, ...] = VOTER_STEPS,
    voter_stride_s: float = VOTER_STRIDE_S,
) -> tuple[LeadTimeEnsemble, Any]:
    """Networks on ``1 - voter_share`` of the groups (plus every ``hard`` negative), the LSTM voter on the rest.

    ``voter_steps`` K > 0 (and failures carrying their earlier steps, :attr:`~nodewatch.tasks.predict.dataset.
    Sequences.x_prev`, ``voter_stride_s`` apart): the voter reads the six networks' outputs at K successive prediction
    steps (Fig. 4.5, :func:`voter_inputs_of`); a tuple of candidates trains one voter per K on the same outputs and
    keeps the one with the highest recall on its own validation split (training data only; ties: the smaller K).
    ``voter_steps=0``, or failures without earlier steps (a store): the six outputs of one prediction as a 6-step
    sequence (the voter before issue 18's sixth pass).

    ``stratify``: each epoch's negatives are half drawn equally from the (anomaly kind x node load) strata of the
    training negatives (:func:`~nodewatch.tasks.predict.dataset.hard_strata`,
    :func:`~nodewatch.models.predict.ensemble.epoch_negatives`), half uniformly from the rest.

    The voter's groups are split again 60/40 by group: it learns on 60 % and its threshold is the lowest with
    ``fpr <= voter_target_fpr`` on the other 40 % (:func:`~nodewatch.models.predict.ensemble.fit_lstm_voter`).
    Hard negatives (node-days drawn because they hold a non-failing anomaly, :func:`~nodewatch.tasks.predict.
    dataset.anomaly_node_days`) all train the networks and are never in a validation or test rate (over-represented:
    a rate on them is not the machine's). ``voter_hard`` (default): the voter also learns from them, on *held-out*
    outputs: two more ensembles, each trained like the first but with half of the hard node-days, score the other
    half (cross-fitting), and the voter's loss weighs them like the networks' stratified epoch sample
    (:func:`~nodewatch.models.predict.ensemble.stratified_weights`); its threshold is still set on the random
    validation node-days only. ``voter_hard=False``: the voter never sees a hard negative (before issue 18's fifth
    pass). Returns ``(ensemble, voter)``; the voter is ``None`` with fewer than 2 failures for it.
    """
    y = np.concatenate([pos.y, neg.y])
    g = np.concatenate([pos.group, neg.group])
    use = training_mask(y, np.concatenate([pos.has_precursor, neg.has_precursor]), train_positives)
    tr, vo, _ = _split_groups(g, np.random.default_rng(seed), (1.0 - voter_share, voter_share))
    tr, vo = tr & use, vo & use
    n_pos = len(pos.y)

    def rows(mask: np.ndarray, extra: list[np.ndarray]) -> np.ndarray:  # gather without a copy of all of pos + neg
        return np.concatenate([pos.x[mask[:n_pos]], neg.x[mask[n_pos:]], *extra]).astype(np.float32, copy=False)

    hx = [hard.x] if hard is not None and len(hard.y) else []
    yt = np.concatenate([y[tr], np.zeros(sum(len(h) for h in hx), np.int64)])
    strata = None
    if stratify:
        st = np.concatenate([np.full(n_pos, -1, np.int64), hard_strata(neg)])
        strata = np.concatenate([st[tr]] + ([hard_strata(hard)] if hx else []))
    ens = LeadTimeEnsemble(epochs=epochs, seed=seed).fit(rows(tr, hx), yt, strata=strata)
    if y[vo].sum() < 2:  # too few failures left for the voter (a small store): score with the unanimous vote
        return ens, None
    cands = tuple(voter_steps) if isinstance(voter_steps, tuple | list) else (int(voter_steps),)
    kmax = max(cands)
    if kmax > 1 and not (pos.x_prev is not None and pos.x_prev.shape[1] >= kmax - 1
                         and pos.prev_stride_s == voter_stride_s):
        cands = (0,)  # no earlier steps of the failures: the old voter
    t = np.concatenate([pos.time_s, neg.time_s])
    lo = ens.predict_logodds(rows(vo, []))

    def seqs(k: int, lo_v: np.ndarray, lo_h: np.ndarray | None) -> np.ndarray:
        if k == 0:
            return lo_v if lo_h is None else np.concatenate([lo_v, lo_h])
        vp = vo[:n_pos]
        prev = np.full((len(lo_v), k - 1, lo_v.shape[1]), np.nan, np.float32)
        if k > 1 and vp.any():
            prev[: int(vp.sum())] = prev_logodds(ens, pos.x_prev[vp], k)
        out = voter_sequences(lo_v, history_index(g[vo], t[vo], k, voter_stride_s), prev)
        if lo_h is None:
            return out
        return np.concatenate([out, voter_sequences(lo_h, history_index(hard.group, hard.time_s, k, voter_stride_s))])

    def best(fits: list[Any]) -> Any:
        b = max(fits, key=lambda f: (f.val_tpr, -f.steps))
        b.selection = {int(f.steps): float(f.val_tpr) for f in fits} if len(fits) > 1 else {}
        b.candidates = list(fits) if len(fits) > 1 else []
        return b

    if not (voter_hard and hx and stratify and len(np.unique(hard.group)) >= 2):
        return ens, best([fit_lstm_voter(seqs(k, lo, None), y[vo], target_fpr=voter_target_fpr,
                                         epochs=min(epochs, 300), seed=seed, groups=g[vo], stride_s=voter_stride_s)
                          for k in cands])
    # cross-fitted outputs on the hard node-days: an ensemble without half A scores half A, and the other way round
    halves = _split_groups(np.asarray(hard.group), np.random.default_rng(seed + 7919), (0.5, 0.5))[:2]
    hst = hard_strata(hard)
    lo_hard = np.zeros((len(hard.y), lo.shape[1]), np.float32)
    for held, kept in (halves, halves[::-1]):
        e = LeadTimeEnsemble(epochs=epochs, seed=seed).fit(
            rows(tr, [hard.x[kept]]), np.concatenate([y[tr], np.zeros(int(kept.sum()), np.int64)]),
            strata=np.concatenate([st[tr], hst[kept]]))
        lo_hard[held] = e.predict_logodds(hard.x[held])
    fits = [fit_lstm_voter(
        seqs(k, lo, lo_hard), np.concatenate([y[vo], np.zeros(len(hard.y), np.int64)]),
        target_fpr=voter_target_fpr, epochs=min(epochs, 300), seed=seed,
        groups=np.concatenate([g[vo], np.asarray(hard.group)]), strata=np.concatenate([st[vo], hst]),
        natural=np.r_[np.ones(int(vo.sum()), bool), np.zeros(len(hard.y), bool)], stride_s=voter_stride_s)
        for k in cands]
    return ens, best(fits)


def prev_logodds(ens: LeadTimeEnsemble, x_prev: np.ndarray, steps: int) -> np.ndarray:
    """The networks' log-odds at the ``steps - 1`` prediction steps before each failure: (n, K - 1, L), oldest first.

    ``x_prev`` (n, B, L, F) newest first (:attr:`~nodewatch.tasks.predict.dataset.Sequences.x_prev`); a step whose
    windows hold a NaN is absent (NaN), as an ok sequence with a gap is not in the data set.
    """
    xp = np.asarray(x_prev[:, : steps - 1], np.float32)
    n, b = xp.shape[:2]
    if n == 0 or b == 0:
        return np.zeros((n, b, xp.shape[2] if xp.ndim == 4 else 0), np.float32)
    lo = ens.predict_logodds(xp.reshape(n * b, *xp.shape[2:])).reshape(n, b, -1)
    lo[np.isnan(xp).any(axis=(2, 3))] = np.nan
    return lo[:, ::-1]


def voter_inputs_of(ens: LeadTimeEnsemble, voter: Any, seq: Sequences, lo: np.ndarray) -> np.ndarray:
    """What ``voter`` reads for the sequences ``seq`` whose network log-odds are ``lo`` (N, L).

    A voter of K steps (Fig. 4.5) reads the outputs at K successive predictions: earlier rows of the same node-day
    (:func:`~nodewatch.models.predict.ensemble.history_index`) and, for failures, their earlier steps
    (:attr:`~nodewatch.tasks.predict.dataset.Sequences.x_prev`).
    """
    k = int(getattr(voter, "steps", 0))
    if not k:
        return lo
    prev = None
    if k > 1 and len(seq.y) and (seq.y == 1).any():
        if seq.x_prev is None or seq.x_prev.shape[1] < k - 1 or seq.prev_stride_s != voter.stride_s:
            raise ValueError(f"the voter reads {k} prediction steps {voter.stride_s:g} s apart: the failures need "
                             f"their earlier steps (x_prev at that stride)")
        prev = prev_logodds(ens, seq.x_prev, k)
    return voter_sequences(lo, history_index(seq.group, seq.time_s, k, voter.stride_s), prev)


def held_out_rows(ens: LeadTimeEnsemble, voter: Any, pos: Sequences, neg: Sequences) -> list[dict[str, Any]]:
    """Every scheme's confusion counts and rates on a held-out data set (e.g. another simulator seed).

    Besides the rates, each row says how many ok node-days hold a false positive and how many false positives fall
    on sequences with a non-failing anomaly (``fp_anomaly``), the quantities that make fpr unstable.
    """
    y = np.concatenate([pos.y, neg.y])
    pre = np.concatenate([pos.has_precursor, neg.has_precursor])
    g = np.concatenate([pos.group, neg.group])
    neg_an = neg.anomaly if neg.anomaly is not None else np.zeros(len(neg.y), np.int8)
    an = np.concatenate([np.zeros(len(pos.y), np.int8), neg_an])
    dp, dn = scheme_decisions(ens, voter, pos), scheme_decisions(ens, voter, neg)  # no copy of both sets
    dec = {k: np.concatenate([dp[k], dn[k]]) for k in dp}
    rows = _rows(dec, y, pre)
    for r in rows:
        d = dec[r["scheme"]] & (y == 0)
        r["fp_node_days"] = int(len(np.unique(g[d])))
        r["fp_anomaly"] = int((d & (an > 0)).sum())
        kinds = np.bincount(an[d], minlength=len(ANOMALY_KINDS) + 1)
        r["fp_by_kind"] = ", ".join(f"{k} {int(c)}" for k, c in zip(("none",) + ANOMALY_KINDS, kinds, strict=True) if c)
        r["ok_node_days"] = int(len(np.unique(g[y == 0])))
    return rows


def scheme_decisions(ens: LeadTimeEnsemble, voter: Any, x: np.ndarray | Sequences) -> dict[str, np.ndarray]:
    """Positive predictions of every scheme of :data:`SCHEMES` for sequences ``x`` (inputs, or :class:`Sequences`:
    a voter of K prediction steps needs their groups and times, :func:`voter_inputs_of`)."""
    seq = x if isinstance(x, Sequences) else None
    lo = ens.predict_logodds(seq.x if seq is not None else x)
    out = {f"unanimous@{k}NN": unanimous(lo, k, threshold=0.0) for k in range(1, 7)}  # p > 0.5 <=> log-odds > 0
    if voter is not None:
        if getattr(voter, "steps", 0) and seq is None:
            raise ValueError("a voter of successive prediction steps needs the sequences' groups and times")
        out["lstm@6NN"] = voter.score(lo if seq is None else voter_inputs_of(ens, voter, seq, lo)) >= voter.threshold
    return out


def _rows(dec: dict[str, np.ndarray], y: np.ndarray, pre: np.ndarray) -> list[dict[str, Any]]:
    rows = []
    for name, d in dec.items():
        tp, fn = int((d & (y == 1)).sum()), int((~d & (y == 1)).sum())
        fp, tn = int((d & (y == 0)).sum()), int((~d & (y == 0)).sum())
        r = rates(tp, fp, tn, fn)
        mp = (y == 1) & pre
        tpr_pre = float(d[mp].mean()) if mp.any() else float("nan")
        rows.append({"scheme": name, "tp": tp, "fn": fn, "fp": fp, "tn": tn, "tpr": r.tpr, "tpr_precursor": tpr_pre,
                     "tp_precursor": int((d & mp).sum()), "precursor_failures": int(mp.sum()),
                     "fpr": r.fpr, "ppv": r.ppv})
    return rows


def cross_validate(
    pos: Sequences,
    neg: Sequences,
    splits: int = 5,
    seed: int = 0,
    epochs: int = 300,
    voter_target_fpr: float = 5e-5,
    train_positives: str = "precursor",
    hard: Sequences | None = None,
    stratify: bool = True,
) -> pd.DataFrame:
    """Monte-Carlo cross-validation: per round and scheme, the confusion counts and rates on the test split.

    ``train_positives``: ``"precursor"`` (networks and voter learn from failures with a precursor only) or ``"all"``.
    ``hard`` negatives join every round's network training set (never the voter's or the test split); ``stratify``
    as in :func:`fit_ensemble_and_voter`.
    """
    x = np.concatenate([pos.x, neg.x]).astype(np.float32)
    y = np.concatenate([pos.y, neg.y])
    g = np.concatenate([pos.group, neg.group])
    pre = np.concatenate([pos.has_precursor, neg.has_precursor])
    usable = training_mask(y, pre, train_positives)
    st = np.concatenate([np.full(len(pos.y), -1, np.int64), hard_strata(neg)]) if stratify else None
    hst = hard_strata(hard) if stratify and hard is not None and len(hard.y) else None
    rng = np.random.default_rng(seed)
    out = []
    for k in range(splits):
        tr, vo, te = _split_groups(g, rng, (0.5, 0.25))
        tr, vo = tr & usable, vo & usable
        if hard is not None and len(hard.y):
            xt = np.concatenate([x[tr], hard.x.astype(np.float32)])
            ens = LeadTimeEnsemble(epochs=epochs, seed=seed + k).fit(
                xt, np.r_[y[tr], np.zeros(len(hard.y), np.int64)], strata=None if st is None else np.r_[st[tr], hst])
            del xt
        else:
            ens = LeadTimeEnsemble(epochs=epochs, seed=seed + k).fit(x[tr], y[tr], strata=None if st is None else st[tr])
        voter = fit_lstm_voter(ens.predict_logodds(x[vo]), y[vo], target_fpr=voter_target_fpr, epochs=min(epochs, 300),
                               seed=seed + k, groups=g[vo])
        for r in _rows(scheme_decisions(ens, voter, x[te]), y[te], pre[te]):
            out.append({"round": k, **r})
    return pd.DataFrame(out)


def held_out_rounds(
    data: dict[int, tuple[Sequences, Sequences, Sequences | None]],
    rounds: list[tuple[int, int]],
    epochs: int = 300,
    voter_target_fpr: float = 5e-5,
    stratify: bool = True,
    voter_hard: bool = True,
    voter_steps: int | tuple[int, ...] = VOTER_STEPS,
    voter_stride_s: float = VOTER_STRIDE_S,
) -> pd.DataFrame:
    """Monte-Carlo rounds at the seed level: round ``k`` trains on simulator seed ``a`` and tests on seed ``b``.

    ``data[seed] = (failures, ok sequences of random node-days, hard negatives or None)``. The networks learn from
    75 % of seed ``a``'s groups plus its hard negatives, the voter from the other 25 % (threshold on its own
    validation node-days), and every scheme is scored on all of seed ``b``'s failures and random ok node-days (a
    different simulated machine: no node-day, failure or anomaly is shared with training). Same columns as
    :func:`cross_validate` plus the seeds, so :func:`fps_table` pools them.
    """
    out = []
    for k, (a, b) in enumerate(rounds):
        pos, neg, hard = data[a]
        ens, voter = fit_ensemble_and_voter(pos, neg, hard=hard, epochs=epochs, seed=k,
                                            voter_target_fpr=voter_target_fpr, stratify=stratify,
                                            voter_hard=voter_hard, voter_steps=voter_steps,
                                            voter_stride_s=voter_stride_s)
        tp, tn, _ = data[b]
        rows = held_out_rows(ens, voter, tp, tn)
        for c in getattr(voter, "candidates", []):  # development: every candidate K on the test machine
            rows += [{**r, "scheme": f"lstm@6NN K={c.steps}"} for r in held_out_rows(ens, c, tp, tn)
                     if r["scheme"] == "lstm@6NN"]
        for r in rows:
            out.append({"round": k, "train_seed": a, "test_seed": b, "voter_steps": getattr(voter, "steps", None),
                        "voter_val_tpr": getattr(voter, "val_tpr", None),
                        "voter_selection": str(getattr(voter, "selection", "")), **r})
    return pd.DataFrame(out)


def fps_table(cv: pd.DataFrame, p_e: float, nodes: int = 1024) -> pd.DataFrame:
    """Table 4.1 c/d for our predictor (pooled counts over the rounds) beside the thesis's rows.

    Two recalls per row: ``tpr`` over every failure of the test data and ``tpr_precursor`` over the failures with a
    precursor, both pooled over the rounds. Frank's tpr counts only its *failure events*, "hardware anomalies that
    are followed by an application failure" (sec. 4.2.1; failed jobs without such anomalies were filtered out,
    sec. 4.2.2), i.e. failures with a precursor: its rows carry that value as ``tpr_precursor`` (and as ``tpr``, the
    only recall it has; ``tpr_all_failures_known`` False says it is not over all failures).
    """
    rows = []
    for name in SCHEMES:
        g = cv[cv["scheme"] == name]
        if g.empty:
            continue
        tp, fn, fp, tn = (int(g[c].sum()) for c in ("tp", "fn", "fp", "tn"))
        r = rates(tp, fp, tn, fn)
        if "precursor_failures" in g and g["precursor_failures"].notna().all() and g["precursor_failures"].sum() > 0:
            tpr_pre = float(g["tp_precursor"].sum() / g["precursor_failures"].sum())  # pooled like tpr
        else:  # rounds stored before the counts were (mean of the rounds' rates)
            tpr_pre = float(np.nanmean(g["tpr_precursor"]))
        rows.append(
            {
                "scheme": name,
                "source": "nodewatch (simulator)",
                "tpr": r.tpr,
                "tpr_precursor": tpr_pre,
                "tpr_sd": float(g["tpr"].std(ddof=1)) if len(g) > 1 else float("nan"),
                "ppv": r.ppv,
                "fpr": r.fpr,
                "fpr_sd": float(g["fpr"].std(ddof=1)) if len(g) > 1 else float("nan"),
                "fpr_min": float(g["fpr"].min()),
                "fpr_max": float(g["fpr"].max()),
                "fp": fp,
                "negatives": fp + tn,
                f"uc_{nodes}": float(uc_from_rates(r.fpr, nodes, p_e)),
                "largest_n_uc_below_5pct": largest_usable_nodes(r.fpr, p_e=p_e),
            }
        )
    for t in THESIS_ROWS:  # its failure events all have a hardware anomaly before them: tpr_precursor = its tpr
        rows.append({"scheme": t["scheme"], "source": "Frank Table 4.1 (MOGON I)", "tpr": t["tpr"],
                     "tpr_precursor": t["tpr"], "tpr_all_failures_known": False, "ppv": t["ppv"],
                     "fpr": t["fpr"], f"uc_{nodes}": t["uc_1024"],
                     "largest_n_uc_below_5pct": largest_usable_nodes(t["fpr"])})
    return pd.DataFrame(rows)
