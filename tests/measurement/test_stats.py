"""Tests for releval.measurement.stats: each statistic against an independent reference (scipy, statsmodels,
brute force) or a property a wrong implementation would break."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from releval.measurement import stats
from releval.reporting.text import power_sentence
from releval.cli import main as cli_main
from releval.errors import InputError


def _pair(n: int, effect: float, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Baseline scores in [0, 1] and a candidate whose true mean difference is ``effect``."""
    rng = np.random.default_rng(seed)
    baseline = rng.beta(2.0, 5.0, size=n)
    return baseline, baseline + effect + rng.normal(0.0, noise, size=n)


def _binomial_tolerance(p: float, trials: int, z: float = 3.0) -> float:
    return z * math.sqrt(p * (1.0 - p) / trials)


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_means_equal_brute_force_resampling():
    differences = np.random.default_rng(3).normal(size=(37, 3))
    replicates = stats.bootstrap_means(differences, n_resamples=500, seed=11)
    drawn = np.random.default_rng(11).integers(0, 37, size=(500, 37))
    np.testing.assert_allclose(replicates, differences[drawn].mean(axis=1), rtol=0, atol=1e-13)


def test_bootstrap_means_do_not_depend_on_block_size():
    data = np.random.default_rng(4).normal(size=(50, 2))
    whole = stats.bootstrap_means(data, 1_000, seed=5)
    blocked = stats.bootstrap_means(data, 1_000, seed=5, max_block_elements=7 * 50)
    np.testing.assert_allclose(whole, blocked, rtol=0, atol=1e-14)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap(seed):
    baseline, candidate = _pair(200, 0.02, 0.15, seed)
    difference = candidate - baseline
    ours = stats.paired_bootstrap_ci(baseline, candidate, n_resamples=10_000, seed=seed)
    theirs = sps.bootstrap(
        (difference,),
        np.mean,
        n_resamples=10_000,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(100 + seed),
    )
    # Monte Carlo SE of a bootstrap quantile: sqrt(q(1-q)/B) / density at the quantile, with the
    # (near-normal) bootstrap distribution of the mean; two independent runs add variances.
    spread = difference.std() / math.sqrt(difference.size)
    density = sps.norm.pdf(sps.norm.ppf(0.025)) / spread
    mc_se = math.sqrt(0.025 * 0.975 / 10_000) / density
    tolerance = 4.0 * math.sqrt(2.0) * mc_se
    assert ours[0] == pytest.approx(theirs.confidence_interval.low, abs=tolerance)
    assert ours[1] == pytest.approx(theirs.confidence_interval.high, abs=tolerance)


def test_bootstrap_ci_covers_known_difference_about_95_percent():
    simulations, true_difference = 400, 0.03
    covered = 0
    for i in range(simulations):
        baseline, candidate = _pair(50, true_difference, 0.12, seed=1_000 + i)
        low, high = stats.paired_bootstrap_ci(baseline, candidate, n_resamples=2_000, seed=i)
        covered += low <= true_difference <= high
    # 400 Bernoulli(0.95) trials: SE 0.011; 3 SE also absorbs the percentile method's known
    # slight under-coverage at n = 50 (about 0.94 for near-normal differences).
    assert abs(covered / simulations - 0.95) <= _binomial_tolerance(0.95, simulations)


def test_bootstrap_p_value_rejects_at_nominal_rate_under_the_null():
    simulations, alpha, n = 3_000, 0.05, 50
    rejections = 0
    for i in range(simulations):
        baseline, candidate = _pair(n, 0.0, 0.12, seed=5_000 + i)
        rejections += stats.paired_bootstrap_p_value(baseline, candidate, 2_000, seed=i) < alpha
    # Independent simulations: the count is Binomial(simulations, rate). A correct test has a rate
    # from alpha up to the percentile bootstrap's known small-sample excess: it rejects when
    # |mean| > z(0.975) * sd / sqrt(n), with the plug-in sd (ddof=0) and a normal quantile, i.e.
    # when |t(n-1)| > z(0.975) * sqrt((n-1)/n): rate 0.0581 at n = 50 (24,000 simulations of this
    # test gave 0.0583). Each bound is a 0.1% binomial tail at its end of that range, so a
    # correct implementation fails with probability <= 0.1% per side: 0.1% quantile at alpha
    # (114 of 3,000: too few rejections) and 99.9% quantile at the expected rate (215 of 3,000).
    # Observed: 179. In rate terms [0.038, 0.072], inside the former 400-run +-3 SE [0.017, 0.083].
    expected_rate = 2 * sps.t.sf(sps.norm.ppf(1 - alpha / 2) * math.sqrt((n - 1) / n), n - 1)
    low = sps.binom.ppf(0.001, simulations, alpha)
    high = sps.binom.ppf(0.999, simulations, expected_rate)
    assert low <= rejections <= high, (rejections, low, high)


