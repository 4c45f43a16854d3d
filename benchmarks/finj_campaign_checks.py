"""Checks behind docs/finj.md's reading of a real campaign (issue 19): what each view of the target node adds,
how much other tenants move the node's memory, and what the stand-in faults did per instance.

    nice .venv/bin/python benchmarks/finj_campaign_checks.py CAMPAIGN groups      # target node = which cgroups
    nice .venv/bin/python benchmarks/finj_campaign_checks.py CAMPAIGN footprint   # stand-in controllers removed
    nice .venv/bin/python benchmarks/finj_campaign_checks.py CAMPAIGN memmotion   # node MemFree vs target.mem_free
    nice .venv/bin/python benchmarks/finj_campaign_checks.py CAMPAIGN instances   # pagefail/ioerr per instance

``groups``: RF/DT (mode labels, time-ordered) with the target node = apps + faults + sys (the campaign view) and
apps + sys (the fault programs' own processes not counted), and the faults group's median memory per class.
``footprint``: the view with the faults group's gauges at 0 and its counters stopped while a stand-in controller
(cpufreq, pagefail, ioerr: a Python process turning a knob; a real frequency cap or kernel fault injection has
no process) holds. ``memmotion``: change rate of the node's MemFree and of ``target.mem_free`` over 60-s windows
(unambiguous, by class) and per healthy second. ``instances``: per pagefail/ioerr instance the applications
running, the applications' CPU, the node's disk writes and ``nr_dirtied``, the applications' ``failcnt``,
memory and page faults, during the fault and in the 60 s before, and the last line of the ``fileio`` log.
Prints markdown; ``ratio=`` is the view's RF weighted F1 over the compared variant's (``groups``, ``footprint``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def _rows(exps, label: str) -> None:
    for e in exps:
        per = " | ".join(f"{v:.2f}" for v in e.per_class.values())
        print(f"| {label} | {e.model} | {e.weighted:.3f} | {e.macro:.3f} | {per} |", flush=True)


def groups(c: Path) -> None:
    """RF/DT with the target node summed over different run cgroups."""
    import nodewatch.tasks.finj.dataset as dm
    from nodewatch.tasks.finj.train import evaluate

    raw = dm.read_raw(c, view="node")
    labels, _, _ = dm.per_second_state(raw)
    mu = raw.values[:, raw.columns.index("cgroup.faults.mem_usage")] / 2**20
    print("| class | faults-group memory MiB (median over its seconds) |\n|---|---|")
    for name in dm.CLASSES:
        m = labels == dm.CLASSES.index(name)
        print(f"| {name} | {np.median(mu[m]):.1f} |")
    print(f"\n| target node | model | weighted F1 | macro F1 | {' | '.join(dm.CLASSES)} |")
    print("|---|---|---|---|" + "---|" * len(dm.CLASSES))
    rf = {}
    for g in (("apps", "faults", "sys"), ("apps", "sys")):
        dm.TARGET_GROUPS = g
        exps, _ = evaluate(dm.build(c), ("rf", "dt"), rf_variants=False)
        _rows(exps, "+".join(g))
        rf[g] = exps[0].weighted
    print(f"ratio={rf[('apps', 'faults', 'sys')] / rf[('apps', 'sys')]:.3f}")


def footprint(c: Path) -> None:
    """RF/DT with the stand-in controllers' own footprint removed from the faults group."""
    import nodewatch.tasks.finj.dataset as dm
    from nodewatch.tasks.finj.sampler import is_counter
    from nodewatch.tasks.finj.train import evaluate

    view, _ = evaluate(dm.build(c), ("rf",), rf_variants=False)
    orig = dm.target_memory

    def patched(raw, cores=()):
        labels, _, _ = dm.per_second_state(raw)
        ctl = np.isin(labels, [dm.CLASSES.index(p) for p in ("cpufreq", "pagefail", "ioerr")])
        v = raw.values.copy()
        for j, name in enumerate(raw.columns):
            if name.startswith("cgroup.faults.") and "#" not in name:
                if is_counter(name):
                    inc = np.diff(v[:, j], prepend=v[0, j])
                    inc[ctl] = 0
                    v[:, j] = v[0, j] + np.cumsum(inc)
                else:
                    v[ctl, j] = 0.0
        return orig(dm.Raw(raw.t0, raw.columns, v, raw.events, raw.n_cores, raw.excluded, raw.missing, raw.cores), cores)

    dm.target_memory = patched
    exps, _ = evaluate(dm.build(c), ("rf", "dt"), rf_variants=False)
    print(f"| variant | model | weighted F1 | macro F1 | {' | '.join(dm.CLASSES)} |")
    print("|---|---|---|---|" + "---|" * len(dm.CLASSES))
    _rows(view, "the view")
    _rows(exps, "no controller footprint")
    print(f"ratio={view[0].weighted / exps[0].weighted:.3f}")


