"""CFDR / Loghub supercomputer syslogs: Thunderbird, Spirit and Liberty (format ``cfdr``).

The three Sandia systems of Oliner & Stearley ("What supercomputers say", DSN 2007; USENIX CFDR; Loghub
``Thunderbird``) share one layout::

    <alert tag or -> <epoch s> <YYYY.MM.DD> <node> <Mmm> <d> <hh:mm:ss> <location> <tag[pid]:> <message>
    - 1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond[2916]: (root) CMD (run-parts /etc/cron.hourly)
    KERNDTLB 1131566478 2005.11.09 dn8 Nov 9 12:01:18 dn8/dn8 kernel: ...

* time = the epoch seconds (UTC; the ``Mmm d hh:mm:ss`` fields are the collector's local time and are only
  checked for shape).
* node = the 4th field, normalised like a host name (lower case, domain stripped, topology aliases);
  ``alert_label`` = the first field unless ``-`` (the ground-truth alert category).
* ``<location> tag[pid]: message`` is split like the RFC 3164 file form
  (:func:`nodewatch.tasks.ingest.syslog_rfc3164.host_tag_fast`): the location (``dn228/dn228``,
  ``src@tbird-admin1``) is dropped, a first word ending in ``:`` is the tag (``crond(pam_unix)[2915]:`` ->
  app ``crond(pam_unix)``, pid 2915), otherwise app/pid are null and the rest is the message.
* No PRI: facility and severity are null.
"""

from __future__ import annotations

import re

import numpy as np

from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.syslog_blocks import (
    MAX_EPOCH_S,
    Block,
    const_str,
    masked,
    optional_substrings,
    split_tokens,
    substrings,
    var_digits,
)
from nodewatch.tasks.ingest.syslog_rfc3164 import MONTHS, host_tag_columns, host_tag_fast, host_tag_slow, sniff_share

FORMAT = "cfdr"
_MONTH_CODES = np.array([(ord(m[0]) << 16) | (ord(m[1]) << 8) | ord(m[2]) for m in MONTHS], np.int64)
_NS = 1_000_000_000


def fast(block: Block, idx: np.ndarray, ctx: ParseContext) -> tuple[dict, np.ndarray]:
    """Vectorised parse of well-formed lines; returns (columns of accepted lines, accepted mask)."""
    buf = block.buf
    s = block.starts[idx]
    e = block.ends[idx]
    sp, ok = split_tokens(block, idx, s, 7)
    epoch, eok = var_digits(buf, sp[:, 0] + 1, sp[:, 1], 11)
    ok &= eok & (epoch <= MAX_EPOCH_S)
    ok &= (sp[:, 2] - sp[:, 1] == 11) & (sp[:, 4] - sp[:, 3] == 4) & (sp[:, 6] - sp[:, 5] == 9)
    ok &= (sp[:, 3] - sp[:, 2] > 1) & (sp[:, 0] > s)
    mpos = np.where(ok, sp[:, 3] + 1, 0)
    code = (buf[mpos].astype(np.int64) << 16) | (buf[mpos + 1].astype(np.int64) << 8) | buf[mpos + 2]
    ok &= np.isin(code, _MONTH_CODES)
    colon = np.where(ok, sp[:, 5] + 3, 0)
    ok &= (buf[colon] == 58) & (buf[np.where(ok, sp[:, 5] + 6, 0)] == 58)
    rest = np.where(ok, sp[:, 6] + 1, e)
    pos, hok = host_tag_fast(block, np.minimum(rest, e), e)
    ok &= hok & (rest < e)
    k = ok
    label_nil = (sp[:, 0] - s == 1) & (buf[s] == 45)
    ht = host_tag_columns(block, pos, e, k)
    m = int(k.sum())
    none = np.ones(m, bool)
    cols = {
        "time": epoch[k] * _NS,
        "host": substrings(block, sp[k, 2] + 1, sp[k, 3]),
        "app": ht["app"],
        "pid": ht["pid"],
        "message": ht["message"],
        "facility": masked(np.zeros(m, np.int64), none),
        "severity": masked(np.zeros(m, np.int64), none),
        "alert_label": optional_substrings(block, s[k], sp[k, 0], label_nil[k]),
        "source_format": const_str(FORMAT, m),
    }
    return cols, ok


_LINE_RE = re.compile(
    r"^(?P<label>\S+) (?P<epoch>\d+) (?P<date>\d{4}\.\d\d\.\d\d) (?P<node>\S+) (?P<mon>[A-Za-z]{3}) +(?P<day>\d{1,2}) "
    r"(?P<hms>\d\d:\d\d:\d\d)(?: (?P<rest>.*))?$", re.S | re.A,
)


def slow(line: str, ctx: ParseContext) -> dict | str:
    """Per-line parser (the reference for :func:`fast`): raw row or reject reason."""
    m = _LINE_RE.match(line)
    if not m:
        return ("parse: not a CFDR (Thunderbird/Spirit/Liberty) line "
                "(expected 'label epoch YYYY.MM.DD node Mmm d hh:mm:ss location tag: message')")
    if len(m["epoch"]) > 11 or int(m["epoch"]) > MAX_EPOCH_S:
        return f"parse: epoch {m['epoch'][:24]} out of range (after 2262)"
    if m["mon"] not in MONTHS:
        return f"parse: unknown month {m['mon']!r}"
    rest = m["rest"] or ""
    if not rest.strip() or rest.startswith(" "):
        return "parse: no location and message after the time"
    ht = host_tag_slow(rest)  # the location takes the host slot of 'host tag: message'
    return {
        "time": int(m["epoch"]) * _NS,
        "host": m["node"],
        "app": ht["app"],
        "pid": ht["pid"],
        "message": ht["message"],
        "facility": None,
        "severity": None,
        "alert_label": None if m["label"] == "-" else m["label"],
        "source_format": FORMAT,
    }


_SNIFF = re.compile(rb"^\S+ \d{9,11} \d{4}\.\d\d\.\d\d \S+ [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d ")


def sniff(head: bytes) -> float:
    """Share of the first lines that look like CFDR Thunderbird/Spirit/Liberty lines."""
    return sniff_share(head, _SNIFF)
