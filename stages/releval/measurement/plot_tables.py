"""The numbers behind the report's four plots, each a plain table (a list of JSON-safe rows) that the
report stage writes as a DVC plot data file and :mod:`releval.reporting.plots` draws:

``ndcg_ci``          the primary metric per configuration with a 95% percentile bootstrap
                     interval over queries (:func:`releval.measurement.stats.bootstrap_means`)
``recall_curve``     recall@k for k = 1..100 per configuration, scored from the runs themselves
``quality_cost``     the primary metric against cost: index size
``difference_hist``  per-query differences, candidate − baseline, for every other configuration
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
from releval.measurement.grid import score_matrix
from releval.measurement.metrics import evaluate


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
