"""Benchmark: syslog templating (nodewatch.tasks.syslog.templates) vs drain3's own TemplateMiner, same run.

Goals (issue 17): grouping accuracy (GA) on the Loghub BGL_2k and HPC_2k corrected ground truth >= drain3's GA
measured in the same run; templating throughput >= 5x drain3's lines/s on 1M lines.

1. Accuracy: every message (``Content``) of ``../shared/data/loghub/{BGL,HPC}_2k.log_structured_corrected.csv``
   through our miner (settings default ``sim_th``) and through ``drain3.TemplateMiner()`` with its default
   configuration (one ``add_log_message`` per line, the library's documented use); GA, FGA (Loghub-2.0) and PA
   for both. Also our miner at drain3's default ``sim_th=0.4`` (the same Drain parameters as the baseline).
2. Throughput: ``--lines`` (default 1,000,000) messages rendered from the simulator's syslog templates
   (tasks/simulate/syslog_templates.py, Zipf frequencies, random users/IPs/numbers/hex); our
   :meth:`TemplateMiner.assign` (ids + parameters) vs drain3's ``add_log_message`` per line. Wall-clock and
   CPU seconds of this process; ``ratio=`` is drain3 CPU s / ours CPU s (= ours lines/s over drain3 lines/s), ids
   only for drain3; ``params_ratio=`` compares with drain3 producing ids *and* parameters (``get_parameter_list``
   after each ``add_log_message``, measured on the first 100,000 lines).
3. Hostile input: ``--hostile`` lines that are all unique words (no digits), 1 MB messages, binary bytes and
   empty messages; prints the template count (capped), the overflow count and the peak RSS growth.

    nice .venv/bin/python benchmarks/syslog_templates.py [--lines 1000000] [--hostile 200000]
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodewatch.models.syslog.metrics import grouping_scores, parsing_accuracy  # noqa: E402
from nodewatch.tasks.syslog.settings import SyslogSettings  # noqa: E402
from nodewatch.tasks.syslog.templates import TemplateMiner  # noqa: E402

LOGHUB = Path(__file__).resolve().parents[2] / "shared" / "data" / "loghub"


def _drain3():
    import logging

    from drain3 import TemplateMiner as D3
    from drain3.template_miner_config import TemplateMinerConfig

    logging.getLogger("drain3").setLevel(logging.ERROR)
    return D3(config=TemplateMinerConfig())


def accuracy() -> None:
    cfg = SyslogSettings()
    for name in ("BGL", "HPC"):
        f = LOGHUB / f"{name}_2k.log_structured_corrected.csv"
        if not f.exists():
            print(f"{name}: {f} missing, accuracy skipped")
            continue
        with f.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        msgs = [r["Content"] for r in rows]
        gt = [r["EventTemplate"] for r in rows]
        for label, th in (("ours", cfg.sim_th), ("ours@0.4", 0.4)):
            m = TemplateMiner(sim_th=th)
            a = m.assign(msgs)
            t = m.templates()
            s = grouping_scores(gt, a.template_id.tolist())
            pa_ = parsing_accuracy(gt, [t[int(i)] for i in a.template_id])
            print(f"{name} {label:9s} sim_th={th}: GA={s['GA']:.3f} FGA={s['FGA']:.3f} PA={pa_:.3f} templates={len(t)}")
        d = _drain3()
        ids = [d.add_log_message(x)["cluster_id"] for x in msgs]
        tt = {c.cluster_id: c.get_template() for c in d.drain.clusters}
        s = grouping_scores(gt, ids)
        print(f"{name} drain3    default   : GA={s['GA']:.3f} FGA={s['FGA']:.3f} "
              f"PA={parsing_accuracy(gt, [tt[i] for i in ids]):.3f} templates={len(tt)}")


def synth(n: int, seed: int = 7) -> list[str]:
    """``n`` messages from the simulator's background templates (Zipf) with random fill."""
    from nodewatch.tasks.simulate.syslog import BG_PROBS, _Filler
    from nodewatch.tasks.simulate.syslog_templates import BACKGROUND

    g = np.random.default_rng(seed)
    pick = g.choice(len(BACKGROUND), size=n, p=BG_PROBS)
    nodes = [f"cn{i:04d}" for i in range(1000)]
    fill = _Filler(g, nodes[0], 1_700_000_000)
    out = []
    for k, i in enumerate(pick.tolist()):
        fill.node = nodes[k % 1000]
        out.append(fill.fill(BACKGROUND[i][3], float(k % 86400), job=1000 + k % 5000))
    return out


def throughput(n: int) -> None:
    msgs = synth(n)
    print(f"throughput on {n:,} simulator messages")
    import pyarrow as pa

    arr = pa.array(msgs, pa.large_string())
    m = TemplateMiner(sim_th=SyslogSettings().sim_th)
    w0, c0 = time.perf_counter(), time.process_time()
    a = m.assign(arr)
    ours_w, ours_c = time.perf_counter() - w0, time.process_time() - c0
    print(f"  ours  : {ours_c:.2f} CPU s, {ours_w:.2f} s wall, {n / ours_c:,.0f} lines/CPU-s; "
          f"shapes={a.counts.shapes} templates={len(m.templates())} param_mismatch={a.counts.param_mismatch}")
    d = _drain3()
    w0, c0 = time.perf_counter(), time.process_time()
    for x in msgs:
        d.add_log_message(x)
    d_w, d_c = time.perf_counter() - w0, time.process_time() - c0
    print(f"  drain3: {d_c:.2f} CPU s, {d_w:.2f} s wall, {n / d_c:,.0f} lines/CPU-s; templates={len(d.drain.clusters)}")
    # like for like: drain3 producing what we produce (template id + parameters of every line), on a sample
    k = min(n, 100_000)
    d2 = _drain3()
    c0 = time.process_time()
    for x in msgs[:k]:
        r = d2.add_log_message(x)
        d2.get_parameter_list(r["template_mined"], x)
    dp_c = time.process_time() - c0
    print(f"  drain3 ids+parameters (add_log_message + get_parameter_list, first {k:,} lines): "
          f"{k / dp_c:,.0f} lines/CPU-s")
    print(f"params_ratio={(k / dp_c) and (n / ours_c) / (k / dp_c):.2f}")
    print(f"wall_ratio={d_w / ours_w:.2f}")
    print(f"ratio={d_c / ours_c:.2f}")


def hostile(n: int) -> None:
    g = np.random.default_rng(3)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    words = ["".join(map(chr, g.choice(letters, 8))) for _ in range(4 * n)]
    msgs = [" ".join(words[4 * i:4 * i + 4]) for i in range(n)]
    msgs += ["x" * 1_000_000, "\x00\x01\x02 \ufffd\ufffd binary", "", " "]
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    m = TemplateMiner(max_new_templates=SyslogSettings().max_new_templates)
    t0 = time.perf_counter()
    a = m.assign(msgs)
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"hostile {len(msgs):,} lines (all unique + 1 MB + binary + empty): {time.perf_counter() - t0:.1f} s, "
          f"templates={len(m.templates())} overflow={a.counts.overflow} truncated={a.counts.truncated} "
          f"rows_out={len(a.template_id)} peak RSS growth={(rss1 - rss0) / 1024:.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--hostile", type=int, default=200_000)
    args = ap.parse_args()
    accuracy()
    if args.hostile:
        hostile(args.hostile)
    throughput(args.lines)


if __name__ == "__main__":
    main()
