"""Log-parsing accuracy: grouping accuracy (GA), F1 of group accuracy (FGA) and parsing accuracy (PA).

* GA (Zhu et al., "Tools and benchmarks for automated log parsing", ICSE-SEIP 2019, §IV-A): a message is
  parsed correctly when the set of messages in its predicted group equals the set in its true group;
  GA = correctly parsed messages / all messages.
* FGA (Jiang et al., "A large-scale evaluation for log parsing techniques: how far are we?", ISSTA 2024,
  Loghub-2.0, §3.3): a predicted group is correct when it equals a true group as a set of messages;
  PGA = correct groups / predicted groups, RGA = correct groups / true groups, FGA = 2·PGA·RGA/(PGA+RGA).
* PA (Loghub-2.0 §3.3, after Dai et al.): share of messages whose predicted template equals the true one
  (tokens compared after collapsing runs of whitespace).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _groups(labels: Sequence) -> dict:
    out: dict = {}
    for i, lab in enumerate(labels):
        out.setdefault(lab, []).append(i)
    return {k: frozenset(v) for k, v in out.items()}


def grouping_scores(truth: Sequence, pred: Sequence) -> dict[str, float]:
    """GA, PGA, RGA and FGA of the predicted grouping ``pred`` against ``truth`` (labels per message)."""
    if len(truth) != len(pred):
        raise ValueError(f"truth has {len(truth)} labels, pred {len(pred)}")
    if len(truth) == 0:
        raise ValueError("no messages")
    tg = set(_groups(truth).values())
    pg = _groups(pred)
    correct_groups = [g for g in pg.values() if g in tg]
    ga = sum(len(g) for g in correct_groups) / len(truth)
    pga = len(correct_groups) / len(pg)
    rga = len(correct_groups) / len(tg)
    fga = 0.0 if pga + rga == 0 else 2 * pga * rga / (pga + rga)
    return {"GA": ga, "PGA": pga, "RGA": rga, "FGA": fga}


def parsing_accuracy(truth_templates: Sequence[str], pred_templates: Sequence[str]) -> float:
    """PA: share of messages whose template equals the true template (whitespace-normalised)."""
    if len(truth_templates) != len(pred_templates) or not truth_templates:
        raise ValueError("need two equally long, non-empty template lists")
    eq = np.fromiter((" ".join(a.split()) == " ".join(b.split()) for a, b in zip(truth_templates, pred_templates, strict=True)),
                     bool, len(truth_templates))
    return float(eq.mean())
