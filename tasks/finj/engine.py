"""FINJ engine (Netti et al. Sec. 3.2-3.3) for one node: runs a workload's tasks at their times, pinned to
their cores, each killed at its time limit; logs start/end/exit as labelled events; never overlaps two
faults; starts the sampler with the session and stops it with it; always cleans up.

Cleanup, in three layers: (1) every task runs in its own session/process group inside the run's cgroups
(``cgroup.py``) and is killed with its group at its limit; (2) on any exit of :func:`run_campaign`
(end, exception, Ctrl-C) the ``finally`` kills all groups and removes the cgroups; (3) a watchdog process
(``watchdog.py``, own session, reads a pipe from the engine) does the same when the engine is killed with
SIGKILL; the direct children also get ``PR_SET_PDEATHSIG``.

Outputs in ``OUT``: ``events.csv`` (``time,event,seq,is_fault,program,low,cores,pid,status,detail``; events
``start``, ``end``, ``delayed``, ``unavailable``, ``stopped``), ``raw.csv`` and ``ldms/<node>.csv`` (sampler),
``workload.csv`` (the tasks run), ``logs/<seq>-<program>.log`` (task output), ``summary.json``.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nodewatch.tasks.core.procs import parent_death_signal
from nodewatch.tasks.finj import availability
from nodewatch.tasks.finj import cgroup as cgmod
from nodewatch.tasks.finj.workload import Task, format_workload

EVENT_FIELDS = ("time", "event", "seq", "is_fault", "program", "low", "cores", "pid", "status", "detail")
NEEDS_CGROUP = ("cpufreq", "pagefail")
KILL_GRACE = 3.0


@dataclass
class EngineConfig:
    """How a campaign runs (the ``[finj]`` settings feed it, see ``config.py``)."""

    out: Path
    node: str = ""
    n_cores: int = 0
    max_task_s: float = 3600.0
    mem_cap: int = 2 * 2**30
    disk_cap: int = 512 * 2**20
    sample: bool = True
    python: str = sys.executable
    time_scale: float = 1.0
    """Workload seconds per real second (tests compress a workload; 1.0 for real campaigns)."""
    env: dict[str, str] = field(default_factory=dict)
    cpu_shares: int = 0
    """CPU weight of the run's cgroup (v1 ``cpu.shares``; 0 = leave the default 1024): with session autogroups
    other users' ``nice 19`` jobs still weigh as much as the whole campaign (see ``cgroup.set_cpu_weight``)."""
    mlock: bool = False
    """Lock the sampler's memory (``mlockall``, root): it keeps sampling while the machine thrashes."""
    stand_ins: tuple[str, ...] = ()
    """Faults to run as their stand-in when the kernel lacks the paper's mechanism (``availability.STAND_INS``);
    without it such a fault is ``unavailable`` (with the reason)."""
    debugfs: Path | None = None
    """debugfs root for the kernel's fault injection (``None``: ``availability.DEBUGFS``)."""


def default_node() -> str:
    """This host's short name if it is a valid node name, else ``localhost``."""
    from nodewatch.schemas.names import is_valid_node_name

    name = socket.gethostname().split(".")[0]
    return name if is_valid_node_name(name) else "localhost"


class _Running:
    def __init__(self, task: Task, proc: subprocess.Popen, deadline: float, log) -> None:
        self.task, self.proc, self.deadline, self.log = task, proc, deadline, log
        self.killed_at: float | None = None


