"""Generate the bad-input corpus of the syslog, alerts and tickets parsers.

Nothing of it is committed: tests call :func:`make_corpus` into a temporary directory, and
``python tests/bad_inputs/make_corpus.py OUT_DIR`` writes the same files for a person to look at.

Each :class:`Case` is one input file plus its exact expected outcome at parser level:

* ``error``: the parser raises :class:`nodewatch.tasks.ingest.inputs.InputError` whose message matches this
  regex (it names the file and line); ``rows_before_error`` says rows read before must be kept;
* otherwise ``valid`` (line numbers that must become rows) and ``rejects`` (line -> exact reason);
  every other non-empty line of the file is in one of the two, so no row is silently lost;
* ``quarantine`` (line -> expected reason prefix) lists rows the parser passes through intact and the
  pipeline's validation must quarantine (range, future / pre-1990 time, unknown node);
  ``duplicates`` is the number of rows the pipeline must count as duplicates.

Times are fixed (2026-01-01 UTC and later hours of that day), the random parts seeded, so the corpus
is identical on every run.
"""

from __future__ import annotations

import gzip
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
REFERENCE = T0 + 2 * 86400  # mtime of RFC 3164 files: year inference puts "Jan  1" lines in 2026
KNOWN_NODES = ("cn001", "cn002", "cn003", "cn004")
MAX_LINE = 1 << 20


@dataclass(frozen=True)
class Case:
    """One bad-input file and its expected outcome (see module doc)."""

    name: str
    source: str
    fmt: str
    filename: str
    data: bytes
    error: str | None = None
    rows_before_error: bool = False
    valid: tuple[int, ...] = ()
    rejects: dict[int, str] = field(default_factory=dict)
    quarantine: dict[int, str] = field(default_factory=dict)
    duplicates: int = 0
    messages: dict[int, str] = field(default_factory=dict)
    """line -> exact staged ``message`` (encodings)."""


def rfc5424(i: int, node: str = "cn001", msg: str | None = None, ts: str | None = None, pri: str = "165") -> str:
    """A valid RFC 5424 line ``i`` seconds after T0 (or at ``ts``)."""
    if ts is None:
        h, rem = divmod(i, 3600)
        ts = f"2026-01-01T{h:02d}:{rem // 60:02d}:{rem % 60:02d}.{i % 1000:03d}Z"
    return f"<{pri}>1 {ts} {node} slurmd {1000 + i} - - {msg if msg is not None else f'job {i} step completed'}"


def rfc3164(i: int, node: str = "cn002", msg: str | None = None) -> str:
    """A valid rsyslog-file RFC 3164 line ``i`` seconds after T0."""
    h, rem = divmod(i, 3600)
    return f"Jan  1 {h:02d}:{rem // 60:02d}:{rem % 60:02d} {node} kernel: {msg if msg is not None else f'event {i}'}"


def _lines(lines: list[str | bytes]) -> bytes:
    return b"".join((x if isinstance(x, bytes) else x.encode("utf-8")) + b"\n" for x in lines)