def test_bootstrap_p_below_alpha_implies_interval_excludes_zero():
    checked = 0
    for i in range(200):
        baseline, candidate = _pair(30, 0.04, 0.1, seed=9_000 + i)
        low, high = stats.paired_bootstrap_ci(baseline, candidate, 4_000, 0.95, seed=i)
        p_value = stats.paired_bootstrap_p_value(baseline, candidate, 4_000, seed=i)
        if p_value < 0.05:
            checked += 1
            assert low > 0 or high < 0
        else:
            assert low <= 0 <= high or p_value < 0.06  # only at the interpolation boundary
    assert 20 < checked < 180  # the effect size puts cases on both sides


def test_bootstrap_p_value_definition_on_degenerate_distributions():
    zeros = np.zeros(20)
    assert stats.bootstrap_p_value(np.zeros(999)) == 1.0
    assert stats.paired_bootstrap_p_value(zeros, zeros + 0.1, n_resamples=999) == 2 / 1000
    assert stats.paired_bootstrap_p_value(zeros, zeros - 0.1, n_resamples=999) == 2 / 1000


def test_bootstrap_many_matches_single_pairs_column_by_column():
    rng = np.random.default_rng(8)
    baseline = rng.uniform(size=120)
    candidates = baseline[:, None] + rng.normal([0.0, 0.05, -0.05, 0.01], 0.1, size=(120, 4))
    grid = stats.bootstrap_many(baseline, candidates, n_resamples=3_000, seed=21)
    for column in range(4):
        low, high = stats.paired_bootstrap_ci(baseline, candidates[:, column], 3_000, seed=21)
        p_value = stats.paired_bootstrap_p_value(baseline, candidates[:, column], 3_000, seed=21)
        assert grid.low[column] == pytest.approx(low, abs=1e-12)
        assert grid.high[column] == pytest.approx(high, abs=1e-12)
        assert grid.p_value[column] == pytest.approx(p_value, abs=1e-12)
    np.testing.assert_allclose(grid.mean_difference, (candidates - baseline[:, None]).mean(0))
    assert grid.low[1] > 0 and grid.high[2] < 0


def test_bootstrap_is_seeded():
    baseline, candidate = _pair(60, 0.01, 0.1, seed=2)
    first = stats.paired_bootstrap_ci(baseline, candidate, 1_000, seed=7)
    assert stats.paired_bootstrap_ci(baseline, candidate, 1_000, seed=7) == first
    assert stats.paired_bootstrap_ci(baseline, candidate, 1_000, seed=8) != first


# --------------------------------------------------------------------------- t, sign, Holm


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_t_interval_equals_scipy(confidence):
    baseline, candidate = _pair(40, 0.02, 0.1, seed=6)
    low, high, p_value = stats.paired_t_interval(baseline, candidate, confidence)
    reference = sps.ttest_rel(candidate, baseline)
    interval = reference.confidence_interval(confidence_level=confidence)
    assert (low, high, p_value) == pytest.approx((interval.low, interval.high, reference.pvalue), rel=1e-12)
    difference = candidate - baseline
    half = sps.t.ppf((1 + confidence) / 2, 39) * difference.std(ddof=1) / math.sqrt(40)
    assert (low, high) == pytest.approx((difference.mean() - half, difference.mean() + half))


