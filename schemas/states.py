"""Staged tables ``node_states``, ``failure_events``, ``state_carry`` and the ``cubes/state.zarr`` description.

The state legend follows the SaNSA paper (Agarwal et al., Sec. II-B): codes 1..8 in the paper's
numbering; ``0`` marks minutes that were never built. The cube carries the legend as CF
``flag_values`` / ``flag_meanings`` attributes so any xarray reader can decode it.
"""

from __future__ import annotations

import pyarrow as pa

from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, Expectation, TableSchema

STATE_NAMES: tuple[str, ...] = (
    "DOWN",
    "CONNECTION_LOSS",
    "BOOTING",
    "IDLE",
    "JOB_RUNNING",
    "ADMIN_RESV",
    "RESERVED_IDLE",
    "UNSCHEDULED_RESV",
)
"""State names; the code of ``STATE_NAMES[i]`` is ``i + 1`` (paper Sec. II-B numbering)."""

STATE_CODES: dict[str, int] = {n: i + 1 for i, n in enumerate(STATE_NAMES)}
FILL_CODE = 0
"""Cube value of a minute that has not been derived (also the Zarr fill value of unwritten chunks)."""

STATE_DESCRIPTIONS: dict[str, str] = {
    "DOWN": "node unavailable and followed by a reboot (or silent after Slurm lost it)",
    "CONNECTION_LOSS": "Slurm lost contact with the node but the node is still active",
    "BOOTING": "node booting: systemd 'Startup finished' span or kernel banner",
    "IDLE": "node up, no job, no reservation (gap fill)",
    "JOB_RUNNING": "a job allocation includes this node",
    "ADMIN_RESV": "administrative reservation (maintenance) overlay",
    "RESERVED_IDLE": "user reservation without a running job",
    "UNSCHEDULED_RESV": "unscheduled outage / emergency maintenance overlay",
}

_ts = pa.timestamp("ns", tz="UTC")

NODE_STATES = TableSchema(
    name="node_states",
    description=(
        "SaNSA node-state intervals (paper Sec. II-B/II-C). Per node the intervals tile the built window "
        "without gaps or overlaps; intervals are split at UTC midnight so each date partition is self-contained."
    ),
    columns=(
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="compute node"),
        Column("start", _ts, nullable=False, description="interval start (inclusive)"),
        Column("end", _ts, nullable=False, description="interval end (exclusive)"),
        Column("state", pa.string(), nullable=False, allowed=STATE_NAMES, description="SaNSA state"),
        Column("state_code", pa.int8(), nullable=False, min=1, max=8, description="code as in the cube legend"),
        Column(
            "overlay",
            pa.bool_(),
            nullable=False,
            description="true: ADMIN_RESV/UNSCHEDULED_RESV overlays applied (Table II 'w/ overlay')",
        ),
        Column(
            "evidence",
            pa.string(),
            nullable=False,
            description="what produced the interval, e.g. 'job 123', 'slurmctld loss + boot', 'gap'",
        ),
    ),
    time_column="start",
    unique_key=("node", "start", "overlay"),
    extra_expectations=(Expectation("ExpectColumnPairValuesAToBeGreaterThanB", {"column_A": "end", "column_B": "start"}),),
)

FAILURE_CAUSES: tuple[str, ...] = ("loss+boot", "loss+silent", "syslog+boot", "syslog+silent")

SHADOW_OVERLAYS: tuple[str, ...] = ("ADMIN_RESV", "UNSCHEDULED_RESV")
"""Values of ``failure_events.shadowed_by`` besides null: the overlay an episode begins inside (paper Sec. II-B/II-C)."""

FIT_SHADOWED_BY: tuple[str, ...] = ("UNSCHEDULED_RESV",)
"""Shadowed episodes the failure fits keep by default besides the unshadowed ones: an unscheduled outage kills
running jobs; episodes inside ADMIN_RESV (planned maintenance reboots) are left out."""

