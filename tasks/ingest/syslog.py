"""The ``syslog`` source: RFC 5424, RFC 3164, rsyslog file format, Loghub BGL, LANL HPC and CFDR
Thunderbird/Spirit/Liberty logs -> ``staged/syslog``.

``nodewatch ingest syslog PATHS... [--format auto|rfc5424|rfc3164|rsyslog|bgl|hpc|cfdr]``. Parsing is
vectorised over blocks of lines (see :mod:`nodewatch.tasks.ingest.syslog_blocks`); every line either becomes
a row (with ``source_offset`` = line number) or a reject with a ``parse:`` reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from nodewatch.schemas.syslog import SYSLOG
from nodewatch.tasks.ingest import syslog_cfdr, syslog_loghub, syslog_rfc3164, syslog_rfc5424, syslog_rsyslog
from nodewatch.tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec
from nodewatch.tasks.ingest.syslog_blocks import parse_blocks

_SCHEMA = SYSLOG.arrow_schema()


def parse_rfc5424(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse RFC 5424 syslog lines (see :mod:`nodewatch.tasks.ingest.syslog_rfc5424`)."""
    return parse_blocks(stream, ctx, schema=_SCHEMA, fmt="RFC 5424", fast=syslog_rfc5424.fast, slow=syslog_rfc5424.slow)


def parse_rfc3164(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse RFC 3164 / rsyslog file lines (see :mod:`nodewatch.tasks.ingest.syslog_rfc3164`)."""
    return parse_blocks(stream, ctx, schema=_SCHEMA, fmt="RFC 3164", fast=syslog_rfc3164.fast, slow=syslog_rfc3164.slow)


def parse_rsyslog(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse rsyslog ``RSYSLOG_FileFormat`` lines (see :mod:`nodewatch.tasks.ingest.syslog_rsyslog`)."""
    return parse_blocks(stream, ctx, schema=_SCHEMA, fmt="rsyslog file format", fast=syslog_rsyslog.fast,
                        slow=syslog_rsyslog.slow)


def parse_bgl(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse Loghub Blue Gene/L RAS lines (see :mod:`nodewatch.tasks.ingest.syslog_loghub`)."""
    return parse_blocks(
        stream, ctx, schema=_SCHEMA, fmt="BGL RAS", fast=syslog_loghub.bgl_fast, slow=syslog_loghub.bgl_slow,
        host_rule=syslog_loghub.bgl_host_rule,
    )


def parse_hpc(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse Loghub LANL HPC event lines (see :mod:`nodewatch.tasks.ingest.syslog_loghub`)."""
    return parse_blocks(stream, ctx, schema=_SCHEMA, fmt="LANL HPC", fast=syslog_loghub.hpc_fast, slow=syslog_loghub.hpc_slow)


def parse_cfdr(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse CFDR Thunderbird/Spirit/Liberty lines (see :mod:`nodewatch.tasks.ingest.syslog_cfdr`)."""
    return parse_blocks(stream, ctx, schema=_SCHEMA, fmt="CFDR Thunderbird/Spirit/Liberty", fast=syslog_cfdr.fast,
                        slow=syslog_cfdr.slow)


FORMATS = (
    Format("rfc5424", parse_rfc5424, syslog_rfc5424.sniff, "RFC 5424: <PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG"),
    Format("rfc3164", parse_rfc3164, syslog_rfc3164.sniff, "RFC 3164 / rsyslog file: [<PRI>]Mmm dd hh:mm:ss host tag[pid]: msg"),
    Format("rsyslog", parse_rsyslog, syslog_rsyslog.sniff,
           "rsyslog RSYSLOG_FileFormat: YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+hh:mm) host tag[pid]: msg"),
    Format("bgl", parse_bgl, syslog_loghub.bgl_sniff, "Loghub Blue Gene/L RAS log"),
    Format("hpc", parse_hpc, syslog_loghub.hpc_sniff, "Loghub LANL HPC event log: logid node component state epoch flag msg"),
    Format("cfdr", parse_cfdr, syslog_cfdr.sniff,
           "CFDR/Loghub Thunderbird, Spirit, Liberty: label epoch YYYY.MM.DD node Mmm d hh:mm:ss location tag[pid]: msg"),
)

SOURCES = [
    SourceSpec(
        name="syslog",
        table=SYSLOG,
        formats=FORMATS,
        help=(
            "System logs: RFC 5424, RFC 3164 (year inferred from the file time, --tz for the zone), rsyslog's "
            "RFC 3339 file format (RSYSLOG_FileFormat), "
            "Loghub BGL RAS and LANL HPC logs, CFDR Thunderbird/Spirit/Liberty logs. "
            "Host names are lower-cased, domains stripped and topology "
            "aliases applied; invalid names are quarantined."
        ),
    )
]