def test_win_loss_tie_counts_with_tolerance():
    baseline = np.array([0.5, 0.5, 0.5, 0.5, 0.5])
    candidate = np.array([0.6, 0.4, 0.5, 0.52, 0.49])
    assert stats.win_loss_tie(baseline, candidate) == (2, 2, 1)
    assert stats.win_loss_tie(baseline, candidate, tol=0.05) == (1, 1, 3)


@pytest.mark.parametrize("wins,losses", [(9, 1), (0, 5), (12, 12), (30, 17), (1, 0), (100, 71)])
def test_sign_test_equals_exact_binomial(wins, losses):
    expected = sps.binomtest(wins, wins + losses, 0.5).pvalue
    assert stats.sign_test(wins, losses) == pytest.approx(expected, rel=1e-12)


def test_sign_test_hand_value_and_no_untied_queries():
    assert stats.sign_test(9, 1) == pytest.approx(2 * 11 / 1024, rel=1e-12)
    assert stats.sign_test(0, 0) == 1.0


@pytest.mark.parametrize("seed", range(20))
def test_holm_equals_statsmodels(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 40))
    p_values = rng.uniform(0, 0.2, size=size) ** rng.uniform(0.5, 3)
    p_values[rng.uniform(size=size) < 0.2] = p_values[0]  # ties
    p_values[rng.uniform(size=size) < 0.1] = 1.0
    expected = multipletests(p_values, method="holm")[1]
    np.testing.assert_allclose(stats.holm(p_values), expected, rtol=0, atol=1e-12)


def test_holm_is_monotone_in_the_raw_order_and_capped():
    p_values = np.array([0.04, 0.01, 0.03, 0.5, 0.02])
    adjusted = stats.holm(p_values)
    order = np.argsort(p_values)
    assert np.all(np.diff(adjusted[order]) >= 0)
    assert adjusted.max() <= 1.0
    np.testing.assert_allclose(adjusted, [0.09, 0.05, 0.09, 0.5, 0.08])
    assert stats.holm([]).size == 0


# --------------------------------------------------------------------------- many configurations


def test_indistinguishable_from_best_separates_clear_losers():
    rng = np.random.default_rng(12)
    best = rng.uniform(0.3, 0.7, size=300)
    scores = np.column_stack(
        [
            best - 0.2 + rng.normal(0, 0.05, 300),  # clearly worse
            best,
            best - 0.001 + rng.normal(0, 0.05, 300),  # within noise of the best
            best - 0.1 + rng.normal(0, 0.05, 300),  # clearly worse
        ]
    )
    result = stats.indistinguishable_from_best(scores, ["a", "b", "c", "d"], 4_000, seed=1)
    assert result.best == "b"
    assert result.indistinguishable == ("b", "c")
    assert set(result.adjusted_p_values) == {"a", "c", "d"}
    raw = stats.bootstrap_many(scores[:, 1], scores[:, [0, 2, 3]], 4_000, seed=1).p_value
    assert list(result.adjusted_p_values.values()) == pytest.approx(list(stats.holm(raw)))


def test_indistinguishable_means_adjusted_p_above_alpha():
    rng = np.random.default_rng(17)
    best = rng.uniform(0.3, 0.7, size=100)
    scores = np.column_stack([best, best - 0.008 + rng.normal(0, 0.05, 100)])
    p_value = stats.indistinguishable_from_best(scores, ["a", "b"], 2_000).adjusted_p_values["b"]
    assert 0.05 < p_value < 0.9
    for alpha, kept in [(p_value * 0.99, ("a", "b")), (p_value, ("a",)), (p_value * 1.01, ("a",))]:
        result = stats.indistinguishable_from_best(scores, ["a", "b"], 2_000, alpha=alpha)
        assert result.adjusted_p_values["b"] == p_value  # alpha does not change the resamples
        assert result.indistinguishable == kept


def test_indistinguishable_from_best_with_one_configuration():
    result = stats.indistinguishable_from_best(np.ones((5, 1)), ["only"])
    assert result.best == "only" and result.indistinguishable == ("only",)


