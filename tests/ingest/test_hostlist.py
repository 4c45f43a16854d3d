"""Slurm hostlist expansion: expected values written out by hand from Slurm's documented behaviour."""

from __future__ import annotations

import pytest

from nodewatch.tasks.ingest.hostlist import MAX_HOSTS, HostlistError, compress_hostlist, expand_hostlist


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("node[001-004,017],gpu[1-2]", ["node001", "node002", "node003", "node004", "node017", "gpu1", "gpu2"]),
        ("b[002-003]", ["b002", "b003"]),
        ("cpn-v09-10", ["cpn-v09-10"]),
        ("n[1-10]", [f"n{i}" for i in range(1, 11)]),
        ("n[08-11]", ["n08", "n09", "n10", "n11"]),
        ("n[98-101]", ["n98", "n99", "n100", "n101"]),
        ("n[5]", ["n5"]),
        ("n[1-2]x", ["n1x", "n2x"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("cpn-u23-[17,25]", ["cpn-u23-17", "cpn-u23-25"]),
        ("a, b\tc", ["a", "b", "c"]),
        ("n1,n1", ["n1", "n1"]),
        ("(null)", []),
        ("None assigned", []),
        ("", []),
        ("  ", []),
    ],
)
def test_expand(expr, expected):
    assert expand_hostlist(expr) == expected


def test_real_multirange_from_sacct_sample():
    expr = (
        "cpn-q06-04-[01-02],cpn-q07-04-[01-02],cpn-q08-04-[01-02],cpn-q09-04-[01-02],"
        "cpn-u22-[16-17],cpn-u23-[17,25],cpn-u24-[18-19],cpn-u25-[20,36]"
    )
    hosts = expand_hostlist(expr)
    assert len(hosts) == 16  # NNodes of job 9067954 in sacct_submitline_multiline.log
    assert hosts[:3] == ["cpn-q06-04-01", "cpn-q06-04-02", "cpn-q07-04-01"]
    assert hosts[-1] == "cpn-u25-36"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("node[1-3", "unbalanced '['"),
        ("node1-3]", "']' without '['"),
        ("node[[1-3]]", "nested '['"),
        ("node[]", "empty brackets"),
        ("node[3-1]", "reversed range '3-1'"),
        ("node[a-b]", "bad range 'a-b'"),
        ("node[1-2-3]", "bad range '1-2-3'"),
        ("node[1,,2]", "bad range ''"),
        ("[1-2]", "no prefix before '['"),
        ("n[0-1000000]", "more than 1,000,000 hosts"),
        ("a[0-999]b[0-999]c[0-9]", "expands to more than 1,000,000 hosts"),
    ],
)
def test_malformed(expr, message):
    with pytest.raises(HostlistError, match=None) as info:
        expand_hostlist(expr)
    assert message in str(info.value)
    assert repr(expr) in str(info.value)
    assert "\n" not in str(info.value)


def test_limit_is_inclusive():
    assert len(expand_hostlist(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS


def test_hostlist_error_is_value_error():
    assert issubclass(HostlistError, ValueError)


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        (["node001", "node002", "node003", "node004", "node017", "gpu1", "gpu2"], "node[001-004,017],gpu[1-2]"),
        (["n1"], "n1"),
        (["login", "n9", "n10"], "login,n9,n10"),
        (["n3", "n1", "n2", "n2"], "n[1-3]"),
    ],
)
def test_compress(hosts, expected):
    out = compress_hostlist(hosts)
    assert out == expected
    assert sorted(set(expand_hostlist(out))) == sorted(set(hosts))
