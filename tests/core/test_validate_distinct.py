"""GX on distinct values (tasks/core/distinct.py, used by tasks/core/validate.py) gives every row the outcome of GX
on the full rows."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, Expectation, TableSchema
from nodewatch.tasks.core import validate as V

TS = pa.timestamp("ns", tz="UTC")
T0 = 1_700_000_000 * 10**9
SCHEMA = TableSchema(
    name="distinct_check",
    columns=(
        Column("time", TS),
        Column("end", TS),
        Column("node", pa.string()),
        Column("value", pa.float64()),
        Column("pid", pa.int64()),
        Column("sev", pa.int8()),
        Column("code", pa.string()),
        Column("flag", pa.bool_()),
        Column("message", pa.string()),
        Column("offset", pa.int64()),
        Column("pid2", pa.int64()),
        Column("note", pa.string()),
    ),
    time_column="time",
    unique_key=("node", "time"),
)
EXPECTATIONS = [
    Expectation("ExpectColumnValuesToNotBeNull", {"column": "time"}),
    Expectation("ExpectColumnValuesToBeBetween", {"column": "time", "min_value": T0, "max_value": T0 + 50 * 10**9}),
    Expectation(
        "ExpectColumnValuesToBeBetween", {"column": "time", "min_value": T0 + 10**9, "max_value": None, "strict_min": True}
    ),
    Expectation("ExpectColumnValuesToNotBeNull", {"column": "node"}),
    Expectation("ExpectColumnValuesToMatchRegex", {"column": "node", "regex": NODE_NAME_PATTERN}),
    Expectation("ExpectColumnValueLengthsToBeBetween", {"column": "node", "min_value": 1, "max_value": 8}),
    Expectation("ExpectColumnValuesToNotMatchRegex", {"column": "node", "regex": "^x"}),
    Expectation("ExpectColumnValuesToBeBetween", {"column": "value", "min_value": 0.0, "max_value": 100.0}),
    Expectation("ExpectColumnValuesToBeBetween", {"column": "value", "min_value": -5.0, "max_value": 200.0, "mostly": 0.95}),
    Expectation("ExpectColumnValuesToBeBetween", {"column": "pid", "min_value": 0, "max_value": None}),
    Expectation("ExpectColumnValuesToBeBetween", {"column": "sev", "min_value": 0, "max_value": 7}),
    Expectation("ExpectColumnValuesToBeInSet", {"column": "code", "value_set": ["a", "b", "c"]}),
    Expectation("ExpectColumnValuesToNotBeInSet", {"column": "code", "value_set": ["zz"]}),
    Expectation("ExpectColumnValuesToBeInSet", {"column": "flag", "value_set": [True]}),
    Expectation("ExpectColumnValuesToNotBeNull", {"column": "message"}),
    Expectation("ExpectColumnValuesToNotBeNull", {"column": "value"}),
    Expectation("ExpectColumnValuesToBeNull", {"column": "note", "mostly": 0.5}),
    Expectation("ExpectColumnValuesToBeBetween", {"column": "offset", "min_value": 1, "max_value": None}),
    Expectation("ExpectColumnPairValuesAToBeGreaterThanB", {"column_A": "end", "column_B": "time", "or_equal": True}),
    Expectation(
        "ExpectColumnPairValuesAToBeGreaterThanB",
        {"column_A": "end", "column_B": "time", "ignore_row_if": "both_values_are_missing"},
    ),
    Expectation("ExpectColumnPairValuesToBeEqual", {"column_A": "pid2", "column_B": "pid", "ignore_row_if": "neither"}),
]


def _batch(n: int, seed: int) -> pa.Table:
    """Random rows with nulls, NaN, +-inf, out-of-range and hostile values in every column."""
    rng = np.random.default_rng(seed)

    def nulls(p: float) -> np.ndarray:
        return rng.random(n) < p

    t = T0 + rng.integers(-1, 52, n) * 10**9
    end = t + rng.integers(-3, 5, n) * 10**9
    nodes = np.array(["cn0001", "cn0002", "CN0003", "x9", "../../etc", "cn0001.example.org", "a" * 40, "", "nоde"], object)
    value = rng.choice([0.0, 1.5, 99.9, 100.0, 100.5, -0.0, -1.0, 1e30, math.nan, math.inf, -math.inf, 150.0], n)
    value = np.where(rng.random(n) < 0.5, rng.random(n) * 120 - 10, value)  # many distinct floats too
    pid = rng.integers(-2, 40_000, n)
    return pa.table(
        {
            "time": pa.array(t, pa.int64(), mask=nulls(0.02)).cast(TS),
            "end": pa.array(end, pa.int64(), mask=nulls(0.1)).cast(TS),
            "node": pa.array(np.where(rng.random(n) < 0.9, "cn0001", rng.choice(nodes, n)), pa.string(), mask=nulls(0.03)),
            "value": pa.array(value, pa.float64(), mask=nulls(0.02)),
            "pid": pa.array(pid, pa.int64(), mask=nulls(0.01)),
            "sev": pa.array(rng.integers(-1, 10, n).astype(np.int8), pa.int8(), mask=nulls(0.05)),
            "code": pa.array(rng.choice(np.array(["a"] * 20 + ["b", "c", "d", "zz"], object), n), pa.string(), mask=nulls(0.01)),
            "flag": pa.array(rng.random(n) < 0.97, pa.bool_(), mask=nulls(0.01)),
            "message": pa.array([f"line {i}" for i in range(n)], pa.string(), mask=nulls(0.01)),
            "offset": pa.array(np.arange(n) - 3, pa.int64()),
            "pid2": pa.array(np.where(rng.random(n) < 0.97, pid, 7), pa.int64(), mask=nulls(0.01)),
            "note": pa.array(np.full(n, "x", object), pa.string(), mask=~nulls(0.02)),
        }
    )


def _validators() -> tuple[V.BatchValidator, V.BatchValidator]:
    return (
        V.BatchValidator(SCHEMA, EXPECTATIONS, suite_name="distinct-check-distinct"),
        V.BatchValidator(SCHEMA, EXPECTATIONS, suite_name="distinct-check-full"),
    )


RESULT_KEYS = (
    "element_count",
    "unexpected_count",
    "missing_count",
    "unexpected_percent",
    "missing_percent",
    "unexpected_percent_total",
    "unexpected_percent_nonmissing",
)


def _assert_same(fast: V.BatchValidator, full: V.BatchValidator) -> None:
    assert fast.unexpected == full.unexpected
    assert fast.merged.success == full.merged.success
    assert fast.merged.statistics == full.merged.statistics
    for a, b in zip(fast.merged.results, full.merged.results, strict=True):
        label = b.expectation_config.meta["label"]
        assert a.expectation_config.meta["label"] == label
        assert a.success == b.success, label
        for key in RESULT_KEYS:
            assert (key in a.result) == (key in b.result), (label, key)
            if key in b.result:
                assert a.result[key] == pytest.approx(b.result[key], nan_ok=True), (label, key)
        # partial_unexpected_counts differ on purpose: GX counts a sample of the unexpected values,
        # the distinct path counts the rows holding each value (test_counts_are_in_rows_not_distinct_values)


def _dictionary_encoded(batch: pa.Table) -> pa.Table:
    """String columns dictionary-encoded, in two chunks with different dictionaries."""
    half = batch.num_rows // 2
    cols = []
    for c in batch.columns:
        if pa.types.is_string(c.type):
            c = pa.chunked_array(
                [c.slice(0, half).combine_chunks().dictionary_encode(), c.slice(half).combine_chunks().dictionary_encode()]
            )
        cols.append(c)
    return pa.table(cols, names=batch.column_names)


@pytest.mark.parametrize("small_frame", [V.SMALL_FRAME, 7])
@pytest.mark.parametrize("dictionary", [False, True])
def test_distinct_values_give_the_same_row_outcomes_as_full_rows(monkeypatch, small_frame, dictionary):
    monkeypatch.setattr(V, "SMALL_FRAME", small_frame)  # 7: two GX frames (small and big components)
    fast, full = _validators()
    outcomes = []
    for seed, n in ((1, 3000), (2, 1), (3, 257)):
        batch = _batch(n, seed)
        ok_a, why_a = fast.validate(_dictionary_encoded(batch) if dictionary else batch)
        ok_b, why_b = full.validate(batch, distinct=False)
        assert np.array_equal(ok_a, ok_b)
        assert why_a.cast(pa.string()).to_pylist() == why_b.cast(pa.string()).to_pylist()
        assert all((r is None) == o for r, o in zip(why_a.cast(pa.string()).to_pylist(), ok_a, strict=True))
        outcomes.append(ok_a)
    ok = np.concatenate(outcomes)
    assert 0.05 < ok.mean() < 0.95
    _assert_same(fast, full)
    assert fast.rows_validated == full.rows_validated == 3000 + 1 + 257


def test_every_failure_kind_is_caught_and_mapped_to_its_rows():
    batch = pa.table(
        {
            "time": pa.array([T0 + 5 * 10**9, None, T0 - 10**9, T0 + 5 * 10**9, T0 + 5 * 10**9], pa.int64()).cast(TS),
            "end": pa.array([T0 + 6 * 10**9, None, T0, T0, None], pa.int64()).cast(TS),
            "node": pa.array(["cn0001", "cn0001", None, "../../etc", "cn0001"]),
            "value": pa.array([1.0, math.nan, None, 1e30, -math.inf]),
            "pid": pa.array([1, None, -1, 1, 1], pa.int64()),
            "sev": pa.array([1, 1, 1, 1, 1], pa.int8()),
            "code": pa.array(["a", "a", "zz", None, "a"]),
            "flag": pa.array([True, True, None, False, True]),
            "message": pa.array(["m", None, "m", "m", "m"]),
            "offset": pa.array([1, 2, 3, 4, 5], pa.int64()),
            "pid2": pa.array([1, None, -1, 1, 1], pa.int64()),
            "note": pa.array([None, None, None, None, "x"]),
        }
    )
    fast, full = _validators()
    ok, why = fast.validate(batch)
    ok_full, why_full = full.validate(batch, distinct=False)
    assert np.array_equal(ok, ok_full) and why.to_pylist() == why_full.to_pylist()
    reasons = why.cast(pa.string()).to_pylist()
    assert ok.tolist() == [True, False, False, False, False] and reasons[0] is None
    assert "expect_column_values_to_not_be_null(value)" in reasons[1]  # NaN is missing to pandas/GX
    assert "expect_column_values_to_not_be_null(message)" in reasons[1]
    assert "expect_column_values_to_not_be_null(node)" in reasons[2]
    assert "expect_column_values_to_be_between(pid>=0)" in reasons[2]
    assert "expect_column_values_to_match_regex(node)" in reasons[3]
    assert "expect_column_values_to_be_between(value>=0,value<=100)" in reasons[3]
    assert "expect_column_values_to_be_in_set(code)" in reasons[2]
    assert "expect_column_pair_values_a_to_be_greater_than_b(end>=time)" in reasons[3]
    assert "expect_column_values_to_be_between(value>=0,value<=100)" in reasons[4]  # -inf
    _assert_same(fast, full)


def test_counts_are_in_rows_not_distinct_values():
    n = 1000
    batch = _batch(n, 5).set_column(2, "node", pa.array(["../../etc"] * n))
    fast, _ = _validators()
    ok, _ = fast.validate(batch)
    assert not ok.any()
    label = "expect_column_values_to_match_regex(node)"
    regex = next(r for r in fast.merged.results if r.expectation_config.meta["label"] == label)
    assert regex.result["element_count"] == n and regex.result["unexpected_count"] == n
    assert regex.result["partial_unexpected_counts"] == [{"value": "../../etc", "count": n}]
    assert fast.unexpected[label] == n


def test_unsupported_expectations_still_see_full_rows():
    exps = [
        Expectation("ExpectColumnValuesToBeUnique", {"column": "offset"}),
        Expectation(
            "ExpectColumnValuesToBeBetween",
            {"column": "sev", "min_value": 0, "max_value": 7, "row_condition": 'code=="a"', "condition_parser": "pandas"},
        ),
        Expectation("ExpectColumnValuesToBeBetween", {"column": "sev", "min_value": 0, "max_value": 7}),
    ]
    batch = _batch(500, 7).set_column(9, "offset", pa.array([1, 1] + list(range(2, 500)), pa.int64()))
    fast = V.BatchValidator(SCHEMA, exps, suite_name="distinct-check-unsupported")
    full = V.BatchValidator(SCHEMA, exps, suite_name="distinct-check-unsupported-full")
    ok, why = fast.validate(batch)
    ok2, why2 = full.validate(batch, distinct=False)
    assert np.array_equal(ok, ok2) and why.cast(pa.string()).to_pylist() == why2.cast(pa.string()).to_pylist()
    assert fast.unexpected["expect_column_values_to_be_unique(offset)"] == 2
    _assert_same(fast, full)