def test_winner_frequencies_match_brute_force_argmax():
    rng = np.random.default_rng(13)
    scores = rng.uniform(size=(40, 3)) + [0.0, 0.03, 0.02]
    frequencies = stats.winner_frequencies(scores, ["x", "y", "z"], n_resamples=2_000, seed=3)
    drawn = np.random.default_rng(3).integers(0, 40, size=(2_000, 40))
    winners = scores[drawn].mean(axis=1).argmax(axis=1)
    expected = np.bincount(winners, minlength=3) / 2_000
    assert list(frequencies.values()) == pytest.approx(list(expected))
    assert sum(frequencies.values()) == pytest.approx(1.0)


def test_winner_frequencies_split_exact_ties():
    column = np.random.default_rng(14).uniform(size=30)
    scores = np.column_stack([column, column, column - 0.5])
    frequencies = stats.winner_frequencies(scores, ["a", "b", "c"], n_resamples=500)
    assert frequencies == {"a": 0.5, "b": 0.5, "c": 0.0}


def test_score_spread_flags_narrow_bands_only():
    narrow = stats.score_spread([0.401, 0.405, 0.409])
    assert narrow.narrow and narrow.spread == pytest.approx(0.008)
    assert not stats.score_spread([0.40, 0.42]).narrow
    assert stats.score_spread([0.40, 0.42], width=0.05).narrow
    assert not stats.score_spread([0.4]).narrow


# --------------------------------------------------------------------------- power


@pytest.mark.parametrize(
    "sd,delta,alpha,power",
    [
        (0.15, 0.03, 0.05, 0.8),
        (0.2, 0.05, 0.05, 0.9),
        (0.1, 0.01, 0.01, 0.8),
        (0.3, 0.2, 0.05, 0.8),
        (0.25, 0.5, 0.05, 0.8),
        (0.05, -0.01, 0.1, 0.95),
    ],
)
def test_queries_needed_matches_statsmodels(sd, delta, alpha, power):
    n = stats.queries_needed(sd, delta, alpha, power)
    effect = abs(delta) / sd
    reference = TTestPower().solve_power(effect_size=effect, alpha=alpha, power=power)
    assert abs(n - math.ceil(reference)) <= 1
    achieved = TTestPower().power(effect_size=effect, nobs=n, alpha=alpha)
    assert achieved >= power
    if n > 2:
        assert TTestPower().power(effect_size=effect, nobs=n - 1, alpha=alpha) < power


@pytest.mark.parametrize(
    "sd,n,alpha,power",
    [
        (0.15, 200, 0.05, 0.8),
        (0.2, 50, 0.01, 0.9),
        (0.1, 5, 0.05, 0.8),
        (0.3, 3, 0.05, 0.8),
    ],
)
def test_minimum_detectable_difference_matches_statsmodels(sd, n, alpha, power):
    delta = stats.minimum_detectable_difference(sd, n, alpha, power)
    # statsmodels' own solver stops early (about 1e-5 relative), so check its power function
    # at our answer tightly and its solved effect size loosely.
    assert TTestPower().power(effect_size=delta / sd, nobs=n, alpha=alpha) == pytest.approx(power, abs=1e-9)
    effect = TTestPower().solve_power(nobs=n, alpha=alpha, power=power)
    assert delta == pytest.approx(effect * sd, rel=1e-4)


def test_minimum_detectable_difference_with_two_queries():
    # statsmodels' power() returns NaN here (scipy's nct.cdf underflows in the far tail);
    # its solver and our power function still agree.
    delta = stats.minimum_detectable_difference(0.3, 2)
    assert stats.paired_t_power(0.3, delta, 2) == pytest.approx(0.8, abs=1e-9)
    effect = TTestPower().solve_power(nobs=2, alpha=0.05, power=0.8)
    assert delta == pytest.approx(effect * 0.3, rel=1e-4)


def test_power_functions_are_consistent_with_each_other():
    delta = stats.minimum_detectable_difference(0.15, 120)
    assert stats.queries_needed(0.15, delta * 1.0001) <= 120
    assert stats.queries_needed(0.15, delta * 0.99) > 120


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sd": 0.0, "delta": 0.1},
        {"sd": 0.1, "delta": 0.0},
        {"sd": 0.1, "delta": 0.1, "alpha": 1.0},
        {"sd": 0.1, "delta": 0.1, "power": 0.04},
    ],
)
def test_queries_needed_rejects_bad_settings(kwargs):
    with pytest.raises(InputError):
        stats.queries_needed(**kwargs)


