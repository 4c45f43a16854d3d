"""Every knob of the simulated cluster in one frozen dataclass, with documented defaults.

The workload defaults come from :data:`THUNDER_FIT`, produced once by ``python -m nodewatch.tasks.simulate.fit_swf``
on ``LLNL-Thunder-2007-1.1-cln.swf.gz`` (Parallel Workloads Archive: LLNL Thunder, 1,002 nodes,
Jan–Jun 2007, 118,791 usable jobs). They are embedded so the simulator never reads ../shared at run time.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from nodewatch.tasks.simulate.precursors import PrecursorShape

THUNDER_FIT: dict[str, Any] = {
    "source": "LLNL-Thunder-2007-1.1-cln.swf.gz (Parallel Workloads Archive), fitted by tasks/simulate/fit_swf.py",
    "max_nodes": 1002,
    "interarrival_weibull_shape": 0.5789,
    "interarrival_weibull_scale_s": 54.056,
    "hour_profile": (
        0.768,
        1.0,
        1.242,
        1.559,
        1.599,
        0.863,
        0.542,
        0.531,
        0.881,
        0.988,
        1.192,
        1.312,
        1.114,
        1.162,
        1.395,
        1.221,
        1.241,
        1.182,
        0.986,
        0.754,
        0.737,
        0.664,
        0.494,
        0.573,
    ),
    "node_sizes": (1, 4, 2, 16, 8, 32, 64, 256, 10, 6, 3, 128, 5, 12, 20, 7),
    "node_size_probs": (
        0.49643,
        0.14112,
        0.12454,
        0.08636,
        0.04791,
        0.04046,
        0.0129,
        0.00907,
        0.00766,
        0.00759,
        0.00711,
        0.00455,
        0.00442,
        0.00354,
        0.00321,
        0.00313,
    ),
    "size_log_runtime_means": (
        3.1907,
        5.2645,
        4.8914,
        5.6138,
        6.8067,
        5.3555,
        6.1505,
        7.5698,
        5.9349,
        5.7212,
        5.3834,
        6.9647,
        5.3625,
        6.3747,
        8.337,
        4.5849,
    ),
    "size_log_runtime_sigmas": (
        2.391,
        2.0615,
        2.5715,
        2.3377,
        2.626,
        2.4996,
        2.6231,
        2.8732,
        2.5007,
        2.8449,
        2.9688,
        2.7724,
        2.688,
        2.6177,
        2.1953,
        2.6364,
    ),
    "utilisation": 0.8649,
    "log_limit_over_runtime_mean": 5.4549,
    "log_limit_over_runtime_sigma": 2.3722,
    "status_share_completed_failed_cancelled": (0.8668, 0.0668, 0.0664),
}

ANOMALY_TYPES: tuple[str, ...] = (
    "memory_leak",
    "cpu_hog",
    "thermal_fan_failure",
    "network_degradation",
    "disk_slowdown",
    "misconfiguration",
)
"""Ground-truth anomaly types; ``misconfiguration`` is the rack-level one (SaNSA §III-B rack 13)."""


def _coerce(key: str, value: Any, default: Any) -> Any:
    """``value`` converted to the type of the knob's current value ``default`` (ValueError if it cannot be)."""
    bad = ValueError(f"knob {key}: {value!r} is not a valid {type(default).__name__}")
    if isinstance(value, str) and not isinstance(default, (str, date)):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise bad from None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise bad
        return int(value)
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise bad
        return value
    if isinstance(default, date):
        try:
            return value if isinstance(value, date) else date.fromisoformat(str(value))
        except ValueError:
            raise bad from None
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)):
            raise bad
        out = tuple(tuple(x) if isinstance(x, list) else x for x in value)
        if (
            default
            and out
            and type(default[0]) is not type(out[0])
            and not (isinstance(default[0], (int, float)) and isinstance(out[0], (int, float)))
        ):
            raise bad
        return out
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise bad
        return {**default, **value}
    return value


