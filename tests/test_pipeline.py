"""The real pipeline, run by DVC in a temporary git repository on a slice of Cranfield.

One repro builds a small grid (two MiniLM configurations, one chunking, BM25, RRF and a
reranked run); the tests then change one input at a time and check what DVC reruns.
"""

import json
import shutil
import time
from pathlib import Path

import polars as pl
import pytest

from conftest import make_project, ran_stages, require_cranfield, run

pytestmark = pytest.mark.slow


def overrides(cranfield: Path, qrels: Path, *extra: str) -> list[str]:
    return [
        "dataset=cranfield-mini",
        "judgments=cranfield",
        f"dataset.corpus.path={cranfield / 'cran.all.1400'}",
        f"dataset.queries.path={cranfield / 'cran.qry'}",
        f"judgments.path={qrels}",
        "~model@models.e5small",
        "+model@models.minilm_b=minilm",
        "grid.models=[minilm,minilm_b]",
        "grid.chunkings=[c256]",
        "rerankers.e5.model=minilm_b",
        "rerankers.e5.top_n=20",
        *extra,
    ]


class Project:
    def __init__(self, path: Path, cranfield: Path):
        self.path, self.cranfield = path, cranfield
        self.qrels = path / "data" / "cranqrel"

    def compose(self, *extra: str) -> None:
        run(["releval", "params", *overrides(self.cranfield, self.qrels, *extra)], self.path)

    def repro(self, *args: str) -> set[str]:
        return ran_stages(run(["dvc", "repro", *args], self.path).stdout)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    cranfield = require_cranfield()
    proj = Project(make_project(tmp_path_factory.mktemp("pipeline")), cranfield)
    proj.qrels.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(cranfield / "cranqrel", proj.qrels)
    proj.compose()
    proj.first_run = proj.repro()
    return proj


def test_grid_runs_every_configuration(project):
    metrics = json.loads((project.path / "reports" / "metrics.json").read_text())
    assert set(metrics["configs"]) == {
        "minilm/c256", "minilm_b/c256", "bm25/c256", "rrf(minilm,bm25)/c256", "rrf(minilm_b,bm25)/c256",
        "minilm/c256+rerank(e5)"}
    contract = metrics["contract"]
    assert contract["judgments_version"] == "cranfield-1" and contract["queries"] == 40
    for cid, row in metrics["configs"].items():
        assert 0.0 < row["ndcg@10"] <= 1.0, cid
        assert 0.0 < row["recall@100"] <= 1.0, cid
    # The same model under two names gives the same numbers: the pipeline adds no noise.
    assert metrics["configs"]["minilm/c256"]["ndcg@10"] == pytest.approx(metrics["configs"]["minilm_b/c256"]["ndcg@10"], abs=1e-6)
    per_query = pl.read_parquet(project.path / "reports" / "per_query.parquet")
    assert per_query["config_id"].n_unique() == 6
    grid = (project.path / "reports" / "grid.md").read_text()
    assert "`rrf(minilm,bm25)/c256`" in grid and "p95 ms" in grid


def test_dense_ops_are_recorded(project):
    ops = json.loads((project.path / "reports" / "metrics.json").read_text())["configs"]["minilm/c256"]["ops"]
    assert ops["dimension"] == 384
    assert ops["chunks_per_s"] > 0 and ops["index_bytes"] > 0
    assert 0.0 <= ops["truncation_rate"] <= 1.0
    assert ops["ann_recall@10"] > 0.9
    assert ops["peak_rss_bytes"] > 100 * 2**20  # the query side really holds a model
    assert ops["latency_ms_p95"] >= ops["latency_ms_p50"] > 0


def test_noop_repro_runs_nothing(project):
    start = time.perf_counter()
    assert project.repro() == set()
    print(f"no-op dvc repro: {time.perf_counter() - start:.2f} s")


def test_fusion_change_reruns_only_fusion_and_scoring(project):
    project.compose("fusions.rrf.k=10")
    status = run(["dvc", "status"], project.path).stdout
    assert "fuse@rrf-minilm-c256" in status and "encode@" not in status
    assert project.repro() == {"fuse@rrf-minilm-c256", "fuse@rrf-minilm_b-c256", "score", "archive", "rescore",
                              "report"}


def test_model_change_reencodes_only_that_model(project):
    project.compose("fusions.rrf.k=10", "models.minilm_b.batch_size=7")
    ran = project.repro()
    assert "encode@minilm_b-c256" in ran
    assert not any(s.startswith(("encode@minilm-", "chunk@", "ingest", "bm25@")) for s in ran), ran


def test_judgment_change_reencodes_nothing(project):
    lines = project.qrels.read_text().splitlines(keepends=True)
    q, d, code = lines[0].split()[:3]
    lines[0] = f"{q} {d} 4 \r\n" if code != "4" else f"{q} {d} 1 \r\n"
    project.qrels.write_text("".join(lines))
    assert project.repro() == {"judgments", "score", "rescore", "report"}


def test_no_param_is_named_like_dvc_metadata(project):
    """DVC's run cache hashes params with keys 'size' and 'nfiles' removed (they are file metadata
    to it), so a param with such a name could restore the outputs of a different setting."""
    import yaml

    def keys(node):
        if isinstance(node, dict):
            for key, value in node.items():
                yield key
                yield from keys(value)

    params = yaml.safe_load((project.path / "params.yaml").read_text())
    assert not {"size", "nfiles"} & set(keys(params))


def test_bad_chunk_size_fails_clearly_and_keeps_earlier_outputs(project):
    docs = project.path / "data" / "work" / "docs.parquet"
    before = docs.read_bytes()
    project.compose("fusions.rrf.k=10", "models.minilm_b.batch_size=7", "chunkings.c256.tokens=0")
    result = run(["dvc", "repro"], project.path, check=False)
    assert result.returncode != 0
    assert "params.yaml" in result.stderr and "chunkings.c256.tokens" in result.stderr
    assert docs.read_bytes() == before
    project.compose("fusions.rrf.k=10", "models.minilm_b.batch_size=7")
    assert not any(s.startswith("encode@") for s in project.repro())  # restored from DVC's run cache
