"""Fusion of ranked runs. Each rule is one function over run tables (see releval.runs)."""

from __future__ import annotations

import polars as pl

from releval.errors import InputError
from releval.runs import rank_by_score

KEY = ["query_id", "chunk_id", "doc_id"]


def reciprocal_rank_fusion(runs: dict[str, pl.DataFrame], k: float = 60.0,
                           weights: dict[str, float] | None = None, depth: int = 1000) -> pl.DataFrame:
    """Σ_runs weight / (k + rank) over each run's top ``depth``; equal weights give plain RRF."""
    if k <= 0:
        raise InputError("must be positive", field="fusion.k")
    parts = []
    for name, run in runs.items():
        weight = _weight(weights, name)
        parts.append(run.filter(pl.col("rank") <= depth)
                     .select(*KEY, (weight / (k + pl.col("rank"))).alias("score")))
    fused = pl.concat(parts).group_by(KEY).agg(pl.col("score").sum())
    return rank_by_score(fused)


def normalize_per_query(run: pl.DataFrame, method: str) -> pl.DataFrame:
    """minmax: (s − min)/(max − min), 0 when a query's scores are all equal; zscore: (s − mean)/sd, 0 when sd = 0."""
    s = pl.col("score")
    if method == "minmax":
        span = s.max().over("query_id") - s.min().over("query_id")
        norm = pl.when(span > 0).then((s - s.min().over("query_id")) / span).otherwise(0.0)
    elif method == "zscore":
        sd = s.std(ddof=0).over("query_id")
        norm = pl.when(sd > 0).then((s - s.mean().over("query_id")) / sd).otherwise(0.0)
    else:
        raise InputError(f"unknown normalization {method!r}; expected minmax or zscore",
                         field="fusion.normalization")
    return run.with_columns(norm.alias("score"))


def score_fusion(runs: dict[str, pl.DataFrame], weights: dict[str, float] | None = None,
                 normalization: str = "minmax", depth: int = 1000) -> pl.DataFrame:
    """Σ_runs weight × normalised score. A candidate absent from one run takes that run's lowest
    normalised score for the query (not 0: a z-score of 0 is the query's mean, not its floor)."""
    normalized = {name: normalize_per_query(run.filter(pl.col("rank") <= depth), normalization)
                  for name, run in runs.items()}
    candidates = pl.concat([r.select(KEY) for r in normalized.values()]).unique()
    total = candidates.with_columns(pl.lit(0.0).alias("score"))
    for name, run in normalized.items():
        floor = run.group_by("query_id").agg(pl.col("score").min().alias("floor"))
        joined = (candidates.join(run.select(*KEY, pl.col("score").alias("part")), on=KEY, how="left")
                  .join(floor, on="query_id", how="left")
                  .select(*KEY, pl.coalesce("part", "floor", pl.lit(0.0)).alias("part")))
        total = (total.join(joined, on=KEY).with_columns(
            (pl.col("score") + _weight(weights, name) * pl.col("part")).alias("score")).drop("part"))
    return rank_by_score(total)


def fuse(runs: dict[str, pl.DataFrame], method: str, k: float, weights: dict[str, float] | None,
         normalization: str, depth: int) -> pl.DataFrame:
    if depth <= 0:
        raise InputError("must be positive", field="fusion.depth")
    if method == "rrf":
        return reciprocal_rank_fusion(runs, k=k, weights=weights, depth=depth)
    if method == "score":
        return score_fusion(runs, weights=weights, normalization=normalization, depth=depth)
    raise InputError(f"unknown fusion method {method!r}; expected rrf or score", field="fusion.method")


def _weight(weights: dict[str, float] | None, name: str) -> float:
    if weights is None:
        return 1.0
    if name not in weights:
        raise InputError(f"no weight for input {name!r}", field="fusion.weights")
    return float(weights[name])
