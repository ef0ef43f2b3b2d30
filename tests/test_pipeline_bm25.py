"""BM25 through the real pipeline on all of Cranfield equals an independent rank-bm25 run."""

import numpy as np
import polars as pl
import pytest
from rank_bm25 import BM25Okapi

from support.commands import run
from support.cranfield import require_cranfield
from support.projects import make_project
from releval.retrieval.bm25 import TokenizerConfig, tokenize

pytestmark = pytest.mark.slow


def test_pipeline_bm25_matches_rank_bm25_query_by_query(tmp_path):
    cranfield = require_cranfield()
    project = make_project(tmp_path / "bm25")
    run(
        [
            "releval",
            "params",
            "dataset=cranfield",
            "judgments=cranfield",
            f"dataset.corpus.path={cranfield / 'cran.all.1400'}",
            f"dataset.queries.path={cranfield / 'cran.qry'}",
            f"judgments.path={cranfield / 'cranqrel'}",
        ],
        project,
    )
    run(["dvc", "repro", "bm25@c256"], project)
    chunks = pl.read_parquet(project / "data/work/chunks/c256.parquet")
    queries = pl.read_parquet(project / "data/work/queries.parquet")
    pipeline = pl.read_parquet(project / "data/work/runs/bm25/c256/run.parquet")
    assert queries.height == 225 and chunks["doc_id"].n_unique() == 1398  # two Cranfield docs are empty

    cfg = TokenizerConfig()
    reference = BM25Okapi([tokenize(t, cfg) for t in chunks["text"].to_list()], k1=1.5, b=0.75, epsilon=0.25)
    chunk_ids = np.array(chunks["chunk_id"].to_list())
    by_query = {q: frame for (q,), frame in pipeline.group_by("query_id")}
    for query_id, text in queries.select("query_id", "text").iter_rows():
        expected = reference.get_scores(tokenize(text, cfg))
        got = by_query[query_id].sort("rank")
        keep = expected > 0
        assert got.height == min(int(keep.sum()), 1000), query_id
        order = np.lexsort((np.arange(len(expected)), -expected))[: got.height]
        np.testing.assert_allclose(got["score"].to_numpy(), expected[order], rtol=0, atol=1e-9)
        # Each returned chunk carries its own reference score; chunks whose scores differ by float
        # rounding only (1e-15) may swap places, which the rank-wise check above already allows.
        position = {c: i for i, c in enumerate(chunk_ids)}
        own = expected[[position[c] for c in got["chunk_id"].to_list()]]
        np.testing.assert_allclose(got["score"].to_numpy(), own, rtol=0, atol=1e-9)
