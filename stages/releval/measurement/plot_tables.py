"""The numbers behind the report's four plots, each a plain table (a list of JSON-safe rows) that the
report stage writes as a DVC plot data file and :mod:`releval.reporting.plots` draws:

``difference_ci``    each configuration's paired difference from the baseline on the primary metric,
                     with the grid's percentile bootstrap interval and verdict (the quantity the
                     verdict is about: :func:`difference_interval_table`)
``recall_curve``     recall@k for k = 1..100 per configuration, scored from the runs themselves
``quality_cost``     the primary metric against cost: index size
``difference_hist``  per-query differences, candidate − baseline, for every other configuration

:func:`interval_table` (each configuration's own, marginal interval) is report.md's grid column, not
a plot: overlapping marginal intervals say nothing about a paired difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from releval import paths
from releval.errors import InputError
from releval.measurement import stats
from releval.measurement.grid import GridReport, score_matrix
from releval.measurement.metrics import evaluate
from releval.measurement.operations import MONEY_FIGURES


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def interval_table(
    per_query: pl.DataFrame,
    metric: str,
    configs: Sequence[str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """Mean of ``metric`` per configuration with a percentile bootstrap interval over queries.

    Every configuration sees the same resampled query sets (paired); configurations scored on
    different queries are refused (:func:`releval.measurement.grid.score_matrix`). Rows best first.
    """
    query_ids, configs, matrix = score_matrix(per_query, metric, configs)
    means = matrix.mean(axis=0)
    if len(query_ids) >= 2:
        low, high = stats.percentile_interval(stats.bootstrap_means(matrix, n_resamples, seed), confidence)
    else:  # one query says nothing about variability
        low, high = np.full(len(configs), -np.inf), np.full(len(configs), np.inf)
    rows = [
        {
            "config_id": c,
            "metric": metric,
            "mean": float(means[i]),
            "low": _finite(low[i]),
            "high": _finite(high[i]),
            "queries": len(query_ids),
            "confidence": confidence,
            "resamples": int(n_resamples),
        }
        for i, c in enumerate(configs)
    ]
    return sorted(rows, key=lambda r: (-r["mean"], r["config_id"]))


def recall_curve_table(
    doc_runs: Mapping[str, pl.DataFrame], qrels: pl.DataFrame, contract, max_k: int = 100
) -> list[dict[str, Any]]:
    """recall@k, k = 1..max_k, per configuration, scored by the metric engine under ``contract``.

    ``doc_runs``: config_id -> document-level run (query_id, doc_id, score), already restricted
    to the scored queries. At k = 100 the values equal metrics.json's recall@100.
    """
    if max_k < 1:
        raise InputError(f"must be >= 1, got {max_k}", field="max_k")
    names = [f"recall@{k}" for k in range(1, max_k + 1)]
    rows = []
    for config_id in sorted(doc_runs):
        evaluation = evaluate(qrels, doc_runs[config_id].select("query_id", "doc_id", "score"), names, contract)
        rows += [
            {"config_id": config_id, "k": k, "recall": float(evaluation.mean[name])}
            for k, name in enumerate(names, start=1)
        ]
    return rows


def quality_cost_table(configs: Mapping[str, Mapping[str, Any]], metric: str) -> list[dict[str, Any]]:
    """``metric`` against cost figures, one row per configuration (metrics.json ``configs``)."""
    rows = []
    for config_id, row in sorted(configs.items()):
        if metric not in row:
            raise InputError(f"{config_id} has no {metric}", file=paths.METRICS, field=metric)
        ops = row.get("ops") or {}
        index_bytes = ops.get("index_bytes")
        rows.append(
            {
                "config_id": config_id,
                "metric": metric,
                "quality": float(row[metric]),
                "index_mb": None if index_bytes is None else round(index_bytes / 1e6, 6),
                # money at a priced model's declared rate, for a plot against cost; absent without a price
                **{key: ops[key] for key in MONEY_FIGURES if ops.get(key) is not None},
            }
        )
    return rows


def difference_table(
    per_query: pl.DataFrame, baseline: str, metric: str, configs: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Per-query ``candidate − baseline`` differences of ``metric`` for every other configuration."""
    query_ids, configs, matrix = score_matrix(per_query, metric, configs)
    if baseline not in configs:
        raise InputError(f"unknown baseline {baseline!r}; known: {', '.join(configs)}", field="baseline")
    b = configs.index(baseline)
    rows = []
    for i, config_id in enumerate(configs):
        if i == b:
            continue
        diff = matrix[:, i] - matrix[:, b]
        rows += [
            {"config_id": config_id, "baseline": baseline, "query_id": q, "metric": metric, "difference": float(d)}
            for q, d in zip(query_ids, diff)
        ]
    return rows


def difference_interval_table(grid: GridReport) -> list[dict[str, Any]]:
    """Each configuration of ``grid`` against its baseline: the paired mean difference of the grid's
    metric with the grid's percentile bootstrap interval (confidence 1 − alpha), its Holm-adjusted
    p-value and verdict, and whether it is indistinguishable from the best; rows by difference,
    largest first (ties by configuration id). Read from the grid: nothing is resampled again."""
    rows = [
        {
            "config_id": row.config_id,
            "baseline": grid.baseline,
            "metric": grid.metric,
            "difference": float(row.mean_difference),
            "low": _finite(row.bootstrap_ci[0]),
            "high": _finite(row.bootstrap_ci[1]),
            "p_holm": _finite(row.p_bootstrap_holm),
            "verdict": row.verdict,
            "best_set": bool(row.indistinguishable_from_best),
            "queries": grid.n_queries,
            "confidence": round(1 - grid.alpha, 10),
            "resamples": grid.n_resamples,
        }
        for row in grid.rows
    ]
    return sorted(rows, key=lambda r: (-r["difference"], r["config_id"]))