FAILURE_EVENTS = TableSchema(
    name="failure_events",
    description=(
        "Node failures: each DOWN episode (DOWN and the BOOTING that ends it) with its real start and end, one row "
        "however the days were built (an episode still open is updated by later builds). Consumed by the "
        "checkpoint-table failure fits. Every episode is listed; one beginning inside an ADMIN_RESV / UNSCHEDULED_RESV "
        "overlay of its node is shadowed (paper Sec. II-C: kept 'under the shadowed overlay') and names that overlay in "
        "shadowed_by. Paper statistics (Table II/III) leave shadowed episodes out; correlated rack failures and the "
        "failure fits keep UNSCHEDULED_RESV-shadowed ones and leave ADMIN_RESV-shadowed ones out."
    ),
    columns=(
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="compute node"),
        Column("start", _ts, nullable=False, description="episode start (slurmctld 'not responding'), not clipped to a window"),
        Column(
            "end",
            _ts,
            nullable=False,
            description="end of the DOWN/BOOTING episode; still open: end of the last built window (updated by later builds)",
        ),
        Column(
            "cause",
            pa.string(),
            nullable=False,
            allowed=FAILURE_CAUSES,
            description=(
                "loss+boot: loss followed by reboot; loss+silent: never responded, node silent; syslog+boot / "
                "syslog+silent: a syslog outage (Ghiasvand & Ciorba rule) the controller never reported"
            ),
        ),
        Column(
            "evidence",
            pa.string(),
            nullable=False,
            description="times of 'not responding', the boot (end + duration) and 'now responding' behind the event",
        ),
        Column("rack", pa.string(), nullable=True, description="rack from topology, if known"),
        Column(
            "shadowed_by",
            pa.string(),
            nullable=True,
            allowed=SHADOW_OVERLAYS,
            description=(
                "overlay of the node the episode begins inside (UNSCHEDULED_RESV wins over ADMIN_RESV, its priority); "
                "null: not shadowed. Tables staged before this column existed: read as null"
            ),
        ),
    ),
    time_column="start",
    unique_key=("node", "start"),
    extra_expectations=(Expectation("ExpectColumnPairValuesAToBeGreaterThanB", {"column_A": "end", "column_B": "start"}),),
)

STATE_CARRY = TableSchema(
    name="state_carry",
    description=(
        "Connection losses (DOWN / CONNECTION_LOSS) still in effect at the end of a built UTC day (partition = that day). "
        "The build of the next day seeds them as 'not responding' at their real start, so a node that stays silent for "
        "longer than the syslog lookback stays DOWN and its failure event keeps its real start."
    ),
    columns=(
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="compute node"),
        Column("as_of", _ts, nullable=False, description="UTC midnight at the end of the built day"),
        Column("loss_start", _ts, nullable=False, description="first slurmctld 'not responding' of the loss"),
        Column("last_seen", _ts, nullable=True, description="last syslog line of the node seen by that build"),
        Column("state", pa.string(), nullable=False, allowed=("DOWN", "CONNECTION_LOSS"), description="state of the loss"),
    ),
    time_column="as_of",
    unique_key=("node", "loss_start"),
)

CUBE_PATH = "cubes/state.zarr"
CUBE_VARIABLE = "state"
CUBE_STEP = "1min"
CUBE_TIME_CHUNK = 1440  # one UTC day of minutes


def cube_attrs() -> dict[str, object]:
    """CF-style attributes of the ``state`` variable: the legend (paper Sec. II-B)."""
    return {
        "long_name": "SaNSA node state",
        "flag_values": [FILL_CODE, *range(1, len(STATE_NAMES) + 1)],
        "flag_meanings": " ".join(("NOT_BUILT", *STATE_NAMES)),
        "sampling": "state in effect at the start of each minute (UTC)",
        "priority_low_to_high": "IDLE RESERVED_IDLE JOB_RUNNING CONNECTION_LOSS DOWN BOOTING ADMIN_RESV UNSCHEDULED_RESV",
        "references": "Agarwal et al., SaNSA - the Supercomputer and Node State Architecture, Sec. II-B/II-C",
    }


def legend_markdown() -> str:
    """Markdown table of codes, names and meanings (for docs and reports)."""
    lines = ["| code | state | meaning |", "|---|---|---|", f"| {FILL_CODE} | (not built) | minute never derived |"]
    lines += [f"| {STATE_CODES[n]} | {n} | {STATE_DESCRIPTIONS[n]} |" for n in STATE_NAMES]
    return "\n".join(lines)
