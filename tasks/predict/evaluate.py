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

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nodewatch.models.predict.ensemble import LeadTimeEnsemble, fit_lstm_voter, unanimous
from nodewatch.models.predict.uc import largest_usable_nodes, rates, uc_from_rates
from nodewatch.tasks.predict.dataset import ANOMALY_KINDS, Sequences, Stacked, combine_machines, hard_strata

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


def gather_rows(sources: list[tuple[Any, np.ndarray | None]]) -> np.ndarray:
    """Rows of several arrays (each with a boolean mask, or ``None`` for all rows) as one new float32 array.

    Written straight into the result (no concatenation of gathered copies): a :class:`~nodewatch.tasks.predict.
    dataset.Stacked` source fills its slice in chunks, an array through one masked read.
    """
    sizes = [len(src) if m is None else int(np.count_nonzero(m)) for src, m in sources]
    tail = next(tuple(src.shape[1:]) for src, _ in sources)
    out = np.empty((sum(sizes),) + tail, np.float32)
    lo = 0
    for (src, m), k in zip(sources, sizes, strict=True):
        if k:
            key = slice(None) if m is None else m
            if isinstance(src, Stacked):
                src.gather(key, out=out[lo : lo + k])
            else:
                out[lo : lo + k] = src[key]
        lo += k
    return out


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
) -> tuple[LeadTimeEnsemble, Any]:
    """Networks on ``1 - voter_share`` of the groups (plus every ``hard`` negative), the LSTM voter on the rest.

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

    def rows(mask: np.ndarray, extra: list[Any]) -> np.ndarray:  # gather without a copy of all of pos + neg
        return gather_rows([(pos.x, mask[:n_pos]), (neg.x, mask[n_pos:])] + [(e, None) for e in extra])

    hx = [hard.x] if hard is not None and len(hard.y) else []
    yt = np.concatenate([y[tr], np.zeros(sum(len(h) for h in hx), np.int64)])
    strata = None
    if stratify:
        st = np.concatenate([np.full(n_pos, -1, np.int64), hard_strata(neg)])
        strata = np.concatenate([st[tr]] + ([hard_strata(hard)] if hx else []))
    ens = LeadTimeEnsemble(epochs=epochs, seed=seed).fit(rows(tr, hx), yt, strata=strata, overwrite_x=True)
    if y[vo].sum() < 2:  # too few failures left for the voter (a small store): score with the unanimous vote
        return ens, None
    lo = ens.predict_logodds(rows(vo, []))
    if not (voter_hard and hx and stratify and len(np.unique(hard.group)) >= 2):
        return ens, fit_lstm_voter(lo, y[vo], target_fpr=voter_target_fpr, epochs=min(epochs, 300), seed=seed,
                                   groups=g[vo])
    # cross-fitted outputs on the hard node-days: an ensemble without half A scores half A, and the other way round
    halves = _split_groups(np.asarray(hard.group), np.random.default_rng(seed + 7919), (0.5, 0.5))[:2]
    hst = hard_strata(hard)
    lo_hard = np.zeros((len(hard.y), lo.shape[1]), np.float32)
    for held, kept in (halves, halves[::-1]):
        e = LeadTimeEnsemble(epochs=epochs, seed=seed).fit(
            rows(tr, [hard.x[kept]]), np.concatenate([y[tr], np.zeros(int(kept.sum()), np.int64)]),
            strata=np.concatenate([st[tr], hst[kept]]), overwrite_x=True)
        lo_hard[held] = e.predict_logodds(hard.x[held])
    voter = fit_lstm_voter(
        np.concatenate([lo, lo_hard]), np.concatenate([y[vo], np.zeros(len(hard.y), np.int64)]),
        target_fpr=voter_target_fpr, epochs=min(epochs, 300), seed=seed,
        groups=np.concatenate([g[vo], np.asarray(hard.group)]), strata=np.concatenate([st[vo], hst]),
        natural=np.r_[np.ones(int(vo.sum()), bool), np.zeros(len(hard.y), bool)])
    return ens, voter


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
    dp, dn = scheme_decisions(ens, voter, pos.x), scheme_decisions(ens, voter, neg.x)  # no copy of both sets
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


def scheme_decisions(ens: LeadTimeEnsemble, voter: Any, x: np.ndarray) -> dict[str, np.ndarray]:
    """Positive predictions of every scheme of :data:`SCHEMES` for sequences ``x``."""
    lo = ens.predict_logodds(x)
    out = {f"unanimous@{k}NN": unanimous(lo, k, threshold=0.0) for k in range(1, 7)}  # p > 0.5 <=> log-odds > 0
    if voter is not None:
        out["lstm@6NN"] = voter.score(lo) >= voter.threshold
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


ROUND_DESIGNS = ("others", "next")
"""Seed-level round designs of :func:`machine_rounds`; the first is the default."""


def machine_rounds(seeds: list[int], design: str = "others", n_test: int = 3) -> list[tuple[tuple[int, ...], int]]:
    """Rounds ``(training seeds, test seed)`` over simulated machines; the test machines are ``seeds[:n_test]``.

    ``"others"`` (leave one machine out): each test machine is scored by a model trained on *all the other*
    ``seeds`` (e.g. seeds 1..5, tests 1, 2, 3: train 2-5 -> test 1, 1,3,4,5 -> 2, 1,2,4,5 -> 3); several machines
    stand in for a site's history. ``"next"`` (issue 18's rounds up to the sixth pass): test machine ``k`` is
    scored by a model of the one test machine before it, cyclically (1 -> 2, 2 -> 3, 3 -> 1). Raises
    ``ValueError`` (one line) for an unknown design, repeated seeds or fewer than 2 test machines.
    """
    if design not in ROUND_DESIGNS:
        raise ValueError(f"round design must be one of {', '.join(ROUND_DESIGNS)}, got {design!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {list(seeds)}")
    tests = list(seeds[:n_test])
    if len(tests) < 2:
        raise ValueError(f"rounds need at least 2 machines to test on, got seeds {list(seeds)} and n_test {n_test}")
    if design == "next":
        return [((a,), tests[(i + 1) % len(tests)]) for i, a in enumerate(tests)]
    return [(tuple(s for s in seeds if s != b), b) for b in tests]


def held_out_rounds(
    data: dict[int, tuple[Sequences, Sequences, Sequences | None]],
    rounds: list[tuple[int | tuple[int, ...], int]],
    epochs: int = 300,
    voter_target_fpr: float = 5e-5,
    stratify: bool = True,
    voter_hard: bool = True,
) -> pd.DataFrame:
    """Monte-Carlo rounds at the seed level: round ``k`` trains on simulator seed(s) ``a`` and tests on seed ``b``.

    ``data[seed] = (failures, ok sequences of random node-days, hard negatives or None)``; ``rounds`` as from
    :func:`machine_rounds` (``a`` one seed or a tuple of seeds, combined by :func:`~nodewatch.tasks.predict.dataset.
    combine_machines` without a copy of their arrays). The networks learn from 75 % of the training groups plus the
    hard negatives, the voter from the other 25 % (threshold on its own validation node-days), and every scheme is
    scored on all of seed ``b``'s failures and random ok node-days (a different simulated machine: no node-day,
    failure or anomaly is shared with training). Same columns as :func:`cross_validate` plus ``train_seed`` (e.g.
    ``"2,3,4,5"``), ``test_seed`` and ``fit_s`` (wall seconds of the whole fit: networks, cross-fits, voter), so
    :func:`fps_table` pools them.
    """
    out = []
    for k, (a, b) in enumerate(rounds):
        train = (a,) if isinstance(a, (int, np.integer)) else tuple(a)
        if b in train:
            raise ValueError(f"round {k}: test seed {b} is among the training seeds {train}")
        pos, neg, hard = data[train[0]] if len(train) == 1 else combine_machines([data[s] for s in train])
        t = time.perf_counter()
        ens, voter = fit_ensemble_and_voter(pos, neg, hard=hard, epochs=epochs, seed=k,
                                            voter_target_fpr=voter_target_fpr, stratify=stratify,
                                            voter_hard=voter_hard)
        fit_s = time.perf_counter() - t
        tp, tn, _ = data[b]
        for r in held_out_rows(ens, voter, tp, tn):
            out.append({"round": k, "train_seed": ",".join(map(str, train)), "test_seed": b, "fit_s": fit_s, **r})
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
