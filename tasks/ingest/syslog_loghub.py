"""Loghub HPC logs: Blue Gene/L RAS log (``bgl``) and the LANL HPC event log (``hpc``).

BGL line (Oliner & Stearley, "What supercomputers say", DSN 2007; Loghub ``BGL``)::

    <alert tag or -> <epoch s> <YYYY.MM.DD> <location> <YYYY-MM-DD-HH.MM.SS.micro> <location> <type> <component> <level> <message>

* time = epoch seconds + the microseconds of the 5th field (the 5th field itself is local time).
* node: the location (e.g. ``R02-M1-N0-C:J12-U11`` = rack 02, midplane 1, node card 0, compute
  card J12, unit 11) lower-cased with ``:`` replaced by ``_`` -> ``r02-m1-n0-c_j12-u11``; then
  topology aliases apply. ``UNKNOWN_LOCATION`` names no node: the line is rejected with a reason.
* severity from the level: FAILURE 1 (alert), FATAL 2 (crit), SEVERE 3 and ERROR 3 (err),
  WARNING 4, INFO 6; an unknown level rejects the line.
* app = component (KERNEL, APP, MMCS, DISCOVERY, ...), ``alert_label`` = first field unless ``-``.

HPC line (LANL "System 20" event log; Loghub ``HPC``)::

    <log id> <node> <component> <state> <epoch s> <flag> <message>

* time = epoch seconds, node = the node field normalised like a host name (``node-246``,
  ``gige7``, ``interconnect-1n01``), app = component, msgid = state (e.g.
  ``state_change.unavailable``). The log id and the flag are not kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.syslog_blocks import (
    MAX_EPOCH_S,
    Block,
    const_str,
    digits,
    normalise_host,
    optional_substrings,
    split_tokens,
    substrings,
    var_digits,
)
from nodewatch.tasks.ingest.syslog_rfc3164 import sniff_share

_NS = 1_000_000_000
BGL_SEVERITY = {"FAILURE": 1, "FATAL": 2, "SEVERE": 3, "ERROR": 3, "WARNING": 4, "INFO": 6}
"""BGL level -> syslog severity."""

UNKNOWN_LOCATION = "UNKNOWN_LOCATION"


def bgl_host_rule(raw: str, aliases: Mapping[str, str]) -> tuple[str | None, str | None]:
    """BGL location -> node name (see module doc), or the reject reason."""
    if raw == UNKNOWN_LOCATION:
        return None, "parse: BGL location UNKNOWN_LOCATION names no node"
    return normalise_host(raw.replace(":", "_"), aliases)


def _severity(level: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Map BGL levels to severities; also the mask of known levels."""
    keys = pa.array(list(BGL_SEVERITY))
    pos = pc.index_in(level, value_set=keys)
    known = pc.is_valid(pos).to_numpy(zero_copy_only=False)
    sev = pc.take(pa.array(list(BGL_SEVERITY.values()), pa.int8()), pos)
    return sev, known


def bgl_fast(block: Block, idx: np.ndarray, ctx: ParseContext) -> tuple[dict, np.ndarray]:
    """Vectorised BGL parse; returns (columns of accepted lines, accepted mask)."""
    buf = block.buf
    s = block.starts[idx]
    e = block.ends[idx]
    sp, ok = split_tokens(block, idx, s, 9)
    epoch, eok = var_digits(buf, sp[:, 0] + 1, sp[:, 1], 11)
    ts0 = sp[:, 3] + 1
    micro, mok = digits(buf, ts0 + 20, 6)
    ok &= eok & mok & (sp[:, 4] - ts0 == 26) & (buf[ts0 + 19] == 46) & (epoch <= MAX_EPOCH_S)
    level = substrings(block, sp[ok, 7] + 1, sp[ok, 8])  # only where the token positions are sound
    sev, known = _severity(level)
    sev = sev.filter(pa.array(known))
    ok[np.flatnonzero(ok)[~known]] = False
    k = ok
    label_nil = (sp[:, 0] - s == 1) & (buf[s] == 45)
    cols = {
        "time": epoch[k] * _NS + micro[k] * 1000,
        "host": substrings(block, sp[k, 2] + 1, sp[k, 3]),
        "severity": sev,
        "app": substrings(block, sp[k, 6] + 1, sp[k, 7]),
        "message": substrings(block, sp[k, 8] + 1, e[k]),
        "alert_label": optional_substrings(block, s[k], sp[k, 0], label_nil[k]),
        "source_format": const_str("bgl", int(k.sum())),
    }
    return cols, ok