def cases() -> list[Case]:
    """Every case of the corpus."""
    rng = random.Random(20260101)
    out: list[Case] = []

    # --- truncated gzip: 20k lines, compressed stream cut at 60 %
    full = gzip.compress(_lines([rfc5424(i) for i in range(20000)]), compresslevel=6, mtime=0)
    out.append(Case("truncated_gzip", "syslog", "rfc5424", "trunc.log.gz", full[: int(len(full) * 0.6)],
                    error=r"trunc\.log\.gz: stream ends unexpectedly after line [1-9]\d*: truncated archive",
                    rows_before_error=True))

    # --- random bytes (forced format): a file error, not a traceback
    out.append(Case("random_bytes", "syslog", "rfc3164", "random.bin", bytes(rng.getrandbits(8) for _ in range(4096)),
                    error=r"^random\.bin:\d+: .*wrong --format or not a log file"))
    out.append(Case("random_bytes_nagios", "alerts", "nagios", "random.nag", bytes(rng.getrandbits(8) for _ in range(4096)),
                    error=r"^random\.nag:\d+: .*wrong --format"))

    # --- Latin-1 and mixed encodings: decoded per line (UTF-8, else Latin-1), no byte lost
    out.append(Case(
        "latin1_and_mixed", "syslog", "rfc3164", "mixed.log",
        _lines([rfc3164(1, msg="caf\u00e9 ok"), rfc3164(2, msg="caf\u00e9 latin").encode("latin-1"),
                rfc3164(3, msg="\u00fcber utf8"), rfc3164(4, node="h\u00f4te", msg="x").encode("latin-1"),
                b"Jan  1 00:00:05 cn002 kernel: cp1252 \x93quoted\x94"]),
        valid=(1, 2, 3, 5), rejects={4: "parse: invalid host name 'h\u00f4te' (non-ASCII)"},
        messages={1: "caf\u00e9 ok", 2: "caf\u00e9 latin", 3: "\u00fcber utf8", 5: "cp1252 \u0093quoted\u0094"},
    ))

    # --- a 1.5 MB single line between valid lines
    out.append(Case("one_mb_line", "syslog", "rfc5424", "long.log",
                    _lines([rfc5424(1), rfc5424(2, msg="x" * (3 * MAX_LINE // 2)), rfc5424(3)]),
                    valid=(1, 3), rejects={2: f"parse: line longer than {MAX_LINE} bytes"}))
    out.append(Case("one_mb_line_nagios", "alerts", "nagios", "long.nag",
                    _lines([f"[{T0}] HOST ALERT: cn001;DOWN;HARD;1;x",
                            f"[{T0 + 1}] HOST ALERT: cn001;UP;HARD;1;" + "y" * (MAX_LINE + 10),
                            f"[{T0 + 2}] HOST ALERT: cn001;UP;HARD;1;ok"]),
                    valid=(1, 3), rejects={2: "parse: line longer than 1048576 bytes"}))

    # --- NUL bytes inside a line
    out.append(Case("nul_bytes", "syslog", "rfc5424", "nul.log",
                    _lines([rfc5424(1), rfc5424(2, msg="bad\x00byte"), rfc5424(3)]),
                    valid=(1, 3), rejects={2: "parse: NUL byte in line"}))
    out.append(Case("nul_bytes_tickets", "tickets", "tickets_csv", "nul.csv",
                    _lines(["ticket_id,node,alert_time,false_positive,opened", f"T1,cn001,{T0},no,{T0}",
                            f"T2,cn\x00001,{T0},no,{T0}", f"T3,cn002,{T0},yes,{T0}"]),
                    valid=(2, 4), rejects={3: "parse: NUL byte in line"}))

    # --- duplicate rows (the pipeline counts 2 duplicates) and CRLF line ends
    dup = rfc5424(7, node="cn003")
    out.append(Case("duplicate_rows", "syslog", "rfc5424", "dup.log",
                    (_lines([dup, rfc5424(8, node="cn003"), dup, dup])).replace(b"\n", b"\r\n"),
                    valid=(1, 2, 3, 4), duplicates=2))

    # --- out-of-range values
    out.append(Case(
        "out_of_range", "syslog", "rfc5424", "range.log",
        _lines([rfc5424(1, pri="999"), rfc5424(2, pri="9999"), rfc5424(3, ts="2026-13-01T00:00:00Z"),
                rfc5424(4, ts="2026-01-01T24:00:00Z"), rfc5424(5), rfc5424(6, ts="9999-12-31T23:59:59Z")]),
        valid=(1, 5),
        rejects={2: "parse: bad PRI <9999> (expected 1-3 digits)", 3: "parse: invalid date/time '2026-13-01T00:00:00Z'",
                 4: "parse: invalid date/time '2026-01-01T24:00:00Z'",
                 6: "parse: year 9999 outside 1678-2261 (not representable in nanoseconds)"},
        quarantine={1: "expect_column_values_to_be_between(facility"},
    ))
    bgl_ok = ("- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO "
              "instruction cache parity error corrected")
    out.append(Case("bgl_severity_9", "syslog", "bgl", "bgl.log",
                    _lines([bgl_ok, bgl_ok.replace(" INFO ", " SEVERITY9 "), bgl_ok.replace("1117838570", "99999999999")]),
                    valid=(1,), rejects={2: "parse: unknown BGL level 'SEVERITY9'",
                                         3: "parse: epoch 99999999999 out of range (after 2262)"}))
    out.append(Case("nagios_epoch_overflow", "alerts", "nagios", "epoch.nag",
                    _lines([f"[{T0}] HOST ALERT: cn001;DOWN;HARD;1;x", "[99999999999] HOST ALERT: cn001;UP;HARD;1;x"]),
                    valid=(1,), rejects={2: "parse: epoch 99999999999 out of range (after 2262)"}))

    # --- timestamps in the future / before 1990, clock jumps (passed through, validation decides)
    out.append(Case(
        "time_range", "syslog", "rfc5424", "times.log",
        _lines([rfc5424(1), rfc5424(2, ts="2099-01-01T00:00:00Z"), rfc5424(3, ts="1985-06-01T00:00:00Z"),
                rfc5424(4, ts="1970-01-01T00:00:00Z"), rfc5424(5)]),
        valid=(1, 2, 3, 4, 5),
        quarantine={2: "expect_column_values_to_be_between(time", 3: "expect_column_values_to_be_between(time",
                    4: "expect_column_values_to_be_between(time"},
    ))
    out.append(Case("clock_jump", "syslog", "rfc5424", "jump.log",
                    _lines([rfc5424(7200), rfc5424(10), rfc5424(7201), rfc5424(86000), rfc5424(7202)]),
                    valid=(1, 2, 3, 4, 5)))

    # --- unknown nodes (valid names, not in the topology)
    out.append(Case("unknown_node", "syslog", "rfc3164", "unknown.log",
                    _lines([rfc3164(1), rfc3164(2, node="cn999"), rfc3164(3, node="ghost.example.org")]),
                    valid=(1, 2, 3),
                    quarantine={2: "expect_column_values_to_be_in_set(node", 3: "expect_column_values_to_be_in_set(node"}))

    # --- hostile node names
    long_name = "n" * 300
    out.append(Case(
        "hostile_names", "syslog", "rfc5424", "hostile.log",
        _lines([rfc5424(1, node="../../etc"), rfc5424(2, node=long_name), rfc5424(3, node="cn0\u043e1"),
                rfc5424(4, node="cn\u212a01"), rfc5424(5, node="cn%2F..%2F"), rfc5424(6)]),
        valid=(6,),
        rejects={1: "parse: invalid host name '../../etc'", 2: "parse: invalid host name '" + "n" * 80 + "'...",
                 3: "parse: invalid host name 'cn0\u043e1' (non-ASCII)", 4: "parse: invalid host name 'cn\u212a01' (non-ASCII)",
                 5: "parse: invalid host name 'cn%2F..%2F'"},
    ))
    out.append(Case("hostile_names_nagios", "alerts", "nagios", "hostile.nag",
                    _lines([f"[{T0}] HOST ALERT: ../../etc;DOWN;HARD;1;x", f"[{T0}] HOST ALERT: cn001;DOWN;HARD;1;x"]),
                    valid=(2,), rejects={1: "parse: invalid host name '../../etc'"}))

    # --- wrong column sets
    out.append(Case("tickets_wrong_columns", "tickets", "tickets_csv", "cols.csv",
                    _lines(["id,host,fp,opened_at", f"T1,cn001,no,{T0}"]),
                    error=r"^cols\.csv:1: header lacks column\(s\) false_positive, node, opened, ticket_id, "
                          r"alert_id or alert_time"))
    out.append(Case("alerts_csv_wrong_columns", "alerts", "alerts_csv", "cols2.csv",
                    _lines(["time,node,service,state", f"{T0},cn001,x,OK"]),
                    error=r"^cols2\.csv:1: header lacks column\(s\) attempt, output, state_type"))
    out.append(Case("tickets_ragged_rows", "tickets", "tickets_csv", "ragged.csv",
                    _lines(["ticket_id,node,alert_time,false_positive,opened", f"T1,cn001,{T0},no",
                            f"T2,cn001,{T0},no,{T0},extra", f"T3,cn001,{T0},no,{T0}"]),
                    valid=(4,), rejects={2: "parse: 4 fields, header has 5", 3: "parse: 6 fields, header has 5"}))
    # --- rsyslog RFC 3339 file format: every rule in one file (the parser passes range problems through)
    rs = "2026-01-01T00:00:01.250+01:00 cn001 sshd[42]: Accepted publickey for ops"
    out.append(Case(
        "rsyslog_mixed", "syslog", "rsyslog", "rsyslog.log",
        _lines([rs, "2099-01-01T00:00:00Z cn001 kernel: from the future", rs,
                "2026-01-01T00:00:02Z ../../etc kernel: hostile", "2026-01-01T00:00:03+0100 cn001 kernel: bad offset",
                "2026-01-01T00:00:04Z cn999 kernel: unknown node", "2026-01-01T00:00:05Z",
                "2026-01-01T00:00:06.1234567891Z cn001 kernel: ten fraction digits",
                "1985-06-01T00:00:00Z cn002 kernel: before 1990"]),
        valid=(1, 2, 3, 6, 9),
        rejects={4: "parse: invalid host name '../../etc'",
                 5: "parse: bad RFC 3339 timestamp '2026-01-01T00:00:03+0100'",
                 7: "parse: not an rsyslog file-format line (expected 'TIMESTAMP host tag: message')",
                 8: "parse: bad RFC 3339 timestamp '2026-01-01T00:00:06.1234567891Z'"},
        quarantine={2: "expect_column_values_to_be_between(time", 6: "expect_column_values_to_be_in_set(node",
                    9: "expect_column_values_to_be_between(time"},
        duplicates=1, messages={1: "Accepted publickey for ops"},
    ))
    out.append(Case("rsyslog_given_rfc3164", "syslog", "rsyslog", "bsd_as_rsyslog.log",
                    _lines([rfc3164(1), rfc3164(2)]),
                    error=r"^bsd_as_rsyslog\.log:1: not an rsyslog file-format line .*wrong --format"))
    out.append(Case("syslog_wrong_format", "syslog", "rfc5424", "csv_as_syslog.log",
                    _lines(["time,node,metric,value", f"{T0},cn001,temp,40"]),
                    error=r"^csv_as_syslog\.log:1: not an RFC 5424 line .*wrong --format"))
    return out


def make_corpus(out_dir: str | os.PathLike[str]) -> dict[str, tuple[Case, Path]]:
    """Write every case (plus a byte-identical copy of ``duplicate_rows`` for the duplicate-file case)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, tuple[Case, Path]] = {}
    for c in cases():
        p = out / c.filename
        p.write_bytes(c.data)
        os.utime(p, (REFERENCE, REFERENCE))
        written[c.name] = (c, p)
    dup_case, dup_path = written["duplicate_rows"]
    copy = out / "dup-copy.log"
    copy.write_bytes(dup_path.read_bytes())
    os.utime(copy, (REFERENCE, REFERENCE))
    written["duplicate_file"] = (dup_case, copy)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/bad_inputs/make_corpus.py OUT_DIR")
    for name, (_case, path) in make_corpus(sys.argv[1]).items():
        print(f"{name:24s} {path}")
