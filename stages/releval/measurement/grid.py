"""Grid-wide comparison: every configuration against one baseline (:func:`compare_grid`), the set
indistinguishable from the best, what would separate the best from the runner-up, and whether the
winner holds at every relevance threshold.

The configurations against the baseline form one family for :func:`releval.measurement.stats.decide`
(Holm over them); report.md's blocks take the grid's verdicts (:func:`adopt_grid_verdicts`), so that a
configuration has one verdict wherever the grid and its pair are shown together. Judging coverage
(:mod:`releval.measurement.coverage`) is read per comparison with the baseline. Under a sampled judgment
set the grid decides on the inferred form of the metric (:func:`releval.measurement.pair.decided_metric`),
carries the sample's caveat and does not re-score the winner at other relevance thresholds
(:data:`SAMPLED_THRESHOLDS`).

Figures only: :mod:`releval.reporting.grid_text` renders a :class:`GridReport` as text or JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.judging import completeness
from releval.measurement import scoring, stats
from releval.measurement.coverage import BPREF, Coverage, coverage
from releval.measurement.pair import INCONCLUSIVE, NotComparable, PairReport, decided_metric, preview

THRESHOLDS = (1, 2, 3)
SAMPLED_THRESHOLDS = (
    "not computed under sampled judgments (re-scoring at another threshold gives the engine's values, "
    "which count every unjudged document as non-relevant, not inferred estimates)"
)


@dataclass(frozen=True)
class GridRow:
    config_id: str
    mean: float
    mean_difference: float
    bootstrap_ci: tuple[float, float]
    p_bootstrap: float
    p_bootstrap_holm: float
    wins: int
    losses: int
    ties: int
    p_sign: float
    p_sign_holm: float
    verdict: stats.Verdict
    indistinguishable_from_best: bool
    difference_sd: float  # SD of the per-query differences against the baseline
    coverage: Coverage | None = None  # judging coverage against the baseline; None: no judged@k in the contract
    power: stats.PowerFigure | None = None  # what would settle an inconclusive comparison; None: it has a verdict


@dataclass(frozen=True)
class ThresholdStability:
    """Winner of the grid when relevance means grade >= t, for each threshold t.

    ``means[t]`` is None where no query has a document of grade >= t (nothing to rank by);
    such thresholds have no winner and do not count as a change.
    """

    means: dict[int, dict[str, float] | None]
    winners: dict[int, str | None]

    @property
    def changes(self) -> bool:
        return len({w for w in self.winners.values() if w is not None}) > 1


@dataclass(frozen=True)
class GridReport:
    metric: str
    baseline: str
    n_queries: int
    n_resamples: int
    seed: int
    alpha: float
    baseline_mean: float
    rows: list[GridRow]  # every configuration but the baseline, in grid order
    best: stats.BestSet
    winner_frequencies: dict[str, float]
    spread: stats.ScoreSpread
    thresholds: ThresholdStability | None
    contract: dict[str, Any] = field(default_factory=dict)
    runner_up: str | None = None  # the next configuration indistinguishable from the best, if any
    settle: stats.PowerFigure | None = None  # best - runner_up: what would separate them
    coverage_metric: str | None = None  # the judged@k coverage is read from; None: the contract lists none
    coverage_terms: scoring.CoverageTerms | None = None
    baseline_judged: float | None = None  # None: not recorded per query
    thresholds_note: str | None = None  # why ``thresholds`` is None when it was not left out by choice

    @property
    def sample_caveat(self) -> str | None:
        """The line a grid under a sampled judgment set carries (:func:`completeness.sampled_caveat`); else None."""
        return completeness.contract_sample_caveat(self.contract)

    def confounded(self) -> list[GridRow]:
        """The rows whose comparison with the baseline is coverage-confounded."""
        return [row for row in self.rows if row.coverage is not None and row.coverage.confounded]

    def thin(self) -> dict[str, stats.PowerFigure]:
        """The inconclusive rows whose queries are too few for the difference seen: config id -> its power figure."""
        return {row.config_id: row.power for row in self.rows if row.power is not None and row.power.needs_more_queries}

    @property
    def positives_only(self) -> bool:
        """The judgments declare only positives (BEIR/MTEB qrels): coverage is no question, a caveat stands instead."""
        return completeness.from_contract(self.contract).positives_only


def score_matrix(
    per_query: pl.DataFrame, metric: str, configs: Sequence[str] | None = None
) -> tuple[list[str], list[str], np.ndarray]:
    """(query ids, config ids, queries x configs matrix) from a long per-query table.

    Refuses configurations scored on different query sets, naming each and how many differ.
    """
    if metric not in per_query.columns:
        raise InputError(f"no per-query {metric}", field="metric")
    present = list(dict.fromkeys(per_query["config_id"].to_list()))
    configs = list(configs) if configs is not None else present
    unknown = [c for c in configs if c not in present]
    if unknown:
        raise InputError(f"unknown configuration(s) {unknown}; known: {present}", field="config_id")
    table = per_query.filter(pl.col("config_id").is_in(configs))
    all_ids = set(table["query_id"].to_list())
    problems = []
    for config in configs:
        ids = table.filter(pl.col("config_id") == config)["query_id"].to_list()
        if len(ids) != len(set(ids)):
            problems.append(f"{config} has {len(ids) - len(set(ids))} duplicated query row(s)")
        missing = all_ids - set(ids)
        if missing:
            problems.append(f"{config} lacks {len(missing)} queries ({preview(missing)})")
    if problems:
        raise NotComparable("grid", "grid", problems)
    wide = table.pivot(on="config_id", index="query_id", values=metric).sort("query_id")
    matrix = wide.select(configs).to_numpy().astype(np.float64)
    if np.isnan(matrix).any():
        raise InputError(f"{int(np.isnan(matrix).sum())} missing per-query scores", field=metric)
    return wide["query_id"].to_list(), configs, matrix


def _config_means(
    per_query: pl.DataFrame, column: str, configs: Sequence[str] | None = None
) -> dict[str, float] | None:
    """Each configuration's mean of a per-query column; None when the column is absent or some
    configuration has no value on some query (it was not recorded for it)."""
    if column not in per_query.columns:
        return None
    try:
        _, names, matrix = score_matrix(per_query, column, configs)
    except InputError:
        return None
    return {name: float(value) for name, value in zip(names, matrix.mean(axis=0))}


def threshold_means(
    doc_runs: Mapping[str, pl.DataFrame],
    qrels: pl.DataFrame,
    contract: Mapping[str, Any],
    metric: str,
    thresholds: Sequence[int] = THRESHOLDS,
) -> dict[int, dict[str, float] | None]:
    """Each configuration's mean ``metric`` with relevance at grade >= t, for each threshold t.

    ``doc_runs`` (config id -> document-level run) and ``qrels`` hold only the scored queries,
    so the t = rel_threshold row reproduces the reported means. A threshold no query reaches
    (no document of that grade among the scored queries) maps to None."""
    usable = [t for t in thresholds if qrels.filter(pl.col("grade") >= t).height]
    means: dict[int, dict[str, float] | None] = {t: ({} if t in usable else None) for t in thresholds}
    for config_id, doc_run in doc_runs.items():
        for threshold in usable:
            try:
                evaluation = scoring.score_recorded(doc_run, qrels, contract, [metric], rel_threshold=threshold)
            except InputError as exc:
                if "no query left to evaluate" not in str(exc):
                    raise
                means[threshold] = None  # this run shares no query with a relevant document
                continue
            by_config = means[threshold]
            if by_config is not None:
                by_config[config_id] = float(evaluation.mean[metric])
    return means


def _threshold_stability(means: Mapping[int, Mapping[str, float] | None]) -> ThresholdStability:
    """Winner (highest mean; first in order on an exact tie) per relevance threshold."""
    winners: dict[int, str | None] = {}
    for threshold, by_config in means.items():
        if not by_config:
            winners[int(threshold)] = None
            continue
        names = list(by_config)
        values = np.array([by_config[n] for n in names], dtype=np.float64)
        winners[int(threshold)] = names[int(np.argmax(values))]
    return ThresholdStability({int(t): dict(m) if m else None for t, m in means.items()}, winners)


def compare_grid(
    per_query: pl.DataFrame,
    baseline: str,
    metric: str,
    configs: Sequence[str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
    spread_width: float = 0.01,
    threshold_means: Mapping[int, Mapping[str, float]] | None = None,
    contract: Mapping[str, Any] | None = None,
    coverage_terms: scoring.CoverageTerms | None = None,
) -> GridReport:
    """Every configuration against ``baseline``: raw and Holm-adjusted p-values (bootstrap and
    sign test), verdicts by :func:`stats.decide` over the family, the set indistinguishable from
    the best, what would separate the best from the runner-up, what would settle each inconclusive
    comparison, and stability of the winner.

    With a ``contract`` listing a judged@k, each comparison's coverage is read (:class:`Coverage`,
    under ``coverage_terms`` or the contract's): a coverage-confounded one gets
    :data:`stats.COVERAGE_CONFOUNDED` for its verdict, its p-values kept.

    Under a sampled judgment set (the ``contract``'s) ``metric`` is decided on its inferred form
    (:func:`~releval.measurement.pair.decided_metric`) and ``threshold_means`` is not read
    (:data:`SAMPLED_THRESHOLDS`)."""
    sampled = completeness.from_contract(contract or {}).sampled
    metric = decided_metric(contract or {}, metric)
    query_ids, configs, matrix = score_matrix(per_query, metric, configs)
    if baseline not in configs:
        raise InputError(f"unknown baseline {baseline!r}; known: {configs}", field="baseline")
    b = configs.index(baseline)
    others = [i for i in range(len(configs)) if i != b]
    judged_metric = scoring.coverage_metric(contract) if contract else None
    if judged_metric is not None and coverage_terms is None:
        coverage_terms = scoring.coverage_terms(contract or {}, source="metrics.json contract")
    columns = [judged_metric, scoring.condensed_name(metric), BPREF] if judged_metric else []
    column_means = {column: _config_means(per_query, column, configs) for column in columns}
    judged_means = column_means.get(judged_metric) if judged_metric else None

    def row_coverage(config_id: str) -> Coverage | None:
        if judged_metric is None or coverage_terms is None:
            return None
        standard = {configs[i]: float(matrix[:, i].mean()) for i in (b, configs.index(config_id))}

        def means(column: str) -> tuple[float, float] | None:
            found = standard if column == metric else column_means.get(column)
            return None if found is None else (found[baseline], found[config_id])

        return coverage(judged_metric, coverage_terms, metric, means, (baseline, config_id))

    best = stats.indistinguishable_from_best(matrix, configs, n_resamples, alpha, seed)
    rows = []
    if others:
        grid = stats.bootstrap_many(matrix[:, b], matrix[:, others], n_resamples, 1 - alpha, seed)
        wlt = [stats.win_loss_tie(matrix[:, b], matrix[:, i]) for i in others]
        p_sign = np.array([stats.sign_test(wins, losses) for wins, losses, _ in wlt])
        p_sign_holm = stats.holm(p_sign)
        decisions = stats.decide(grid.mean_difference, grid.p_value, [len(query_ids)] * len(others), alpha)
        for k, i in enumerate(others):
            low, high = float(grid.low[k]), float(grid.high[k])
            found = row_coverage(configs[i])
            verdict = decisions[k].verdict
            if found is not None and found.confounded:
                verdict = stats.COVERAGE_CONFOUNDED
            mean_difference = float(grid.mean_difference[k])
            sd = stats.difference_sd(matrix[:, b], matrix[:, i])
            rows.append(
                GridRow(
                    config_id=configs[i],
                    mean=float(matrix[:, i].mean()),
                    mean_difference=mean_difference,
                    bootstrap_ci=(low, high),
                    p_bootstrap=float(grid.p_value[k]),
                    p_bootstrap_holm=float(decisions[k].adjusted_p_value),
                    wins=wlt[k][0],
                    losses=wlt[k][1],
                    ties=wlt[k][2],
                    p_sign=float(p_sign[k]),
                    p_sign_holm=float(p_sign_holm[k]),
                    verdict=verdict,
                    indistinguishable_from_best=configs[i] in best.indistinguishable,
                    difference_sd=sd,
                    coverage=found,
                    power=stats.power_figure(sd, mean_difference, len(query_ids), float(alpha))
                    if verdict == INCONCLUSIVE
                    else None,
                )
            )
    runner_up = best.indistinguishable[1] if len(best.indistinguishable) > 1 else None
    settle = None
    if runner_up is not None:
        first, second = matrix[:, configs.index(best.best)], matrix[:, configs.index(runner_up)]
        settle = stats.power_figure(
            stats.difference_sd(second, first), float(np.mean(first - second)), len(query_ids), alpha
        )
    return GridReport(
        metric=metric,
        baseline=baseline,
        n_queries=len(query_ids),
        n_resamples=int(n_resamples),
        seed=seed,
        alpha=float(alpha),
        baseline_mean=float(matrix[:, b].mean()),
        rows=rows,
        best=best,
        winner_frequencies=stats.winner_frequencies(matrix, configs, n_resamples, seed),
        spread=stats.score_spread(matrix.mean(axis=0), spread_width),
        thresholds=_threshold_stability(threshold_means) if threshold_means and not sampled else None,
        contract=dict(contract or {}),
        runner_up=runner_up,
        settle=settle,
        coverage_metric=judged_metric,
        coverage_terms=coverage_terms if judged_metric else None,
        baseline_judged=None if judged_means is None else judged_means[baseline],
        thresholds_note=SAMPLED_THRESHOLDS if sampled else None,
    )


def adopt_grid_verdicts(pairs: Mapping[str, PairReport], grid: GridReport) -> dict[str, PairReport]:
    """The pairs (config id -> its comparison with the grid's baseline) with the grid's Holm-adjusted
    p-value and verdict on the primary metric, so that a configuration has one verdict wherever the
    grid and its pair are shown together."""
    rows = {row.config_id: row for row in grid.rows}
    adopted = {}
    for config_id, pair in pairs.items():
        row = rows[config_id]
        decision = stats.Decision(row.verdict, row.p_bootstrap_holm, len(grid.rows))
        adopted[config_id] = pair.with_primary(pair.primary.decided(decision))
    return adopted
