"""CFDR Thunderbird/Spirit/Liberty syslog format (tasks/ingest/syslog_cfdr.py): fields, fast == slow, bad inputs, pipeline.

Sample lines follow the layout of the Loghub ``Thunderbird_2k.log`` / CFDR files (the shared data holds no copy,
so the lines are written here in that layout; see tests/fixtures/README.md for the other syslog fixtures).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from syslog_helpers import _compare_fast_slow, reasons_of, run, ts

from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest import syslog_cfdr
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import InputError
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.syslog import FORMATS, parse_cfdr

THUNDERBIRD = [
    "- 1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond(pam_unix)[2915]: session closed for user root",
    "- 1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond[2916]: (root) CMD (run-parts /etc/cron.hourly)",
    "KERNDTLB 1131566478 2005.11.09 dn8 Nov 9 12:01:18 dn8/dn8 kernel: data TLB error interrupt",
    "- 1131566483 2005.11.09 tbird-admin1 Nov 9 12:01:23 local@tbird-admin1 /apps/x86_64/system/ganglia: gmetad ok",
    "- 1104566401 2005.01.01 sn373 Jan 1 00:00:01 sn373/sn373 ntpd[2051]: synchronized to 10.0.0.1, stratum 2",
    "- 1102911142 2004.12.12 ln186 Dec 12 20:12:22 ln186/ln186 no tag here at all",
]


def test_fields_by_hand():
    rows, rej, _ = run(parse_cfdr, ("\n".join(THUNDERBIRD) + "\n").encode())
    assert rej.num_rows == 0 and rows.num_rows == 6
    r = rows.to_pylist()
    assert r[0]["time"] == ts("2005-11-09T20:01:01")  # epoch field, UTC (the Nov 9 12:01:01 is local time)
    assert (r[0]["node"], r[0]["app"], r[0]["pid"], r[0]["message"]) == (
        "dn228", "crond(pam_unix)", 2915, "session closed for user root")
    assert r[0]["alert_label"] is None and r[2]["alert_label"] == "KERNDTLB"
    assert (r[2]["app"], r[2]["pid"], r[2]["message"]) == ("kernel", None, "data TLB error interrupt")
    assert r[3]["node"] == "tbird-admin1" and r[3]["app"] == "/apps/x86_64/system/ganglia"
    assert r[5]["app"] is None and r[5]["message"] == "no tag here at all"
    assert {x["source_format"] for x in r} == {"cfdr"}
    assert all(x["facility"] is None and x["severity"] is None for x in r)


def _random_cfdr(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        epoch = rng.randrange(1_000_000_000, 1_200_000_000)
        d = datetime.fromtimestamp(epoch, UTC)
        label = rng.choice(["-", "-", "KERNDTLB", "ECC"])
        node = rng.choice(["dn228", "sn373", "ln186", "tbird-sm1", "CN01.example.org"])
        day = f"{d.day}" if rng.random() < 0.8 else f" {d.day}"  # some collectors pad single-digit days
        loc = rng.choice([f"{node}/{node}", f"src@{node}"])
        tail = rng.choice([f"sshd[{rng.randrange(99999)}]: Accepted key for u{i}", "kernel: ", "kernel: x  y",
                           "plain message", "crond(pam_unix)[12]: session opened", "app:x rest"])
        out.append(f"{label} {epoch} {d:%Y.%m.%d} {node} {d:%b} {day} {d:%H:%M:%S} {loc} {tail}")
    return out


def test_vectorised_pass_matches_reference_parser():
    _compare_fast_slow(syslog_cfdr, _random_cfdr(random.Random(11), 3000), ParseContext(name="x"), 0.7)


BAD = {
    # line -> expected reason prefix (each line in a file with one good line first)
    "- 99999999999999 2005.11.09 dn1 Nov 9 12:01:01 dn1/dn1 x: y": "parse: epoch",
    "- 1131566461 2005.11.09 dn1 Foo 9 12:01:01 dn1/dn1 x: y": "parse: unknown month",
    "- 1131566461 2005.11.09 dn1 Nov 9 12:01:01": "parse: no location",
    "- 1131566461 2005.11.09 dn1 Nov 9": "parse: not a CFDR",
    "- 11315x6461 2005.11.09 dn1 Nov 9 12:01:01 dn1/dn1 x: y": "parse: not a CFDR",
    "- 1131566461 2005.11.09 ../../etc Nov 9 12:01:01 a/a x: y": "",
    "- 1131566461 2005.11.09 dn\u202e1 Nov 9 12:01:01 a/a x: y": "",
    "garbage": "parse: not a CFDR",
}


def test_bad_lines_rejected_with_reasons():
    good = THUNDERBIRD[0]
    lines = [good, *BAD]
    rows, rej, _ = run(parse_cfdr, ("\n".join(lines) + "\n").encode())
    why = reasons_of(rej)
    assert rows.num_rows == 1 and rej.num_rows == len(BAD)
    for i, (line, prefix) in enumerate(BAD.items(), start=2):
        assert why[i].startswith(prefix), (line, why[i])


def test_garbage_file_and_wrong_encoding():
    with pytest.raises(InputError, match="no line of the first .* is CFDR"):
        run(parse_cfdr, b"\x00\x01\x02\xff\xfe binary\n" * 5)
    latin1 = ("- 1131566461 2005.11.09 dn1 Nov 9 12:01:01 dn1/dn1 x: caf\xe9\n").encode("latin-1")
    rows, rej, _ = run(parse_cfdr, latin1 + THUNDERBIRD[1].encode() + b"\n")
    assert rows.num_rows + rej.num_rows == 2  # every line accounted for, none crashes the parse
    truncated = (THUNDERBIRD[0] + "\n" + THUNDERBIRD[1][:30]).encode()  # cut mid-line, no final newline
    rows, rej, _ = run(parse_cfdr, truncated)
    assert rows.num_rows == 1 and rej.num_rows == 1


def test_sniff_picks_cfdr_and_no_other_format_claims_it():
    head = ("\n".join(THUNDERBIRD) + "\n").encode()
    scores = {f.name: f.sniff(head) for f in FORMATS}
    assert scores["cfdr"] == 1.0
    assert all(v < 0.5 for k, v in scores.items() if k != "cfdr"), scores
    assert syslog_cfdr.sniff(b"- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 x\n") == 0.0


def test_auto_detected_through_the_ingest_pipeline(tmp_path):
    store = Store(str(tmp_path / "s"))
    f = tmp_path / "thunderbird.log"
    f.write_text("\n".join(THUNDERBIRD + [THUNDERBIRD[0]]) + "\n", encoding="utf-8")  # last line a duplicate
    rec = RunRecorder(store, "test", {})
    res = ingest_files(store, sources()["syslog"], [f], rec, data_docs=False)
    rec.finish()
    assert (res.counts.staged, res.counts.duplicates) == (6, 1)
    t = store.read_staged("syslog")
    assert sorted(set(t["node"].to_pylist())) == ["dn228", "dn8", "ln186", "sn373", "tbird-admin1"]
    assert set(t["source_format"].to_pylist()) == {"cfdr"}
