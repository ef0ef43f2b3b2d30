"""Second-stage rescoring of a run's top-N.

The top ``top_n`` chunks of each query are reordered by the new scores; the rest keep their
first-stage order below every rescored chunk. The tail's scores are synthetic (the lowest new
score minus 1, 2, 3, ...) so that one score column still orders the whole run.
"""

from __future__ import annotations

import polars as pl

from releval.errors import InputError
from releval.retrieval.runs import rank_by_score


def rerank_top_n(run: pl.DataFrame, new_scores: pl.DataFrame, top_n: int) -> pl.DataFrame:
    """``new_scores``: query_id, chunk_id, score for (at least) every chunk in each query's top_n."""
    if top_n <= 0:
        raise InputError("must be positive", field="reranker.top_n")
    head = (
        run.filter(pl.col("rank") <= top_n)
        .drop("score")
        .join(new_scores.select("query_id", "chunk_id", "score"), on=["query_id", "chunk_id"], how="left")
    )
    missing = head.filter(pl.col("score").is_null())
    if missing.height:
        raise InputError(
            f"{missing.height} candidate(s) have no new score "
            f"(first: query {missing['query_id'][0]}, chunk {missing['chunk_id'][0]})",
            field="score",
        )
    floor = head.group_by("query_id").agg(pl.col("score").min().alias("floor"))
    tail = (
        run.filter(pl.col("rank") > top_n)
        .join(floor, on="query_id", how="left")
        .with_columns((pl.col("floor").fill_null(0.0) - (pl.col("rank") - top_n).cast(pl.Float64)).alias("score"))
        .drop("floor")
    )
    return rank_by_score(pl.concat([head.select(run.columns), tail.select(run.columns)]))


def top_n_pairs(run: pl.DataFrame, top_n: int) -> pl.DataFrame:
    """The (query, chunk) pairs a reranker must score."""
    return run.filter(pl.col("rank") <= top_n).select("query_id", "chunk_id").unique(maintain_order=True)