def memmotion(c: Path) -> None:
    """Node-wide MemFree vs target.mem_free change rates."""
    from nodewatch.models.finj.labels import window_labels
    from nodewatch.tasks.finj.dataset import CLASSES, per_second_state, read_raw

    node, tgt = read_raw(c, view="node"), read_raw(c)
    labels, _, _ = per_second_state(node)
    ends = np.arange(59, node.values.shape[0], 10)
    mode, _, amb = window_labels(labels, ends, 60)

    def slope(raw, name):
        v = raw.values[:, raw.columns.index(name)]
        return (v[ends] - v[ends - 59]) / 59 / 1e6

    s_node, s_t = slope(node, "meminfo.MemFree"), slope(tgt, "target.mem_free")
    print("| windows (unambiguous) | n | node MemFree MB/s p10 / median / p90 | target.mem_free MB/s p10 / median / p90 |")
    print("|---|---|---|---|")
    for name in ("healthy", "leak", "memeater", "pagefail", "copy", "ioerr"):
        m = (mode == CLASSES.index(name)) & ~amb
        if m.any():
            q = [" / ".join(f"{v:.1f}" for v in np.percentile(x[m], [10, 50, 90])) for x in (s_node, s_t)]
            print(f"| {name} | {m.sum()} | {q[0]} | {q[1]} |")
    h = labels[1:] == 0
    for raw, name in ((node, "meminfo.MemFree"), (tgt, "target.mem_free")):
        d = np.diff(raw.values[:, raw.columns.index(name)])[h] / 1e6
        print(f"{name}: per healthy second std {d.std():.2f} MB/s, median |change| {np.median(np.abs(d)):.3f} MB/s")


def instances(c: Path) -> None:
    """pagefail/ioerr instance by instance."""
    import pandas as pd

    from nodewatch.tasks.finj.errors import instances as insts

    df = pd.read_csv(c / "raw.csv")
    t = (df["#Time"] + df["Time_usec"] / 1e6).round().astype(int).to_numpy()
    runs = insts(c)
    apps = [i for i in runs if not i.is_fault]

    def sel(a: float, b: float) -> np.ndarray:
        return (t >= a) & (t < b)

    def rate(col: str, a: float, b: float) -> float:
        m = sel(a, b)
        v, tt = df[col].to_numpy(float)[m], t[m]
        return (v[-1] - v[0]) / max(tt[-1] - tt[0], 1) if m.sum() > 1 else float("nan")

    print(
        "| fault | seq | low | applications | apps CPU s/s in / before | node writes KiB/s in / before | nr_dirtied/s "
        "in / before | apps failcnt + | apps MiB | apps pgfault/s in / before | fileio log |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for prog in ("pagefail", "ioerr"):
        for f in (i for i in runs if i.is_fault and i.program == prog):
            a, b, pre = f.start, f.end, (f.start - 60, f.start)
            ov = [x for x in apps if x.start < b and x.end > a]
            log = ""
            for x in ov:
                if x.program == "fileio" and (c / "logs" / f"{x.seq}-fileio.log").is_file():
                    lines = (c / "logs" / f"{x.seq}-fileio.log").read_text().strip().splitlines()
                    log = lines[-1][:60] if lines else ""
            fc = df["cgroup.apps.mem_failcnt"].to_numpy(float)[sel(a, b)]
            print(
                f"| {prog} | {f.seq} | {int(f.low)} | {','.join(x.program for x in ov) or '-'} | "
                f"{rate('cgroup.apps.cpu_usage', a, b):.2f} / {rate('cgroup.apps.cpu_usage', *pre):.2f} | "
                f"{rate('diskstats.write_sectors', a, b) / 2:.0f} / {rate('diskstats.write_sectors', *pre) / 2:.0f} | "
                f"{rate('vmstat.nr_dirtied', a, b):.0f} / {rate('vmstat.nr_dirtied', *pre):.0f} | "
                f"{(fc.max() - fc.min()) if fc.size else 0:.0f} | "
                f"{df['cgroup.apps.mem_usage'].to_numpy(float)[sel(a, b)].mean() / 2**20:.0f} | "
                f"{rate('cgroup.apps.pgfault', a, b):.0f} / {rate('cgroup.apps.pgfault', *pre):.0f} | {log} |"
            )


if __name__ == "__main__":
    checks = {"groups": groups, "footprint": footprint, "memmotion": memmotion, "instances": instances}
    if len(sys.argv) != 3 or sys.argv[2] not in checks:
        print(f"usage: finj_campaign_checks.py CAMPAIGN {{{','.join(checks)}}}", file=sys.stderr)
        raise SystemExit(2)
    checks[sys.argv[2]](Path(sys.argv[1]))
