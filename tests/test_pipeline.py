"""The real pipeline, run by DVC in temporary git repositories on the small pydocs cut.

The session fixture ``default_project`` holds the shipped default grid (minilm and e5small,
chunkings c256 and c512, BM25, RRF, the e5 reranker), already run and committed. Tests that only
read its outputs read it; every test that changes something works on its own copy
(``copy_project``), recomposes params.yaml with the fixture's overrides plus its one change and
checks what DVC reruns. No test depends on another's state or on the order they run in.
"""

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support.commands import ran_stages, run
from support.projects import copy_project, output_bytes
from support.pydocs_mini import (
    DEFAULT_MODELS,
    MINI_CHUNKINGS,
    MINI_CONFIGS,
    MINI_DATASET,
    make_pydocs_project,
    mini_queries,
)

pytestmark = pytest.mark.slow

MODELS, CHUNKINGS = DEFAULT_MODELS, ("c256", "c512")
UP_TO_DATE = "Data and pipelines are up to date."
# Stages DVC never restores from its run cache: archive's output persists; the others have outputs
# with `cache: false` beyond metrics and plots. They rerun (cheaply) whenever their inputs move.
NEVER_RUN_CACHED = {"archive", "rescore", "score", "report"}
# The `params` stage checks params.yaml against conf/ (no outputs): it runs whenever either changes.
CHECKS = {"params"}


def compose(project: Path, *change: str) -> None:
    """params.yaml as the fixture composed it, plus ``change`` (earlier recorded changes forgotten)."""
    run(["releval", "params", "--reset", MINI_DATASET, MINI_CHUNKINGS, *change], project)


def repro(project: Path, *args: str) -> tuple[set[str], str]:
    """Run `dvc repro`; the stages it executed and its whole output."""
    result = run(["dvc", "repro", *args], project)
    return ran_stages(result.stdout), result.stdout + result.stderr


# --------------------------------------------------------------------------- what the default grid produced


def test_grid_runs_every_configuration(default_project):
    metrics = json.loads((default_project / "reports" / "metrics.json").read_text())
    assert set(metrics["configs"]) == MINI_CONFIGS
    contract = metrics["contract"]
    assert contract["judgments_version"] == "v2" and contract["queries"] == len(mini_queries("dev"))
    for cid, row in metrics["configs"].items():
        assert 0.0 < row["ndcg@10"] <= 1.0, cid
        assert 0.0 < row["recall@100"] <= 1.0, cid
    per_query = pl.read_parquet(default_project / "reports" / "per_query.parquet")
    assert per_query["config_id"].n_unique() == len(MINI_CONFIGS)
    grid = (default_project / "reports" / "grid.md").read_text()
    assert "`rrf(minilm,bm25)/c256`" in grid and "`minilm/c256+rerank(e5)`" in grid and "index MB" in grid


# Sparse: the vocabulary size.
DIMENSIONS = {"minilm": 384, "e5small": 384, "splade": 30522, "wordllama": 256, "minilm_l3": 384}


def test_every_family_records_its_ops(default_project):
    configs = json.loads((default_project / "reports" / "metrics.json").read_text())["configs"]
    machine = json.loads((default_project / "reports" / "ops.json").read_text())
    assert machine["machine"]["logical_cores"] >= 1 and machine["latency_protocol"]["threads"] == 1
    for cid in (f"{m}/{c}" for m in MODELS for c in CHUNKINGS):
        ops = configs[cid]["ops"]  # cost figures: the same on every machine
        model = cid.split("/")[0]
        assert ops["dimension"] == DIMENSIONS[model], cid
        assert ops["index_bytes"] > 0, cid
        sparse = model == "splade"
        assert ("doc_nonzeros_mean" in ops and "query_nonzeros_mean" in ops) == sparse, cid
        if sparse:
            assert 0 < ops["query_nonzeros_mean"] < ops["doc_nonzeros_mean"] < ops["vocabulary_size"], cid
        assert 0.0 <= ops["truncation_rate"] <= 1.0, cid
        assert ops["ann_recall@10"] == 1.0, cid  # searched exactly at this size
        assert not set(ops) & {"chunks_per_s", "latency_ms_p50", "latency_ms_p95", "peak_rss_bytes"}, cid
        figures = machine["configs"][cid]  # machine figures, apart
        assert figures["chunks_per_s"] > 0, cid
        assert figures["peak_rss_bytes"] > 100 * 2**20, cid  # the query side really holds a model
        assert figures["latency_ms_p95"] >= figures["latency_ms_p50"] > 0, cid