class Engine:
    """One injection session; use :func:`run_campaign`."""

    def __init__(self, tasks: Sequence[Task], cfg: EngineConfig) -> None:
        self.tasks = sorted(tasks, key=lambda t: (t.timestamp, t.seq))
        self.cfg = cfg
        self.n_cores = cfg.n_cores or os.cpu_count() or 1
        # the campaign's cores: those the engine may run on (``taskset -c 1`` or a cpuset makes a 1-core node);
        # a task with cores ``None`` runs on them and a fault's cgroup limits are sized to them
        self.cores = tuple(sorted(c for c in os.sched_getaffinity(0) if c < self.n_cores)) or tuple(range(self.n_cores))
        self.node = cfg.node or default_node()
        self.run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
        self.out = cfg.out
        self.events_fh = None
        self.cg: cgmod.RunCgroups | None = None
        self.unavailable: dict[str, str] = {}
        self.running: list[_Running] = []
        self.state = self.out / ".finj-state.jsonl"
        self.watchdog: subprocess.Popen | None = None
        self.sampler: subprocess.Popen | None = None
        self.shim: Path | None = None
        self.pagefail_mode = "cgroup"
        self.counts = {"started": 0, "ended": 0, "timeout": 0, "failed": 0, "unavailable": 0, "delayed": 0, "stopped": 0}

    # ------------------------------------------------------------------------------------------ logging
    def event(self, event: str, task: Task | None = None, pid: int = 0, status: str = "", detail: str = "") -> None:
        """Append one labelled event."""
        row = [
            f"{time.time():.3f}",
            event,
            task.seq if task else "",
            task.is_fault if task else "",
            task.program if task else "",
            task.low if task else "",
            "" if task is None or task.cores is None else " ".join(map(str, task.cores)),
            pid or "",
            status,
            detail,
        ]
        self.events_fh.writerow(row)
        self._events_raw.flush()

    def _state(self, obj: dict) -> None:
        with open(self.state, "a") as fh:
            fh.write(json.dumps(obj) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    # ------------------------------------------------------------------------------------------- set-up
    def setup(self) -> None:
        """Directories, cgroups, watchdog, shim, sampler."""
        self.out.mkdir(parents=True, exist_ok=True)
        if any(self.out.iterdir()):
            raise FileExistsError(f"output directory {self.out} is not empty")
        for d in ("scratch", "ctl", "logs"):
            (self.out / d).mkdir()
        self.state.touch()
        self._events_raw = open(self.out / "events.csv", "w", newline="")  # noqa: SIM115
        self.events_fh = csv.writer(self._events_raw)
        self.events_fh.writerow(EVENT_FIELDS)
        (self.out / "workload.csv").write_text(format_workload(self.tasks))
        self.watchdog = subprocess.Popen(
            [self.cfg.python, "-m", "nodewatch.tasks.finj.watchdog", str(self.state)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=open(self.out / "logs" / "watchdog.log", "w"),  # noqa: SIM115
            start_new_session=True,
        )
        self._state({"ctl": str(self.out / "ctl")})
        version, why = cgmod.detect()
        if version:
            try:
                self.cg = cgmod.create(self.run_id)
            except OSError as e:
                self.cg, why = None, f"cannot create cgroups: {e}"
        if self.cg is not None:
            self._state({"cgroups": self.cg.to_json()})
            cgmod.set_memory_limit(self.cg.dirs["faults"], self.cg.version, self.cfg.mem_cap + 256 * 2**20)
            if self.cfg.cpu_shares:
                cgmod.set_cpu_weight(self.cg.base, self.cg.version, self.cfg.cpu_shares)
        else:
            for f in NEEDS_CGROUP:
                self.unavailable[f] = why
        from nodewatch.tasks.finj.ioshim import build

        self.shim, why_shim = build(self.out / "ctl" / "shim")
        if self.shim is None:
            self.unavailable["ioerr"] = why_shim
        for f, why in availability.unavailable(self.cfg.stand_ins, self.cfg.debugfs).items():
            self.unavailable.setdefault(f, why)
        self.pagefail_mode = "cgroup" if availability.pagefail_reason(self.cfg.debugfs) else "kernel"
        if self.cfg.sample:
            self.sampler = self._spawn(
                [self.cfg.python, "-m", "nodewatch.tasks.finj.sampler", "--out", str(self.out), "--node", self.node]
                + (["--mlock"] if self.cfg.mlock else []),
                "sys",
                None,
                self.out / "logs" / "sampler.log",
                {"NWFINJ_CGROUPS": json.dumps(self.cg.to_json())} if self.cg is not None else {},
            )

    def _spawn(
        self, argv: list[str], group: str, cores: tuple[int, ...] | None, log: Path, env: dict[str, str]
    ) -> subprocess.Popen:
        cg = self.cg
        death = parent_death_signal(signal.SIGKILL)

        def pre() -> None:
            if death is not None:
                death()
            if cores is not None:
                os.sched_setaffinity(0, cores)
            if cg is not None:
                cgmod.join(cg, group)

        full_env = {**os.environ, **self.cfg.env, **env}
        fh = open(log, "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=full_env,
                start_new_session=True,
                preexec_fn=pre,
                cwd=str(self.out / "scratch"),
            )
        finally:
            fh.close()
        self._state({"pgid": proc.pid})
        return proc

    def _start(self, task: Task, now_wall: float) -> None:
        cores = task.cores or self.cores
        limit = (task.duration or self.cfg.max_task_s) / self.cfg.time_scale
        limit = min(limit, self.cfg.max_task_s)
        env = {k: str(len(cores)) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        if task.is_fault:
            group = "faults"
            if self.cg is not None:
                env.update(
                    NWFINJ_APPS_CGROUP=os.pathsep.join(self.cg.dirs["apps"]),
                    NWFINJ_CGROUP_VERSION=str(self.cg.version),
                    NWFINJ_APP_CORES=str(len(self.cores)),
                    NWFINJ_PAGEFAIL=self.pagefail_mode,
                    NWFINJ_DEBUGFS=str(self.cfg.debugfs or availability.DEBUGFS),
                )
        else:
            group = "apps"
            if self.shim is not None:
                env.update(LD_PRELOAD=str(self.shim), NWFINJ_IOERR_CTL=str(self.out / "ctl" / "ioerr"))
        argv = [
            self.cfg.python,
            "-m",
            "nodewatch.tasks.finj.programs",
            task.program,
            "--duration",
            f"{limit:.3f}",
            "--scratch",
            str(self.out / "scratch"),
            "--ctl",
            str(self.out / "ctl"),
            "--mem-cap",
            str(self.cfg.mem_cap),
            "--disk-cap",
            str(self.cfg.disk_cap),
        ]
        if task.low:
            argv.append("--low")
        log = self.out / "logs" / f"{task.seq}-{task.program}.log"
        proc = self._spawn(argv, group, task.cores, log, env)
        self.running.append(_Running(task, proc, now_wall + limit + KILL_GRACE, log))
        self.counts["started"] += 1
        self.event("start", task, proc.pid)

    def _reap(self, now: float) -> None:
        for r in list(self.running):
            rc = r.proc.poll()
            if rc is None and now >= r.deadline:
                if r.killed_at is None:
                    r.killed_at = now
                    self._killpg(r.proc.pid, signal.SIGTERM)
                elif now - r.killed_at > KILL_GRACE:
                    self._killpg(r.proc.pid, signal.SIGKILL)
                continue
            if rc is None:
                continue
            self._killpg(r.proc.pid, signal.SIGKILL)  # anything the task left in its group
            self.running.remove(r)
            status = "timeout" if r.killed_at is not None else ("ok" if rc == 0 else ("unavailable" if rc == 3 else f"exit {rc}"))
            self.counts["ended"] += 1
            if r.killed_at is not None:
                self.counts["timeout"] += 1
            elif rc != 0:
                self.counts["failed"] += 1
            self.event("end", r.task, r.proc.pid, status)

    @staticmethod
    def _killpg(pgid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    # ---------------------------------------------------------------------------------------------- run
    def loop(self, stop: Callable[[], bool] | None = None, progress: Callable[[int, int], None] | None = None) -> None:
        """Run every task at its time; returns when all ended (or ``stop()`` is true)."""
        t0 = time.monotonic()
        pending = list(self.tasks)
        delayed: set[int] = set()
        while pending or self.running:
            if stop is not None and stop():
                raise KeyboardInterrupt
            now = time.monotonic()
            elapsed = (now - t0) * self.cfg.time_scale
            while pending and pending[0].timestamp <= elapsed:
                task = pending[0]
                if task.is_fault and task.program in self.unavailable:
                    pending.pop(0)
                    self.counts["unavailable"] += 1
                    self.event("unavailable", task, detail=self.unavailable[task.program])
                    continue
                if task.is_fault and any(r.task.is_fault for r in self.running):
                    if task.seq not in delayed:  # faults never overlap: wait for the running one to end
                        delayed.add(task.seq)
                        self.counts["delayed"] += 1
                        self.event("delayed", task, detail="another fault is running")
                    break
                pending.pop(0)
                self._start(task, now)
            self._reap(time.monotonic())
            if progress is not None:
                progress(len(self.tasks) - len(pending) - len(self.running), len(self.tasks))
            time.sleep(0.1)

    def teardown(self) -> None:
        """Kill every task, stop the sampler, remove the cgroups, release the watchdog."""
        for r in self.running:
            self._killpg(r.proc.pid, signal.SIGKILL)
        for r in self.running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                r.proc.wait(timeout=5)
            self.counts["stopped"] += 1
            if self.events_fh is not None:
                self.event("stopped", r.task, r.proc.pid, "killed")
        self.running.clear()
        if self.sampler is not None:
            self.sampler.send_signal(signal.SIGTERM)
            try:
                self.sampler.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._killpg(self.sampler.pid, signal.SIGKILL)
        if self.cg is not None:
            cgmod.kill_all(self.cg)
            cgmod.remove(self.cg)
        (self.out / "ctl" / "ioerr").unlink(missing_ok=True)
        if self.watchdog is not None:
            self.watchdog.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.watchdog.wait(timeout=15)
        if self.events_fh is not None:
            self._events_raw.close()


def run_campaign(
    tasks: Sequence[Task],
    cfg: EngineConfig,
    stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Run one injection session (see module doc); returns the summary written to ``summary.json``."""
    eng = Engine(tasks, cfg)
    t0 = time.time()
    interrupted = False
    try:
        eng.setup()
        eng.loop(stop, progress)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        eng.teardown()
    summary = {
        "run_id": eng.run_id,
        "node": eng.node,
        "started": t0,
        "ended": time.time(),
        "seconds": round(time.time() - t0, 1),
        "interrupted": interrupted,
        "tasks": len(eng.tasks),
        "counts": eng.counts,
        "unavailable": eng.unavailable,
        "cgroups": eng.cg.version if eng.cg else 0,
        "n_cores": eng.n_cores,
        "cores": list(eng.cores),
        "mlock": cfg.mlock,
        "cpu_shares": cfg.cpu_shares,
        "stand_ins": sorted(
            f for f in cfg.stand_ins if f not in eng.unavailable and not (f == "pagefail" and eng.pagefail_mode == "kernel")
        ),
    }
    (cfg.out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