@dataclass(frozen=True)
class SimConfig:
    """All knobs of the simulator. Times are UTC; durations in seconds unless the name says otherwise.

    Cluster shape
        n_nodes: compute nodes ``cn0001…``; node_prefix/name_digits: their names (``cn`` + 4 digits).
        nodes_per_rack: nodes per rack (a rack is also one render batch and one syslog group).
        racks_per_row: racks per row (admin maintenance is per row); nodes_per_chassis: chassis size.
        architectures: (name, share) pairs assigned by contiguous rack blocks.
    Time
        start: first simulated day (the schedule's epoch); step_s: telemetry step (60 = 1 min).
    Workload (defaults fitted to LLNL Thunder, see :data:`THUNDER_FIT`)
        load_scale: multiplies the arrival rate (1.0 = Thunder's rate scaled to n_nodes).
        max_timelimit_s: partition MaxTime; cancel/timeout/oom shares: extra outcomes beyond Thunder's.
        n_users: users with Zipf-distributed activity.
    Failures
        failure_weibull_shape: shape k of per-node time-between-failures (0.7–0.8 in field studies).
        node_mtbf_days: mean of the Weibull per healthy node; frail_nodes / frail_factor: a few nodes
        whose MTBF is divided by frail_factor. rack_events_per_year: rack-correlated failures (power/cooling)
        that take down rack_event_fraction of a rack within rack_event_spread_s. repair_median_s /
        repair_sigma: lognormal time from crash to reboot. boot_*: kernel + userspace boot time.
        precursor_share: share of failures preceded by telemetry drift + syslog burst;
        precursor_median_s / precursor_sigma / precursor_min_s / precursor_max_s: lognormal lead time.
        precursor_shape (ramp | step | oscillation), precursor_strength (amplitude factor, 0 = no telemetry trace),
        precursor_period_s (on/off period of ``oscillation``): how the precursor shows in telemetry
        (tasks/simulate/precursors.py; ramp and 1.0 are the original rendering).
        slurmd_timeout_s: delay from crash to slurmctld "not responding, setting DOWN".
        connloss_per_node_year / connloss_median_s: CONNECTION_LOSS episodes (node alive, Slurm lost it).
    Anomalies
        anomaly_share: expected share of node-time inside per-node anomaly intervals (types 1–5);
        anomaly_median_s / anomaly_sigma: lognormal duration; anomaly_type_weights: mix of types 1–5.
        misconfig_rack: index of the misconfigured rack (-1: none; an index >= n_racks means rack
        n_racks // 2, see :attr:`SimConfig.misconfigured_rack`); misconfig_start_day/misconfig_days:
        its window (days after start; repeats every misconfig_period_days so appended days see it too).
    Admin maintenance
        maint_period_days: each row gets an admin window every maint_period_days (rows staggered);
        maint_hours: window length, starting at maint_start_hour UTC; maint_reboot_share: nodes rebooted in it.
    User reservations
        every user_resv_period_days a project gets user_resv_nodes contiguous nodes for user_resv_hours
        (Slurm reservation without MAINT); only that project's jobs run there (SaNSA RESERVED_IDLE).
    Collectors / monitoring
        outage_per_node_day / outage_median_s: node collector outages (no telemetry rows);
        rack_outage_per_rack_year: whole-rack aggregator outages. ldms_racks: racks whose telemetry is
        written as LDMS CSV instead of parquet. syslog_rfc5424_rows: rows whose racks log in RFC 5424
        (others RFC 3164). syslog_lines_per_node_day: mean background syslog volume.
        syslog_precursor_lines_per_min: extra lines per minute a node logs inside a failure's precursor window
        (Ghiasvand & Ciorba: the failing node's SG departs from its rack's; 0 = no syslog precursors).
        syslog_precursor_share: -1 (default) = syslog bursts exactly in the telemetry precursor windows; in [0, 1] =
        the paper-like setting: each internal-cause failure gets a burst with this probability (own stream), external
        ones (rack_power) none (Schedule.syslog_precursors).
        fp_alerts_per_node_year: Nagios CRITICAL false positives; alert_detect_prob: probability that an
        anomaly raises a CRITICAL Nagios alert; alert_warning_share: share of those (and of false positives)
        that first go WARNING (SOFT 1-2, HARD 3) 5-30 min before CRITICAL; warning_only_per_node_year:
        WARNING episodes that never turn CRITICAL (half recover while still SOFT: ``OK;SOFT``).
    Rendering
        workers: Dask workers; scheduler: "threads", "processes" or "synchronous".
    """

    n_nodes: int = 1000
    node_prefix: str = "cn"
    name_digits: int = 4
    nodes_per_rack: int = 48
    racks_per_row: int = 7
    nodes_per_chassis: int = 4
    architectures: tuple[tuple[str, float], ...] = (("icelake", 0.6), ("sapphirerapids", 0.3), ("milan", 0.1))
    start: date = date(2026, 1, 1)
    step_s: int = 60
    seed: int = 1
    # workload
    load_scale: float = 1.0
    max_timelimit_s: int = 86400
    n_users: int = 150
    cancel_share: float = 0.05
    timeout_share: float = 0.04
    oom_share: float = 0.015
    workload: dict[str, Any] = field(default_factory=lambda: dict(THUNDER_FIT))
    # failures
    failure_weibull_shape: float = 0.75
    node_mtbf_days: float = 200.0
    frail_nodes: int = 4
    frail_factor: float = 15.0
    rack_events_per_year: float = 6.0
    rack_event_fraction: float = 0.7
    rack_event_spread_s: int = 600
    repair_median_s: float = 4 * 3600.0
    repair_sigma: float = 1.0
    boot_kernel_s: tuple[float, float] = (15.0, 30.0)
    boot_userspace_s: tuple[float, float] = (60.0, 720.0)
    precursor_share: float = 0.7
    precursor_median_s: float = 3600.0
    precursor_sigma: float = 1.0
    precursor_min_s: float = 300.0
    precursor_max_s: float = 12 * 3600.0
    precursor_shape: str = "ramp"
    precursor_strength: float = 1.0
    precursor_period_s: float = 600.0
    slurmd_timeout_s: int = 300
    connloss_per_node_year: float = 2.0
    connloss_median_s: float = 1800.0
    # anomalies
    anomaly_share: float = 0.01
    anomaly_median_s: float = 3 * 3600.0
    anomaly_sigma: float = 0.8
    anomaly_type_weights: tuple[float, float, float, float, float] = (0.25, 0.25, 0.15, 0.2, 0.15)
    misconfig_rack: int = 13
    misconfig_start_day: int = 5
    misconfig_days: float = 2.0
    misconfig_period_days: int = 60
    # maintenance
    maint_period_days: int = 21
    maint_hours: float = 8.0
    maint_start_hour: int = 8
    maint_reboot_share: float = 0.9
    # user reservations (RESERVED_IDLE)
    user_resv_period_days: float = 10.0
    user_resv_nodes: int = 32
    user_resv_hours: float = 24.0
    # collectors / monitoring
    outage_per_node_day: float = 0.15
    outage_median_s: float = 900.0
    rack_outage_per_rack_year: float = 4.0
    ldms_racks: tuple[int, ...] = (0,)
    syslog_rfc5424_rows: tuple[int, ...] = (0, 2)
    syslog_lines_per_node_day: float = 300.0
    syslog_precursor_lines_per_min: float = 0.8
    syslog_precursor_share: float = -1.0
    fp_alerts_per_node_year: float = 3.0
    alert_detect_prob: float = 0.85
    alert_warning_share: float = 0.5
    warning_only_per_node_year: float = 12.0
    # rendering
    workers: int = 2
    scheduler: str = "threads"

    def __post_init__(self) -> None:
        if self.n_nodes < 1 or self.n_nodes >= 10**self.name_digits:
            raise ValueError(f"n_nodes must be in [1, {10**self.name_digits - 1}], got {self.n_nodes}")
        if self.step_s < 1 or 86400 % self.step_s:
            raise ValueError(f"step_s must divide a day (86400 s), got {self.step_s}")
        if not 0.0 <= self.anomaly_share < 0.5:
            raise ValueError(f"anomaly_share must be in [0, 0.5), got {self.anomaly_share}")
        if not 0.0 <= self.precursor_share <= 1.0:
            raise ValueError(f"precursor_share must be in [0, 1], got {self.precursor_share}")
        PrecursorShape(self.precursor_shape, self.precursor_strength, self.precursor_period_s)  # validates the knobs
        if self.syslog_precursor_share != -1.0 and not 0.0 <= self.syslog_precursor_share <= 1.0:
            raise ValueError(f"syslog_precursor_share must be -1 or in [0, 1], got {self.syslog_precursor_share}")
        if self.failure_weibull_shape <= 0 or self.node_mtbf_days <= 0:
            raise ValueError("failure_weibull_shape and node_mtbf_days must be > 0")
        if self.scheduler not in ("threads", "processes", "synchronous"):
            raise ValueError(f"scheduler must be threads, processes or synchronous, got {self.scheduler!r}")
        for k in ("nodes_per_rack", "racks_per_row", "nodes_per_chassis", "n_users", "workers"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k} must be >= 1, got {getattr(self, k)}")
        for k in ("alert_detect_prob", "alert_warning_share", "maint_reboot_share", "rack_event_fraction"):
            if not 0.0 <= getattr(self, k) <= 1.0:
                raise ValueError(f"{k} must be in [0, 1], got {getattr(self, k)}")
        for k in ("load_scale", "frail_factor", "repair_median_s", "anomaly_median_s", "max_timelimit_s"):
            if getattr(self, k) <= 0:
                raise ValueError(f"{k} must be > 0, got {getattr(self, k)}")
        for k in (
            "rack_events_per_year",
            "connloss_per_node_year",
            "outage_per_node_day",
            "rack_outage_per_rack_year",
            "fp_alerts_per_node_year",
            "warning_only_per_node_year",
            "syslog_lines_per_node_day",
            "syslog_precursor_lines_per_min",
            "frail_nodes",
        ):
            if getattr(self, k) < 0:
                raise ValueError(f"{k} must be >= 0, got {getattr(self, k)}")

    # derived -----------------------------------------------------------------------------------
    @property
    def epoch_s(self) -> int:
        """Unix seconds of ``start`` 00:00 UTC (the schedule epoch)."""
        return int(datetime(self.start.year, self.start.month, self.start.day, tzinfo=UTC).timestamp())

    @property
    def n_racks(self) -> int:
        """Number of racks (the last one may be partly filled, as in real machine rooms)."""
        return -(-self.n_nodes // self.nodes_per_rack)

    @property
    def misconfigured_rack(self) -> int:
        """Rack that is misconfigured: ``misconfig_rack``, or the middle rack ``n_racks // 2`` when that index does
        not exist in a smaller cluster (-1: none)."""
        if self.misconfig_rack < 0:
            return -1
        return self.misconfig_rack if self.misconfig_rack < self.n_racks else self.n_racks // 2

    def node_name(self, i: int) -> str:
        """Name of node index ``i`` (0-based): ``cn0001`` for 0."""
        return f"{self.node_prefix}{i + 1:0{self.name_digits}d}"

    def to_json(self) -> str:
        """JSON form (saved as ``simulation.json`` so ``--append`` can continue a cluster)."""
        d = dataclasses.asdict(self)
        d["start"] = self.start.isoformat()
        return json.dumps(d, indent=2, sort_keys=True, default=list)

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any], base: SimConfig | None = None) -> SimConfig:
        """``base`` (default: the defaults) with ``overrides`` applied; values are coerced to each knob's type.

        Raises ValueError with a one-line message for an unknown key or a value of the wrong type/range.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        cur = dataclasses.asdict(base if base is not None else cls())
        for k, v in overrides.items():
            if k not in fields:
                close = [n for n in fields if k.lower() in n or n in k.lower()][:3]
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise ValueError(f"unknown simulator knob {k!r}{hint}; see docs/simulator.md")
            cur[k] = _coerce(k, v, cur[k])
        return cls(**cur)

    @classmethod
    def from_json(cls, text: str) -> SimConfig:
        """Inverse of :meth:`to_json` (tuples restored)."""
        d = json.loads(text)
        d["start"] = date.fromisoformat(d["start"])
        for f in dataclasses.fields(cls):
            v = d.get(f.name)
            if isinstance(v, list):
                d[f.name] = tuple(tuple(x) if isinstance(x, list) else x for x in v)
        d["workload"] = {k: tuple(v) if isinstance(v, list) else v for k, v in d["workload"].items()}
        return cls(**d)
