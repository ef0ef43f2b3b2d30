"""Small qrels and run tables written as nested dicts, for metric tests."""

import polars as pl


def qrels_frame(judgments: dict[str, dict[str, int]]) -> pl.DataFrame:
    rows = [(q, d, g) for q, docs in judgments.items() for d, g in docs.items()]
    return pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "grade": pl.Int64}, orient="row")


def run_frame(scores: dict[str, dict[str, float]]) -> pl.DataFrame:
    rows = [(q, d, s) for q, docs in scores.items() for d, s in docs.items()]
    return pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64}, orient="row")