def test_power_cli_prints_queries_and_smallest_difference(capsys):
    assert cli_main(["power", "--sd", "0.15", "--delta", "0.03"]) == 0
    assert capsys.readouterr().out.split()[0] == str(stats.queries_needed(0.15, 0.03))
    arguments = ["--sd", "0.15", "--n", "200", "--alpha", "0.01", "--power", "0.9"]
    assert cli_main(["power", *arguments]) == 0
    printed = float(capsys.readouterr().out.split()[0])
    assert printed == pytest.approx(stats.minimum_detectable_difference(0.15, 200, 0.01, 0.9), rel=1e-3)
    assert cli_main(["power", "--sd", "0.15", "--n", "1"]) == 2
    assert "field 'n'" in capsys.readouterr().err


# --------------------------------------------------------------------------- comparison


def test_compare_paired_bundles_the_individual_statistics():
    baseline, candidate = _pair(80, 0.05, 0.08, seed=15)
    ids = [f"q{i}" for i in range(80)]
    result = stats.compare_paired(baseline, candidate, ids, n_resamples=3_000, seed=4)
    assert result.bootstrap_ci == stats.paired_bootstrap_ci(baseline, candidate, 3_000, seed=4)
    assert result.bootstrap_p_value == stats.paired_bootstrap_p_value(baseline, candidate, 3_000, seed=4)
    assert result.t_interval + (result.t_p_value,) == stats.paired_t_interval(baseline, candidate)
    assert (result.wins, result.losses, result.ties) == stats.win_loss_tie(baseline, candidate)
    assert result.sign_test_p_value == stats.sign_test(result.wins, result.losses)
    assert result.mean_difference == pytest.approx(candidate.mean() - baseline.mean())
    assert result.verdict == "improvement"
    difference = candidate - baseline
    worst, best = int(np.argmin(difference)), int(np.argmax(difference))
    assert result.worst_regression == stats.QueryChange(ids[worst], baseline[worst], candidate[worst])
    assert result.best_improvement.query_id == ids[best]
    assert result.best_improvement.difference == pytest.approx(difference.max())


def test_compare_paired_verdicts():
    baseline, candidate = _pair(80, 0.05, 0.08, seed=16)
    ids = [str(i) for i in range(80)]
    assert stats.compare_paired(candidate, baseline, ids, 2_000).verdict == "regression"
    assert (
        stats.compare_paired(baseline, baseline + np.random.default_rng(0).normal(0, 0.1, 80), ids, 2_000).verdict
        == "inconclusive"
    )


def test_compare_paired_rejects_misaligned_input():
    with pytest.raises(InputError, match="query_ids"):
        stats.compare_paired([0.1, 0.2], [0.2, 0.3], ["q1"])
    with pytest.raises(InputError, match="candidate"):
        stats.compare_paired([0.1, 0.2], [0.2], ["q1", "q2"])
    with pytest.raises(InputError, match="non-finite"):
        stats.paired_bootstrap_ci([0.1, np.nan], [0.2, 0.3])


# --------------------------------------------------------------------------- edge cases


def test_all_ties_give_defined_answers():
    scores = np.full(25, 0.4)
    result = stats.compare_paired(scores, scores.copy(), [str(i) for i in range(25)], 1_000)
    assert (result.wins, result.losses, result.ties) == (0, 0, 25)
    assert result.sign_test_p_value == 1.0
    assert result.bootstrap_ci == (0.0, 0.0) and result.bootstrap_p_value == 1.0
    assert (result.t_interval, result.t_p_value) == ((0.0, 0.0), 1.0)
    assert result.verdict == "inconclusive"
    assert result.worst_regression is None and result.best_improvement is None


