"""Large string value sets (known nodes) go to GX as one anchored regex: same rows pass as with the set."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from nodewatch.schemas.gx_suite import LARGE_STRING_SET, build_suite, set_regex
from nodewatch.schemas.table import Column, Expectation, TableSchema
from nodewatch.tasks.core.validate import BatchValidator, gx_context

KNOWN = [f"cn{i:04d}" for i in range(300)] + ["a.b", "x|y", "cn1", "login-1.example"]
SCHEMA = TableSchema(
    name="large_set_check",
    columns=(Column("time", pa.int64()), Column("node", pa.string())),
    time_column="time",
    unique_key=("node", "time"),
)
IN_SET = Expectation("ExpectColumnValuesToBeInSet", {"column": "node", "value_set": KNOWN})


def test_set_regex_matches_exactly_the_values():
    rx = re.compile(set_regex(KNOWN))
    probes = KNOWN + ["cn00", "cn03000", "axb", "x", "y", "cn1\n", " cn1", "cn1 ", "CN0001", "", "a.b.c", "cn10"]
    for p in probes:
        assert bool(rx.search(p)) == (p in KNOWN), p


def test_large_string_sets_become_a_regex_small_ones_stay_sets():
    gx_context()  # GX builds suites only with a context
    suite = build_suite("s", [IN_SET, Expectation("ExpectColumnValuesToBeInSet", {"column": "node", "value_set": KNOWN[:3]})])
    types = sorted(type(e).__name__ for e in suite.expectations)
    assert types == ["ExpectColumnValuesToBeInSet", "ExpectColumnValuesToMatchRegex"]
    rx = next(e for e in suite.expectations if type(e).__name__ == "ExpectColumnValuesToMatchRegex")
    assert rx.meta["label"].startswith("expect_column_values_to_be_in_set(node")
    assert f"{len(KNOWN)} values" in rx.description
    assert len(KNOWN) > LARGE_STRING_SET


def test_rows_outcome_equals_set_membership():
    rng = np.random.default_rng(3)
    candidates = KNOWN + ["cn9999", "ghost", "cn1\n", "a-b", "x", "cn00001", None]
    nodes = [candidates[i] for i in rng.integers(0, len(candidates), 5000)]
    batch = pa.table({"time": pa.array(np.arange(5000), pa.int64()), "node": pa.array(nodes, pa.string())})
    v = BatchValidator(SCHEMA, [IN_SET])
    for distinct in (True, False):
        ok, reasons = v.validate(batch, distinct=distinct)
        expected = np.array([n is None or n in KNOWN for n in nodes])  # nulls are missing values, not unexpected
        assert (ok == expected).all()
        bad = reasons.to_pylist()
        assert all(r.startswith("expect_column_values_to_be_in_set(node") for r, k in zip(bad, ok, strict=True) if not k)


def test_set_regex_prefix_tree_matches_exactly_random_sets():
    """The prefix-tree form: values that are prefixes of others, regex metacharacters, the empty string."""
    import random

    rng = random.Random(7)
    alphabet = "ab.-]\\^[|x1"
    for _ in range(200):
        values = {"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 5))) for _ in range(rng.randrange(1, 40))}
        rx = re.compile(set_regex(values))
        probes = list(values) + ["".join(rng.choice(alphabet + "\n") for _ in range(rng.randrange(0, 6))) for _ in range(100)]
        for p in probes:
            assert bool(rx.search(p)) == (p in values), (sorted(values), p)
    assert len(set_regex(f"n{i:05d}" for i in range(1000))) < 2000  # vs ~7,000 for the flat alternation