def test_no_param_is_named_like_dvc_metadata(default_project):
    """DVC's run cache hashes params with keys 'size' and 'nfiles' removed (they are file metadata
    to it), so a param with such a name could restore the outputs of a different setting."""

    def keys(node):
        if isinstance(node, dict):
            for key, value in node.items():
                yield key
                yield from keys(value)

    params = yaml.safe_load((default_project / "params.yaml").read_text())
    assert "grid" in params and "models" in params
    assert not {"size", "nfiles"} & set(keys(params))


# --------------------------------------------------------------------------- one change, and what DVC reruns


def test_noop_repro_runs_nothing(default_project, tmp_path):
    project = copy_project(default_project, tmp_path / "noop")
    compose(project)  # recomposing the same configuration changes nothing
    assert run(["git", "status", "--porcelain"], project).stdout == ""
    ran, _ = repro(project)
    assert ran == set()
    assert run(["dvc", "status"], project).stdout.strip() == UP_TO_DATE


@pytest.mark.heavy  # repeats part of the pipeline (30-85 s); make test-heavy
def test_fusion_change_reruns_only_fusion_and_scoring(default_project, tmp_path):
    project = copy_project(default_project, tmp_path / "fusion")
    compose(project, "fusions.rrf.k=10")
    status = run(["dvc", "status"], project).stdout
    assert "fuse@rrf-minilm-c256" in status and "encode@" not in status
    ran, _ = repro(project)
    fused = {f"fuse@rrf-{m}-{c}" for m in MODELS for c in CHUNKINGS} | {"fuse-runs@splade_minilm"}
    assert ran == fused | CHECKS | {"score", "archive", "rescore", "report"}


@pytest.mark.heavy  # repeats part of the pipeline (30-85 s); make test-heavy
def test_model_change_reencodes_only_that_model(default_project, tmp_path):
    # The static model re-encodes in a blink; the DVC wiring is the same for every family.
    project = copy_project(default_project, tmp_path / "model")
    compose(project, "models.wordllama.batch_size=7")
    ran, _ = repro(project)
    assert {s for s in ran if s.startswith("encode@")} == {"encode@wordllama-c256", "encode@wordllama-c512"}
    upstream = ("ingest", "queries", "judgments", "model@", "chunk@", "bm25@")
    cells = ("encode@", "index@", "retrieve@", "fuse@")
    assert not any(s.startswith(upstream) or (s.startswith(cells) and "wordllama" not in s) for s in ran), ran
    assert run(["dvc", "status"], project).stdout.strip() == UP_TO_DATE


def test_judgment_change_reencodes_nothing(default_project, tmp_path):
    from releval.judging.judgments import read_manifest, set_files, write_version

    project = copy_project(default_project, tmp_path / "judgments")
    version = project / "data" / "judgments" / "v2"
    records = [json.loads(line) for line in (version / "judgments.jsonl").read_text().splitlines() if line.strip()]
    pairs = [(r["query_id"], r["doc_id"]) for r in records]
    # Regrade one relevant document of a dev query, judged by one annotator only.
    i = next(
        i
        for i, r in enumerate(records)
        if r["query_id"] in mini_queries("dev") and r["grade"] == 3 and pairs.count(pairs[i]) == 1
    )
    records[i]["grade"] = 1
    manifest, errors = read_manifest(version / "manifest.yaml", expected_version="v2")
    assert manifest is not None, errors
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    write_version(version, manifest, data, set_files(version))
    qrels = (project / "data" / "work" / "qrels.parquet").read_bytes()
    ran, _ = repro(project)
    assert ran == {"judgments", "score", "rescore", "report"}
    assert (project / "data" / "work" / "qrels.parquet").read_bytes() != qrels  # the regrade reached scoring