def bgl_slow(line: str, ctx: ParseContext) -> dict | str:
    """Per-line BGL parser (reference for the vectorised pass); raw row or reject reason."""
    f = line.split(" ", 9)
    if len(f) < 10:
        return "parse: not a BGL RAS line (expected 10 space-separated fields)"
    label, epoch, _date, loc, ts, _loc2, _type, comp, level, msg = f
    if not (epoch.isascii() and epoch.isdigit() and len(epoch) <= 11):
        return f"parse: not a BGL RAS line (epoch field {epoch[:20]!r} is not a number)"
    if int(epoch) > MAX_EPOCH_S:
        return f"parse: epoch {epoch} out of range (after 2262)"
    m = re.fullmatch(r"\d{4}-\d\d-\d\d-\d\d\.\d\d\.\d\d\.(\d{6})", ts)
    if not m:
        return f"parse: bad BGL timestamp field {ts[:40]!r}"
    if level not in BGL_SEVERITY:
        return f"parse: unknown BGL level {level[:20]!r}"
    return {
        "time": int(epoch) * _NS + int(m[1]) * 1000,
        "host": loc,
        "severity": BGL_SEVERITY[level],
        "app": comp,
        "message": msg,
        "alert_label": None if label == "-" else label,
        "source_format": "bgl",
    }


def hpc_fast(block: Block, idx: np.ndarray, ctx: ParseContext) -> tuple[dict, np.ndarray]:
    """Vectorised LANL HPC parse; returns (columns of accepted lines, accepted mask)."""
    buf = block.buf
    s = block.starts[idx]
    e = block.ends[idx]
    sp, ok = split_tokens(block, idx, s, 6)
    _, lok = var_digits(buf, s, sp[:, 0], 18)
    epoch, eok = var_digits(buf, sp[:, 3] + 1, sp[:, 4], 11)
    neg = buf[sp[:, 4] + 1] == 45
    _, fok = var_digits(buf, sp[:, 4] + 1 + neg, sp[:, 5], 4)
    ok &= lok & eok & fok & (epoch <= MAX_EPOCH_S)
    k = ok
    cols = {
        "time": epoch[k] * _NS,
        "host": substrings(block, sp[k, 0] + 1, sp[k, 1]),
        "app": substrings(block, sp[k, 1] + 1, sp[k, 2]),
        "msgid": substrings(block, sp[k, 2] + 1, sp[k, 3]),
        "message": substrings(block, sp[k, 5] + 1, e[k]),
        "source_format": const_str("hpc", int(k.sum())),
    }
    return cols, ok


_HPC_RE = re.compile(r"^(\d+) (\S+) (\S+) (\S+) (\d+) (-?\d+) ?(.*)$", re.S | re.A)


def hpc_slow(line: str, ctx: ParseContext) -> dict | str:
    """Per-line LANL HPC parser (reference for the vectorised pass); raw row or reject reason."""
    m = _HPC_RE.match(line)
    if not m:
        return "parse: not a LANL HPC log line (expected 'logid node component state epoch flag message')"
    if len(m[5]) > 11 or int(m[5]) > MAX_EPOCH_S:
        return f"parse: epoch {m[5][:24]} out of range (after 2262)"
    return {
        "time": int(m[5]) * _NS,
        "host": m[2],
        "app": m[3],
        "msgid": m[4],
        "message": m[7],
        "source_format": "hpc",
    }


_BGL_SNIFF = re.compile(rb"^\S+ \d{9,11} \d{4}\.\d\d\.\d\d \S+ \d{4}-\d\d-\d\d-\d\d\.\d\d\.\d\d\.\d{6} \S+ \S+ \S+ [A-Z]+ ")
_HPC_SNIFF = re.compile(rb"^\d+ \S+ \S+ \S+ \d{9,11} -?\d+ ")


def bgl_sniff(head: bytes) -> float:
    """Share of the first lines that look like BGL RAS lines."""
    return sniff_share(head, _BGL_SNIFF)


def hpc_sniff(head: bytes) -> float:
    """Share of the first lines that look like LANL HPC event lines."""
    return sniff_share(head, _HPC_SNIFF)
