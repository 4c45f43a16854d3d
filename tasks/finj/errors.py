"""Where a fault classifier's errors are, on one campaign (``python -m nodewatch.tasks.finj.errors CAMPAIGN``).

The evaluation of ``nodewatch finj train`` (RF, *mode* labels, 5 time-ordered folds, one random core per
window; Netti et al. Sec. 7) taken apart: the confusion matrix; per fold the windows, the fault instances it
holds and how many instances of the same kind the other four folds give the model to learn from; the errors
by window position (inside a fault, at a fault's start or end = ambiguous, healthy, healthy just after a
fault) and per true class; the predictions per fault instance; the application running in healthy windows
taken for a fault and the features that pulled them (largest deviation among the fold model's 50 most
important features, z-scores against the training folds' healthy-labelled windows); a learning curve (each
time-ordered fold tested by models trained on 1..4 of the other folds: how the score grows with the fault
instances seen). ``--without pagefail,ioerr`` drops every window overlapping an instance of those faults
first. Prints markdown; docs/finj.md quotes its output for campaign 2.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nodewatch.models.finj.classify import folds, fscores, make, one_core_per_window
from nodewatch.models.finj.features import WINDOW
from nodewatch.tasks.finj.dataset import CLASSES, Dataset, build, without_faults


@dataclass(frozen=True)
class Instance:
    """One task run of a campaign (``events.csv`` start/end pair)."""

    seq: str
    program: str
    is_fault: bool
    low: bool
    start: float
    end: float


def instances(campaign: Path) -> list[Instance]:
    """Every started task with its start and end (epoch seconds) from ``events.csv`` (a regular file; rows
    without the fields are skipped)."""
    import os

    from nodewatch.tasks.core.files import open_regular

    started: dict[str, dict[str, str]] = {}
    out = []
    with os.fdopen(open_regular(campaign / "events.csv"), "rb") as fh:
        for ev in csv.DictReader(line.decode("utf-8", "replace") for line in fh):
            try:
                if ev.get("event") == "start":
                    started[ev["seq"]] = ev
                elif ev.get("event") in ("end", "stopped") and ev.get("seq") in started:
                    s = started.pop(ev["seq"])
                    fault, low = s["is_fault"] == "True", s["low"] == "True"
                    out.append(Instance(s["seq"], s["program"], fault, low, float(s["time"]), float(ev["time"])))
            except (KeyError, TypeError, ValueError):
                continue
    return out


def _rows(f: Instance) -> tuple[float, float]:
    """First and last second (epoch) the fault labels, as ``dataset.per_second_state`` does (``ceil`` of its times)."""
    return float(np.ceil(f.start)), float(np.ceil(f.end)) - 1


def positions(ends: np.ndarray, faults: Sequence[Instance], window: int = WINDOW) -> np.ndarray:
    """Per window: ``inside`` (every second in one fault), ``boundary`` (a fault starts or ends inside it),
    ``after`` (healthy, a fault's last second within ``window`` s before it), ``healthy`` (no fault near it)."""
    first = ends - (window - 1)
    pos = np.full(ends.size, "healthy", dtype=object)
    for f in faults:
        a, b = _rows(f)
        after = (first > b) & (first - b <= window)
        pos[after & (pos == "healthy")] = "after"
    for f in faults:
        a, b = _rows(f)
        overlap = (first <= b) & (ends >= a)
        inside = (first >= a) & (ends <= b)
        pos[overlap & ~inside] = "boundary"
        pos[inside] = "inside"
    return pos


def application(ends: np.ndarray, apps: Sequence[Instance], window: int = WINDOW) -> np.ndarray:
    """The application covering most of each window (``none`` if no application runs in it)."""
    best = np.zeros(ends.size)
    name = np.full(ends.size, "none", dtype=object)
    first = ends - (window - 1)
    for a in apps:
        cover = np.clip(np.minimum(ends + 1, a.end) - np.maximum(first, a.start), 0, None)
        better = cover > best
        best[better], name[better] = cover[better], a.program
    return name


def fault_seconds(ends: np.ndarray, faults: Sequence[Instance], window: int = WINDOW) -> np.ndarray:
    """Seconds of each window covered by a fault."""
    first = ends - (window - 1)
    cover = np.zeros(ends.size)
    for f in faults:
        a, b = _rows(f)
        cover += np.clip(np.minimum(ends, b) - np.maximum(first, a) + 1, 0, None)
    return cover


def _q(v: np.ndarray) -> str:
    if v.size == 0:
        return "-"
    a, b, c = np.percentile(v, [25, 50, 75])
    return f"{b:.0f} s ({a:.0f}-{c:.0f})"


def _z(z: float) -> str:
    return f"{z:+.1f}" if abs(z) < 100 else (">+99" if z > 0 else "<-99")


def analyse(ds: Dataset, insts: Sequence[Instance], seed: int = 0, k: int = 5, model: str = "rf") -> str:
    """The markdown report (see module doc) of ``model`` with mode labels and time-ordered folds."""
    core = one_core_per_window(len(ds.ends), ds.features.shape[1], seed)
    x, y = ds.features[np.arange(len(ds.ends)), core], ds.mode
    faults = [i for i in insts if i.is_fault]
    pos = positions(ds.ends, faults)
    app = application(ds.ends, [i for i in insts if not i.is_fault])
    pred = np.empty_like(y)
    pulls: list[tuple[int, str, str, float]] = []  # (window, predicted class, feature, z)
    fold_rows = []
    present = sorted(set(y.tolist()))
    for fi, (tr, te) in enumerate(folds(len(y), k)):
        m = make(model, seed).fit(x[tr], y[tr])
        pred[te] = m.predict(x[te])
        lo, hi = ds.ends[te[0]] - (WINDOW - 1), ds.ends[te[-1]]
        held = Counter(f.program for f in faults if f.start < hi and f.end > lo)
        train_n = Counter(f.program for f in faults if not (f.start < hi and f.end > lo))
        fold_rows.append((fi + 1, len(te), held, train_n, float((pred[te] == y[te]).mean())))
        imp = getattr(m, "feature_importances_", None)
        if imp is None:
            continue
        top = np.argsort(-imp)[:50]
        ref = tr[y[tr] == 0]
        mu, sd = x[ref][:, top].mean(axis=0), x[ref][:, top].std(axis=0)
        sd = np.maximum(sd, 1e-9 * (np.abs(mu) + 1.0))
        for w in te[(y[te] == 0) & (pred[te] != 0)]:
            z = (x[w, top] - mu) / sd
            j = int(np.argmax(np.abs(z)))
            pulls.append((int(w), CLASSES[pred[w]], ds.names[top[j]], float(z[j])))
    per, wf1, mf1 = fscores(y, pred, present)
    names = [CLASSES[c] for c in present]
    out = [f"{model}, mode labels, {k} time-ordered folds: weighted F1 {wf1:.3f}, macro F1 {mf1:.3f}, {len(y)} windows", ""]
    out += ["F1 per class: " + ", ".join(f"{CLASSES[c]} {f:.2f}" for c, f in per.items()), ""]
    out += ["### Confusion matrix (rows true, columns predicted)", "", "| true / predicted | " + " | ".join(names) + " |"]
    out += ["|---|" + "---|" * len(names)]
    for c in present:
        out.append(f"| {CLASSES[c]} | " + " | ".join(str(int(((y == c) & (pred == d)).sum())) for d in present) + " |")
    kinds = sorted({f.program for f in faults})
    out += ["", "### Folds: fault instances held out (in the fold) / left to learn from (other folds)", ""]
    out += ["| fold | windows | accuracy | " + " | ".join(kinds) + " |", "|---|---|---|" + "---|" * len(kinds)]
    for fi, n, held, train_n, acc in fold_rows:
        out.append(f"| {fi} | {n} | {acc:.2f} | " + " | ".join(f"{held[p]}/{train_n[p]}" for p in kinds) + " |")
    out += ["", "### Errors by window position", "", "| position | windows | errors | error rate | errors true healthy |"]
    out += ["|---|---|---|---|---|"]
    for p in ("inside", "boundary", "after", "healthy"):
        sel = pos == p
        err = sel & (pred != y)
        out.append(
            f"| {p} | {int(sel.sum())} | {int(err.sum())} | {err.sum() / max(sel.sum(), 1):.2f} | {int((err & (y == 0)).sum())} |"
        )
    out += ["", "### Errors per true class and position (inside / boundary)", ""]
    out += ["| class | inside errors / windows | boundary errors / windows | most often predicted |", "|---|---|---|---|"]
    for c in present:
        s_in, s_b = (y == c) & (pos == "inside"), (y == c) & (pos == "boundary")
        wrong = Counter(CLASSES[d] for d in pred[(y == c) & (pred != y)])
        out.append(
            f"| {CLASSES[c]} | {int((s_in & (pred != y)).sum())} / {int(s_in.sum())} | "
            f"{int((s_b & (pred != y)).sum())} / {int(s_b.sum())} | "
            + ", ".join(f"{n} {v}" for n, v in wrong.most_common(3))
            + " |"
        )
    out += ["", "### Per fault instance (its windows with its mode label)", ""]
    out += ["| fault | seq | intensity | s | windows | predicted |", "|---|---|---|---|---|---|"]
    for f in sorted(faults, key=lambda f: (f.program, f.start)):
        w = (ds.ends - (WINDOW - 1) <= f.end) & (ds.ends >= f.start) & (y == CLASSES.index(f.program))
        got = Counter(CLASSES[d] for d in pred[w])
        out.append(
            f"| {f.program} | {f.seq} | {'low' if f.low else 'high'} | {f.end - f.start:.0f} | {int(w.sum())} | "
            + ", ".join(f"{n} {v}" for n, v in got.most_common())
            + " |"
        )
    hf = (y == 0) & (pred != 0)
    fs = fault_seconds(ds.ends, faults)
    hb = (y == 0) & (pos == "boundary")
    out += ["", f"### Healthy windows taken for a fault: {int(hf.sum())} of {int((y == 0).sum())}", ""]
    out += [
        f"Healthy-labelled boundary windows (a fault holds 1-30 of their 60 s): {int(hb.sum())}; seconds of fault in them, "
        f"median (p25-p75): taken for a fault {_q(fs[hb & hf])}, called healthy {_q(fs[hb & ~hf])}.",
        "",
    ]
    out += ["| predicted | windows | position (healthy/after/boundary) | application | strongest pull (feature, z) |"]
    out += ["|---|---|---|---|---|"]
    for cls in sorted({CLASSES[d] for d in pred[hf]}):
        sel = hf & (pred == CLASSES.index(cls))
        pc = Counter(pos[sel])
        ac = Counter(app[sel])
        fc = Counter(f for w, p, f, _ in pulls if p == cls)
        zs = {f: np.median([z for w, p, g, z in pulls if p == cls and g == f]) for f in fc}
        out.append(
            f"| {cls} | {int(sel.sum())} | {pc['healthy']}/{pc['after']}/{pc['boundary']} | "
            + ", ".join(f"{a} {n}" for a, n in ac.most_common(3))
            + " | "
            + ", ".join(f"{f} ({n}, z {_z(zs[f])})" for f, n in fc.most_common(2))
            + " |"
        )
    return "\n".join(out) + "\n"


def learning_curve(ds: Dataset, insts: Sequence[Instance], seed: int = 0, k: int = 5, model: str = "rf") -> str:
    """How the time-ordered score grows with the fault instances the model learns from: every fold is tested
    by models trained on every combination of m = 1..k-1 of the other folds (time-ordered folds, mode labels,
    all windows); per m the pooled weighted F1 over all test folds and combinations, and the mean number of
    instances of a fault kind in the training folds (the paper's 32-day campaign gave hundreds per kind)."""
    from itertools import combinations

    from sklearn.metrics import f1_score

    core = one_core_per_window(len(ds.ends), ds.features.shape[1], seed)
    x, y = ds.features[np.arange(len(ds.ends)), core], ds.mode
    fl = folds(len(y), k)
    faults = [i for i in insts if i.is_fault]
    kinds = sorted({f.program for f in faults})
    spans = [(ds.ends[te[0]] - (WINDOW - 1), ds.ends[te[-1]]) for _, te in fl]
    out = ["| training folds | fits | weighted F1 (pooled) | macro F1 | instances per fault kind in training (mean) |"]
    out += ["|---|---|---|---|---|"]
    for m in range(1, k):
        ys, ps, per_kind = [], [], []
        for j, (_, te) in enumerate(fl):
            for combo in combinations([i for i in range(k) if i != j], m):
                tr = np.concatenate([fl[i][1] for i in combo])
                if len(set(y[tr].tolist())) < 2:
                    continue
                ys.append(y[te])
                ps.append(make(model, seed).fit(x[tr], y[tr]).predict(x[te]))
                held = [f for f in faults if any(f.start < spans[i][1] and f.end > spans[i][0] for i in combo)]
                per_kind.append(np.mean([sum(f.program == kd for f in held) for kd in kinds]))
        yy, pp = np.concatenate(ys), np.concatenate(ps)
        w = f1_score(yy, pp, average="weighted", zero_division=0.0)
        mac = f1_score(yy, pp, average="macro", zero_division=0.0)
        out.append(f"| {m} | {len(ys)} | {w:.3f} | {mac:.3f} | {np.mean(per_kind):.1f} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m nodewatch.tasks.finj.errors CAMPAIGN [--without a,b] [--model rf] [--seed 0]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--without", default="", help="comma list of faults whose windows are dropped")
    ap.add_argument("--model", default="rf")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    ds = build(a.campaign)
    insts = instances(a.campaign)
    drop = [p for p in a.without.split(",") if p]
    if drop:
        ds = without_faults(ds, [(i.start, i.end) for i in insts if i.is_fault and i.program in drop])
        insts = [i for i in insts if not (i.is_fault and i.program in drop)]
    print(f"## {a.campaign}{' without ' + ', '.join(drop) if drop else ''}\n")
    print(analyse(ds, insts, a.seed, model=a.model))
    print("### Learning curve: time-ordered folds, trained on m of the other folds\n")
    print(learning_curve(ds, insts, a.seed, model=a.model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