def test_bad_chunk_size_fails_clearly_and_keeps_earlier_outputs(default_project, tmp_path):
    project = copy_project(default_project, tmp_path / "badchunk")
    good = output_bytes(project, ("data/work",))

    compose(project, "chunkings.c256.tokens=0")
    result = run(["dvc", "repro"], project, check=False)
    assert result.returncode != 0
    assert "params.yaml" in result.stderr and "chunkings.c256.tokens" in result.stderr
    assert ran_stages(result.stdout) == CHECKS | {"chunk@c256"}
    # Every other output is as it was (DVC itself removes the failing stage's own outputs before running it).
    own = {"data/work/chunks/c256.parquet", "data/work/chunks/c256.json"}
    assert {k: v for k, v in output_bytes(project, ("data/work",)).items() if k not in own} == {
        k: v for k, v in good.items() if k not in own
    }

    # Back to the good configuration: the chunks come back from DVC's cache (the lock still records
    # them), nothing is re-chunked, re-encoded, re-indexed or re-retrieved, every byte as before.
    compose(project)
    ran, log = repro(project)
    assert ran <= NEVER_RUN_CACHED | CHECKS, ran
    assert "Stage 'chunk@c256' is cached" in log
    assert not any(s.startswith(("chunk@", "encode@", "index@", "retrieve@")) for s in ran)
    assert output_bytes(project, ("data/work",)) == good
    assert run(["dvc", "status"], project).stdout.strip() == UP_TO_DATE


# --------------------------------------------------------------------------- no noise


@pytest.mark.heavy  # two models through every stage by a real dvc repro: the slowest of make test (about 2 min)
def test_same_model_under_two_names_gives_the_same_numbers(tmp_path):
    """The pipeline adds no noise: one model run under two names scores the same on every query."""
    from releval.retrieval.runs import rank_by_score

    project = make_pydocs_project(
        tmp_path / "twins",
        "grid.chunkings=[c256]",
        "~model@models.e5small",
        "~model@models.splade",
        "~model@models.wordllama",
        "~model@models.minilm_l3",
        "+model@models.minilm_b=minilm",
        "grid.models=[minilm,minilm_b]",
        "rerankers.e5.model=minilm_b",
        "~fused@grid.fused.splade_minilm",
    )
    run(["dvc", "repro"], project)
    configs = json.loads((project / "reports" / "metrics.json").read_text())["configs"]
    assert set(configs) == {
        "minilm/c256",
        "minilm_b/c256",
        "bm25/c256",
        "rrf(minilm,bm25)/c256",
        "rrf(minilm_b,bm25)/c256",
        "minilm/c256+rerank(e5)",
    }
    for a, b in (("minilm/c256", "minilm_b/c256"), ("rrf(minilm,bm25)/c256", "rrf(minilm_b,bm25)/c256")):
        assert configs[a]["ndcg@10"] == pytest.approx(configs[b]["ndcg@10"], abs=1e-6)
        assert configs[a]["recall@100"] == pytest.approx(configs[b]["recall@100"], abs=1e-6)
    work = project / "data" / "work"
    assert (work / "emb" / "minilm" / "c256" / "embeddings.npy").read_bytes() == (
        work / "emb" / "minilm_b" / "c256" / "embeddings.npy"
    ).read_bytes()
    # The same chunks with the same scores. (Not the same bytes: chunks of exactly equal score may come
    # out of the HNSW index in either order, and its build is not byte-reproducible.)
    one, two = (
        rank_by_score(pl.read_parquet(work / "runs" / "model" / m / "c256" / "run.parquet"))
        for m in ("minilm", "minilm_b")
    )
    assert one.equals(two)
    per_query = pl.read_parquet(project / "reports" / "per_query.parquet")
    columns = [c for c in per_query.columns if c != "config_id"]
    one, two = (
        per_query.filter(pl.col("config_id") == cid).select(columns).sort("query_id")
        for cid in ("minilm/c256", "minilm_b/c256")
    )
    assert one.equals(two)
