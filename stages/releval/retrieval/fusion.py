"""Fusion of ranked runs. Each rule is one function over run tables (see releval.retrieval.runs)."""

from __future__ import annotations

import dataclasses

import polars as pl

from releval.errors import InputError
from releval.retrieval.runs import rank_by_score

KEY = ["query_id", "chunk_id", "doc_id"]
METHODS = ("rrf", "score")
NORMALIZATIONS = ("none", "minmax", "zscore")


@dataclasses.dataclass(frozen=True)
class FusionConfig:
    """One fusion rule as declared under ``fusions.<name>`` (built with releval.config.build)."""

    method: str
    k: float = 60.0
    weights: dict[str, float] | None = None
    normalization: str = "none"
    depth: int = 1000

    def __post_init__(self):
        if self.method not in METHODS:
            raise InputError(f"unknown fusion method {self.method!r}; expected one of {METHODS}", field="method")
        if self.normalization not in NORMALIZATIONS:
            raise InputError(f"expected one of {NORMALIZATIONS}", field="normalization")
        if self.method == "score" and self.normalization == "none":
            raise InputError("score fusion needs minmax or zscore normalisation", field="normalization")
        if not isinstance(self.k, (int, float)) or self.k <= 0:
            raise InputError("must be a positive number", field="k")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth <= 0:
            raise InputError("must be a positive integer", field="depth")


def reciprocal_rank_fusion(
    runs: dict[str, pl.DataFrame], k: float = 60.0, weights: dict[str, float] | None = None, depth: int = 1000
) -> pl.DataFrame:
    """Σ_runs weight / (k + rank) over each run's top ``depth``; equal weights give plain RRF."""
    if k <= 0:
        raise InputError("must be positive", field="k")
    parts = []
    for name, run in runs.items():
        weight = _weight(weights, name)
        parts.append(run.filter(pl.col("rank") <= depth).select(*KEY, (weight / (k + pl.col("rank"))).alias("score")))
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
        raise InputError(f"unknown normalization {method!r}; expected minmax or zscore", field="normalization")
    return run.with_columns(norm.alias("score"))


def score_fusion(
    runs: dict[str, pl.DataFrame],
    weights: dict[str, float] | None = None,
    normalization: str = "minmax",
    depth: int = 1000,
) -> pl.DataFrame:
    """Σ_runs weight × normalised score. A candidate absent from one run takes that run's lowest
    normalised score for the query (not 0: a z-score of 0 is the query's mean, not its floor)."""
    normalized = {
        name: normalize_per_query(run.filter(pl.col("rank") <= depth), normalization) for name, run in runs.items()
    }
    candidates = pl.concat([r.select(KEY) for r in normalized.values()]).unique()
    total = candidates.with_columns(pl.lit(0.0).alias("score"))
    for name, run in normalized.items():
        floor = run.group_by("query_id").agg(pl.col("score").min().alias("floor"))
        joined = (
            candidates.join(run.select(*KEY, pl.col("score").alias("part")), on=KEY, how="left")
            .join(floor, on="query_id", how="left")
            .select(*KEY, pl.coalesce("part", "floor", pl.lit(0.0)).alias("part"))
        )
        total = (
            total.join(joined, on=KEY)
            .with_columns((pl.col("score") + _weight(weights, name) * pl.col("part")).alias("score"))
            .drop("part")
        )
    return rank_by_score(total)


def fuse(runs: dict[str, pl.DataFrame], config: FusionConfig) -> pl.DataFrame:
    weights = dict(config.weights) if config.weights is not None else None
    if config.method == "rrf":
        return reciprocal_rank_fusion(runs, k=float(config.k), weights=weights, depth=config.depth)
    return score_fusion(runs, weights=weights, normalization=config.normalization, depth=config.depth)


def _weight(weights: dict[str, float] | None, name: str) -> float:
    if weights is None:
        return 1.0
    if name not in weights:
        raise InputError(f"no weight for input {name!r}", field="weights")
    return float(weights[name])


def member_weights(config: FusionConfig, members: list[str]) -> dict[str, float] | None:
    """Weights of a fusion of several named runs (``grid.fused``): the rule's own weights when they
    name every member, none (equal) when the rule weighs its inputs equally, otherwise an error:
    weights written for dense + BM25 must not be guessed onto other members."""
    if config.weights is None:
        return None
    if set(members) <= set(config.weights):
        return {name: float(config.weights[name]) for name in members}
    if len(set(config.weights.values())) == 1:
        return None
    raise InputError(
        f"unequal weights {dict(config.weights)} do not name the fused runs {members}; "
        "give the rule a weight per member name",
        field="weights",
    )
