"""Failure fits (models/checkpoint/failures.py, tasks/checkpoint/fits.py): censored MLE, eq. 3.14, cleaning, durations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from nodewatch.models.checkpoint.failures import FailureModel, fit_exponential, fit_weibull, interarrival_times, job_mtbf
from nodewatch.tasks.checkpoint.fits import failure_model_from_fit, fit_groups, parse_duration_hours, prepare_failures, qq_plot


def test_job_mtbf_eq_3_14() -> None:
    # MTBF_job = MTBF_machine * N_machine / N_job
    assert float(job_mtbf(5.71, 2000, 512)) == pytest.approx(5.71 * 2000 / 512)
    m = FailureModel("x", mtbf_node_h=5 * 8766.0, shape=0.8)
    np.testing.assert_allclose(m.job_mtbf([1, 128]), [43830.0, 43830.0 / 128])
    with pytest.raises(ValueError, match="more nodes"):
        job_mtbf(10.0, 100, 200)
    with pytest.raises(ValueError, match="MTBF"):
        job_mtbf(0.0, 100, 2)
    with pytest.raises(ValueError, match="shape"):
        FailureModel("x", 100.0, shape=0.0)
    with pytest.raises(ValueError, match="node MTBF"):
        FailureModel("x", -1.0)


def test_exponential_mle_with_censoring_by_hand() -> None:
    gaps = np.array([2.0, 4.0, 6.0, 8.0])
    cens = np.array([False, False, False, True])
    f = fit_exponential(gaps, cens)
    assert f.mtbf_h == pytest.approx(20.0 / 3)  # total time / failures
    assert f.n_failures == 3 and f.n_censored == 1
    assert f.mtbf_ci_h[0] < f.mtbf_h < f.mtbf_ci_h[1]
    assert f.loglik == pytest.approx(-3 * math.log(20 / 3) - 3)
    assert f.aic == pytest.approx(2 - 2 * f.loglik)


def test_weibull_mle_matches_scipy_and_recovers_shape() -> None:
    x = stats.weibull_min(0.7, scale=10.0).rvs(3000, random_state=np.random.default_rng(1))
    f = fit_weibull(x, np.zeros(x.size, bool))
    k, _, lam = stats.weibull_min.fit(x, floc=0)
    assert f.shape == pytest.approx(k, rel=1e-4) and f.scale_h == pytest.approx(lam, rel=1e-4)
    assert f.shape_ci[0] < 0.7 < f.shape_ci[1]
    assert f.mtbf_h == pytest.approx(lam * math.gamma(1 + 1 / k), rel=1e-4)
    assert f.mtbf_ci_h[0] < 10 * math.gamma(1 + 1 / 0.7) < f.mtbf_ci_h[1]
    assert f.aic < fit_exponential(x, np.zeros(x.size, bool)).aic  # Weibull w=0.7 beats exponential


def test_censoring_matters() -> None:
    # Failures of a process with mean 10 h observed over a window; heavy censoring at the end.
    rng = np.random.default_rng(4)
    true = stats.weibull_min(0.8, scale=10.0)
    t = np.cumsum(true.rvs(400, random_state=rng))
    end = t[-1] + 200.0  # long failure-free tail
    gaps, cens = interarrival_times(t, end)
    assert cens.sum() == 1 and gaps[-1] == pytest.approx(200.0)
    with_c = fit_exponential(gaps, cens)
    without = fit_exponential(gaps[:-1], cens[:-1])
    assert with_c.mtbf_h == pytest.approx(without.mtbf_h + 200.0 / without.n_failures)


def test_interarrival_zero_gaps_and_errors() -> None:
    gaps, cens = interarrival_times([0.0, 1.0, 1.0, 3.0], 3.0)
    np.testing.assert_allclose(gaps, [1.0, 1 / 120, 2.0])
    assert not cens.any()
    with pytest.raises(ValueError, match="before the last failure"):
        interarrival_times([0.0, 5.0], 4.0)
    with pytest.raises(ValueError, match="at least 2"):
        fit_weibull([1.0, 2.0], [False, True])
    with pytest.raises(ValueError, match="positive"):
        fit_exponential([1.0, 0.0, 2.0], [False, False, False])


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    t0 = pd.Timestamp("2020-01-01", tz="UTC")
    rows = []
    for g, shape in (("a", 0.6), ("b", 1.0)):
        h = np.cumsum(stats.weibull_min(shape, scale=20.0).rvs(300, random_state=rng))
        rows += [(g, f"{g}-n{i % 17}", t0 + pd.Timedelta(hours=float(x))) for i, x in enumerate(h)]
    return pd.DataFrame(rows, columns=["group", "node", "start"])


def test_prepare_counts_duplicates_unsorted_outside_window() -> None:
    df = _frame()
    n = len(df)
    dirty = pd.concat([df, df.iloc[:5]], ignore_index=True).sample(frac=1.0, random_state=1)  # 5 dups, shuffled
    dirty.loc[len(dirty) + 1] = ("a", "a-n1", pd.NaT)
    lo = df.start.min() + pd.Timedelta(hours=10)
    hi = df.start.max() - pd.Timedelta(hours=10)
    expect_outside = int(((df.start < lo) | (df.start >= hi)).sum())
    clean, c = prepare_failures(dirty, (lo, hi))
    assert c.rows_in == n + 6 and c.duplicates == 5 and c.missing_time == 1
    assert c.outside_window == expect_outside and c.kept == n - expect_outside
    assert c.rows_in == c.kept + c.duplicates + c.outside_window + c.missing_time
    assert c.out_of_order > 0
    assert clean.groupby("group").start.apply(lambda s: s.is_monotonic_increasing).all()
    with pytest.raises(ValueError, match="lacks columns"):
        prepare_failures(df.drop(columns="node"))


def test_fit_groups_and_qq_plot(tmp_path) -> None:
    fits, gaps, counts = fit_groups(_frame())
    assert set(fits.group) == {"a", "b"} and len(fits) == 4
    a = fits[(fits.group == "a") & (fits.dist == "weibull")].iloc[0]
    assert a["shape_lo"] < 0.6 < a["shape_hi"] and a.best_aic
    b = fits[(fits.group == "b") & (fits.dist == "weibull")].iloc[0]
    assert b["shape_lo"] < 1.0 < b["shape_hi"]
    png = qq_plot(*gaps["a"], fits[fits.group == "a"], tmp_path / "qq" / "a.png", "group a")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    m = failure_model_from_fit(a, n_machine=17)
    assert m.mtbf_node_h == pytest.approx(a.mtbf_h * 17) and m.shape == a["shape"]
    # an explicit window end adds a censored gap per group
    fits2, gaps2, _ = fit_groups(_frame(), window=(None, pd.Timestamp("2030-01-01", tz="UTC")))
    assert gaps2["a"][1][-1] and fits2.n_censored.eq(1).all()


@pytest.mark.parametrize(
    "text,hours",
    [("5y", 5 * 8766.0), ("10m", 1 / 6), ("1h30m", 1.5), ("0.25h", 0.25), ("2d", 48.0), ("90s", 0.025), ("1 week", 168.0)],
)
def test_parse_duration(text: str, hours: float) -> None:
    assert parse_duration_hours(text) == pytest.approx(hours)


@pytest.mark.parametrize(
    "text,msg",
    [
        ("5parsec", "unknown unit 'parsec'"),
        ("5", "no unit"),
        ("0h", "positive"),
        ("-3h", "cannot parse"),
        ("", "empty"),
        ("ten minutes", "cannot parse"),
        ("5 lightyears", "unknown unit"),
    ],
)
def test_parse_duration_errors(text: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg) as e:
        parse_duration_hours(text, "--ckpt-cost")
    assert str(e.value).startswith("--ckpt-cost") and "\n" not in str(e.value)


def test_real_lanl_system_20(shared_data) -> None:
    import pyarrow as pa

    from nodewatch.tasks.checkpoint.fits import failures_frame
    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.failures import parse_lanl
    from nodewatch.tasks.ingest.inputs import open_binary

    with open_binary(shared_data / "failures" / "LA-UR-05-7318-failure-data-1996-2005.csv.xz") as f:
        df = pa.concat_tables([r.rows for r in parse_lanl(f, ParseContext(name="lanl"))]).to_pandas()
    fr = failures_frame(df[df.system == "lanl-s20"], purpose="compute")
    fits, _, counts = fit_groups(fr)
    w = fits[fits.dist == "weibull"].iloc[0]
    # Weibull with decreasing hazard fits LANL failures (Schroeder & Gibson; Frank uses w = 0.8)
    assert w.best_aic and 0.4 < w["shape"] < 0.9 and counts.kept > 2000


def test_observation_window_default_censors_every_group() -> None:
    from nodewatch.tasks.checkpoint.fits import RECORD_RESOLUTION, observation_window

    df = _frame()
    lo, hi = observation_window(df)
    assert lo is None and hi == df.start.max() + RECORD_RESOLUTION
    fits, gaps, c = fit_groups(df, (lo, hi))
    assert fits.n_censored.eq(1).all() and c.outside_window == 0 and c.window_source == "given"
    last_a = df[df.group == "a"].start.max()
    assert gaps["a"][0][-1] == pytest.approx((hi - last_a) / pd.Timedelta(hours=1))
    # without an end no group is censored (each ends at its own last failure)
    f0, _, c0 = fit_groups(df)
    assert f0.n_censored.eq(0).all() and "no censoring" in c0.window_source
    with pytest.raises(ValueError, match="not after its start"):
        fit_groups(df, (df.start.max(), df.start.min()))


def test_nightly_failure_model_is_censored(tmp_path) -> None:
    # the nightly's fit (nodewatch.tasks.report.nightly.failure_model_for_tables) uses the same default window as the tables:
    # first .. last event + one minute, so the gap after the last failure is one censored observation
    import pyarrow as pa

    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.report.nightly import failure_model_for_tables

    st = Store(str(tmp_path / "s"))
    rng = np.random.default_rng(1)
    starts = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.cumsum(rng.exponential(10.0, 40)), unit="h")
    tbl = pa.table(
        {"node": [f"cn{i % 8:04d}" for i in range(40)], "start": pa.array(starts.as_unit("ns"), pa.timestamp("ns", tz="UTC"))}
    )
    st.write_parquet(tbl, st.staged_key("failure_events", "2026-01-01", "t"))
    fm, info = failure_model_for_tables(st, 8)
    assert info["reason"] == "fitted" and info["fit"]["n_censored"] == 1 and info["fit"]["n_failures"] == 39
    assert pd.Timestamp(info["fit"]["window_end"]) == starts.max() + pd.Timedelta(minutes=1)