def test_single_query_gives_unbounded_intervals_and_no_verdict():
    result = stats.compare_paired([0.2], [0.9], ["q1"], 1_000)
    assert result.bootstrap_ci == (-math.inf, math.inf) and result.bootstrap_p_value == 1.0
    assert result.t_interval == (-math.inf, math.inf) and result.t_p_value == 1.0
    assert result.sign_test_p_value == 1.0 and result.wins == 1
    assert result.verdict == "inconclusive"
    grid = stats.bootstrap_many([0.2], [[0.9, 0.1]], 1_000)
    assert np.all(np.isinf(grid.low)) and np.all(grid.p_value == 1.0)
    encoded = json.dumps(result.to_dict(), allow_nan=False)
    assert json.loads(encoded)["bootstrap_ci"] == [None, None]


def test_zero_variance_difference_collapses_the_intervals():
    baseline = np.linspace(0.1, 0.5, 30)
    low, high, p_value = stats.paired_t_interval(baseline, baseline + 0.25)
    assert (low, high, p_value) == (pytest.approx(0.25), pytest.approx(0.25), 0.0)
    low, high = stats.paired_bootstrap_ci(baseline, baseline + 0.25, 1_000)
    assert low == pytest.approx(0.25) and high == pytest.approx(0.25)
    result = stats.compare_paired(baseline, baseline + 0.25, list("abcdefghijklmnopqrstuvwxyz1234"), 1_000)
    assert result.verdict == "improvement"
    assert not any(isinstance(v, float) and math.isnan(v) for v in result.to_dict().values())


def test_rounding_noise_around_zero_counts_as_a_tie():
    # +0.1 and -0.1 in equal numbers: many resamples have a mean of exactly zero in exact arithmetic
    difference = np.array([0.1, -0.1, 0.3, -0.3, 0.7, -0.7])
    replicates = stats.bootstrap_means(difference, 5_000, seed=0)[:, 0]
    exact = np.random.default_rng(0).integers(0, 6, size=(5_000, 6))
    tenths = np.round(difference * 10).astype(int)[exact].sum(axis=1)
    np.testing.assert_array_equal(replicates == 0.0, tenths == 0)


# --------------------------------------------------------------------------- the decision rule


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decide_is_holm_over_the_family_then_the_sign(seed):
    rng = np.random.default_rng(seed)
    p_values = rng.uniform(0, 0.06, 8)
    differences = rng.normal(0, 0.05, 8)
    decisions = stats.decide(differences, p_values, [30] * 8, alpha=0.05)
    reject, adjusted, _, _ = multipletests(p_values, alpha=0.05, method="holm")
    np.testing.assert_allclose([d.adjusted_p_value for d in decisions], adjusted, rtol=0, atol=1e-15)
    for d, rejected, difference in zip(decisions, reject, differences):
        expected = "inconclusive" if not rejected else "improvement" if difference > 0 else "regression"
        assert d.verdict == expected and d.family_size == 8


def test_decide_on_a_family_of_one_is_the_plain_test():
    assert stats.decide([-0.1], [0.03], [40])[0] == stats.Decision("regression", 0.03, 1)
    assert stats.decide([0.1], [0.05], [40])[0].verdict == "inconclusive"  # not below alpha
    assert stats.decide([0.0], [0.0], [40])[0].verdict == "inconclusive"  # no direction to call
    # raw p 0.03 is a regression alone, not among 15 comparisons (the report's old contradiction)
    family = stats.decide([-0.1] + [0.01] * 14, [0.03] + [0.5] * 14, [58] * 15)
    assert family[0].verdict == "inconclusive" and family[0].adjusted_p_value == pytest.approx(0.45)


def test_decide_leaves_comparisons_under_the_minimum_out_of_the_family():
    decisions = stats.decide([-0.3, 0.2, 0.2], [0.001, 0.02, 0.02], [3, 12, 40], min_queries=stats.MIN_SLICE_QUERIES)
    assert decisions[0] == stats.Decision(stats.NO_VERDICT, None, 2)
    np.testing.assert_allclose(
        [d.adjusted_p_value for d in decisions[1:]], multipletests([0.02, 0.02], method="holm")[1]
    )
    with pytest.raises(InputError, match="one mean difference"):
        stats.decide([0.1], [0.01, 0.02], [10])


