"""A releval working tree in miniature, as the score stage leaves it: reports, queries, qrels, runs."""

import json
import os
from pathlib import Path

import numpy as np
import polars as pl

from releval.cli import main as cli_main
from releval.measurement.metrics import Contract

METRICS = ["ndcg@10", "recall@100", "hit@10"]


class Project:
    """A releval working tree in miniature: the files the score stage writes and reads."""

    def __init__(self, root: Path):
        self.root = root
        (root / "reports").mkdir(parents=True, exist_ok=True)
        (root / "data" / "work" / "runs").mkdir(parents=True, exist_ok=True)

    def contract(self, n_queries: int, metrics=METRICS, **overrides) -> dict:
        return {
            **Contract().to_dict(),
            "metrics": list(metrics),
            "primary": metrics[0],
            "collapse": "first",
            "dataset": "toy",
            "judgments_version": "toy-1",
            "judgments_sha256": "ab" * 32,
            "queries": n_queries,
            "split": "all",
            **overrides,
        }

    def write_reports(
        self, scores: dict[str, dict[str, list[float]]], query_ids: list[str], contract: dict | None = None
    ) -> None:
        """scores: config_id -> metric -> one value per query (in query_ids order)."""
        frames = [
            pl.DataFrame(
                {
                    "config_id": [cid] * len(query_ids),
                    "query_id": query_ids,
                    **{m: pl.Series(v, dtype=pl.Float64) for m, v in by_metric.items()},
                }
            )
            for cid, by_metric in scores.items()
        ]
        metrics = list(next(iter(scores.values())))
        contract = contract or self.contract(len(query_ids), metrics)
        configs = {
            cid: {**{m: float(np.mean(v)) for m, v in by_metric.items()}, "ops": {}, "counts": {}}
            for cid, by_metric in scores.items()
        }
        (self.root / "reports" / "metrics.json").write_text(
            json.dumps({"contract": contract, "configs": configs}, indent=2)
        )
        pl.concat(frames, how="diagonal").sort(["config_id", "query_id"]).write_parquet(
            self.root / "reports" / "per_query.parquet"
        )

    def write_queries(
        self,
        query_ids: list[str],
        slices: dict[str, list[str]] | None = None,
        must_never_break: set[str] = frozenset(),
        holdout: set[str] = frozenset(),
    ) -> None:
        """data/work/queries.parquet of ``query_ids`` (dev) plus ``holdout`` (sealed: as the queries
        stage writes them, with no judgments or runs in the working files)."""
        query_ids = list(query_ids) + sorted(holdout)
        table = pl.DataFrame(
            {
                "query_id": query_ids,
                "text": [f"text of {q}" for q in query_ids],
                "split": ["holdout" if q in holdout else "dev" for q in query_ids],
            }
        )
        if slices is not None:
            table = table.with_columns(
                pl.Series("slices", [slices.get(q, []) for q in query_ids], dtype=pl.List(pl.Utf8))
            )
        if must_never_break:
            table = table.with_columns(pl.Series("must_never_break", [q in must_never_break for q in query_ids]))
        table.write_parquet(self.root / "data" / "work" / "queries.parquet")

    def write_qrels(self, rows: list[tuple[str, str, int]]) -> pl.DataFrame:
        qrels = pl.DataFrame(rows, schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64}, orient="row")
        qrels.write_parquet(self.root / "data" / "work" / "qrels.parquet")
        return qrels

    def write_run(self, config_id: str, ranking: dict[str, list[str]]) -> pl.DataFrame:
        """A chunk-level run: ranking maps a query to its chunk list, best first; a chunk
        ``d7#2`` belongs to document ``d7``."""
        rows = [
            (q, chunk, chunk.split("#")[0], float(100 - rank), rank)
            for q, chunks in ranking.items()
            for rank, chunk in enumerate(chunks, 1)
        ]
        run = pl.DataFrame(
            rows,
            schema={"query_id": pl.Utf8, "chunk_id": pl.Utf8, "doc_id": pl.Utf8, "score": pl.Float64, "rank": pl.Int64},
            orient="row",
        )
        folder = self.root / "data" / "work" / "runs" / config_id.replace("/", "_")
        folder.mkdir(parents=True, exist_ok=True)
        run.write_parquet(folder / "run.parquet")
        (folder / "run.json").write_text(json.dumps({"config_id": config_id, "ops": {}}))
        return run

    def cli(self, capsys, *argv: str) -> tuple[int, str, str]:
        old = os.getcwd()
        os.chdir(self.root)
        try:
            code = cli_main(list(argv))
        finally:
            os.chdir(old)
        out = capsys.readouterr()
        return code, out.out, out.err


def qids(n: int) -> list[str]:
    return [f"q{i:03d}" for i in range(n)]


def constructed(n: int = 60, seed: int = 7) -> dict[str, dict[str, list[float]]]:
    """base; clearly better; clearly worse; pure noise with a mean difference of exactly 0."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.8, n)
    jitter = rng.normal(0.0, 0.02, n)
    noise = rng.normal(0.0, 0.1, n // 2)
    symmetric = np.concatenate([noise, -noise])  # mean exactly 0, large spread
    recall = rng.uniform(0.5, 0.9, n)
    return {
        "base": {"ndcg@10": base.tolist(), "recall@100": recall.tolist(), "hit@10": [1.0] * n},
        "better": {"ndcg@10": (base + 0.1 + jitter).tolist(), "recall@100": recall.tolist(), "hit@10": [1.0] * n},
        "worse": {
            "ndcg@10": (base - 0.1 + jitter).tolist(),
            "recall@100": (recall - 0.05).tolist(),
            "hit@10": [1.0] * n,
        },
        "noise": {"ndcg@10": (base + symmetric).tolist(), "recall@100": recall.tolist(), "hit@10": [1.0] * n},
    }