def test_compare_paired_verdict_is_the_rule_on_its_own_p_value():
    for seed in range(6):
        baseline, candidate = _pair(25, 0.03, 0.08, seed=seed)
        result = stats.compare_paired(baseline, candidate, [str(i) for i in range(25)], 2_000, seed=seed)
        decision = stats.decide([result.mean_difference], [result.bootstrap_p_value], [25])[0]
        assert (result.verdict, result.adjusted_p_value, result.family_size) == (
            decision.verdict,
            decision.adjusted_p_value,
            1,
        )
    few = stats.compare_paired([0.1, 0.2, 0.3], [0.9, 0.9, 0.9], ["a", "b", "c"], 500, min_queries=10)
    assert few.verdict == stats.NO_VERDICT and few.adjusted_p_value is None


def test_decide_family_replaces_the_verdicts():
    ids = [str(i) for i in range(40)]
    comparisons = [
        stats.compare_paired(*_pair(40, effect, 0.1, seed=s), ids, 2_000) for s, effect in enumerate((0.05, 0.0, 0.0))
    ]
    decided = stats.decide_family(comparisons)
    raw = [c.bootstrap_p_value for c in comparisons]
    assert [c.adjusted_p_value for c in decided] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    assert all(c.family_size == 3 for c in decided)
    assert [c.bootstrap_ci for c in decided] == [c.bootstrap_ci for c in comparisons]  # only the decision changes
    assert stats.decide_family([]) == []


# --------------------------------------------------------------------------- SD and the power figure


def test_difference_sd_is_the_sample_sd_of_the_differences():
    baseline, candidate = _pair(30, 0.02, 0.07, seed=9)
    assert stats.difference_sd(baseline, candidate) == pytest.approx(np.std(candidate - baseline, ddof=1), rel=1e-14)
    assert stats.difference_sd(baseline, baseline + 0.1) == 0.0  # constant up to rounding
    assert math.isnan(stats.difference_sd([0.1], [0.2]))
    result = stats.compare_paired(baseline, candidate, [str(i) for i in range(30)], 500)
    assert result.difference_sd == stats.difference_sd(baseline, candidate)


@pytest.mark.parametrize("sd, delta, n", [(0.12, 0.03, 58), (0.2, -0.05, 30), (0.08, 0.01, 200)])
def test_power_figure_matches_statsmodels(sd, delta, n):
    figure = stats.power_figure(sd, delta, n)
    solver = TTestPower()
    assert figure.queries_needed == math.ceil(solver.solve_power(effect_size=abs(delta) / sd, alpha=0.05, power=0.8))
    assert figure.resolvable == pytest.approx(solver.solve_power(nobs=n, alpha=0.05, power=0.8) * sd, rel=1e-5)
    assert figure.command() == f"releval power --sd {sd:.4g} --delta {abs(delta):.4g}"
    assert json.loads(json.dumps(figure.to_dict()))["queries_needed"] == figure.queries_needed


def test_power_figure_edge_cases_say_why_there_is_no_number():
    assert power_sentence(stats.power_figure(math.nan, 0.2, 1)) == "1 query: no spread to plan from"
    constant = stats.power_figure(0.0, 0.1, 20)
    assert constant.queries_needed is None and "every query moves by the same amount" in power_sentence(constant)
    none = stats.power_figure(0.1, 0.0, 20)
    assert none.queries_needed is None and "no observed difference to detect" in power_sentence(none)
    tiny = stats.power_figure(0.1, 1e-17, 20)
    assert tiny.beyond_max and tiny.queries_needed is None and tiny.command() is None
    assert "more than 1,000,000,000 queries" in power_sentence(tiny)
    with pytest.raises(InputError, match="needs more than 1,000,000,000 queries"):
        stats.queries_needed(0.1, 1e-17)


def test_alpha_of_a_confidence_is_exact_so_a_pair_and_its_grid_agree_at_the_boundary():
    assert stats.alpha_of(0.95) == 0.05 and stats.alpha_of(0.99) == 0.01
    # B = 1999 resamples can give p = 2 * 50 / 2000 = 0.05 exactly: not below alpha, alone or in a grid
    assert stats.decide([-0.1], [0.05], [40], stats.alpha_of(0.95))[0].verdict == "inconclusive"
