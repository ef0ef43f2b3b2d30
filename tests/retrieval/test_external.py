"""External runs (releval.retrieval.external, stages/external.py): a run file produced elsewhere,
checked against the pipeline's tables and stored as a run folder like every other family's."""

import json
import sys

import polars as pl
import pytest

from releval import io
from releval.errors import InputError
from releval.inputs.trec import write_trec_run
from releval.retrieval import external, runs
from releval.retrieval.fusion import FusionConfig, fuse
from releval.tables import CHUNK_RUN
from support.commands import run
from support.pydocs_mini import make_pydocs_project, mini_queries

QUERIES = pl.DataFrame({"query_id": ["q1", "q2", "h1"], "text": ["a", "b", "c"], "split": ["dev", "dev", "holdout"]})
DOCS = pl.Series("doc_id", ["d1", "d2", "d3"])
DESCRIPTION = {"system": "Elasticsearch 8 BM25", "produced": "2026-05-02", "by": "search team"}


def entry(tmp_path, text: str, name: str = "run.trec", **fields) -> external.ExternalRun:
    (tmp_path / name).write_text(text, encoding="utf-8")
    declared = {"path": name, "format": fields.pop("format", "trec"), "description": DESCRIPTION, **fields}
    return external.declared("prod", declared)


def convert(tmp_path, text: str, **fields) -> external.Converted:
    return external.convert(entry(tmp_path, text, **fields), QUERIES, DOCS, root=tmp_path)


GOOD = "q1 Q0 d2 1 3.5 es\nq1 Q0 d1 2 1.0 es\nq2 Q0 d3 1 2.0 es\nh1 Q0 d1 1 9.0 es\n"


def test_a_trec_file_becomes_a_run_folder_of_the_same_form_as_the_others(tmp_path):
    converted = convert(tmp_path, GOOD)
    assert converted.run.schema == CHUNK_RUN.schema
    assert converted.run.rows() == [("q1", "d2", "d2", 3.5, 1), ("q1", "d1", "d1", 1.0, 2), ("q2", "d3", "d3", 2.0, 1)]
    meta = converted.meta
    assert meta["config_id"] == "external/prod" and meta["kind"] == "external"
    for key in ("inputs", "models", "ops", "queries", "chunking"):  # the keys scoring and fusion read
        assert key in meta
    record = meta["external"]
    assert record["sha256"] == io.sha256_file(tmp_path / "run.trec")
    assert (record["path"], record["format"], record["description"]) == ("run.trec", "trec", DESCRIPTION)
    # The holdout query's row is dropped and counted; nothing of it is stored.
    assert (record["queries_dropped"], record["rows_dropped"], record["queries_kept"]) == (1, 1, 2)
    assert any("holdout queries stay sealed" in line for line in external.summary(record))


def test_jsonl_and_parquet_files_give_the_same_run(tmp_path):
    trec = convert(tmp_path, GOOD).run
    rows = [
        dict(zip(("query_id", "doc_id", "score"), (f[0], f[2], float(f[4])))) for f in map(str.split, GOOD.splitlines())
    ]
    jsonl = convert(tmp_path, "".join(json.dumps(r) + "\n" for r in rows), format="jsonl").run
    pl.DataFrame(rows).write_parquet(tmp_path / "run.parquet")
    declared = {"path": "run.parquet", "format": "parquet", "description": DESCRIPTION}
    parquet = external.convert(external.declared("prod", declared), QUERIES, DOCS, root=tmp_path).run
    assert trec.equals(jsonl) and trec.equals(parquet)


@pytest.mark.parametrize(
    ("text", "line", "field", "says"),
    [
        ("q1 Q0 d1 1 1.0 es\nq9 Q0 d1 1 1.0 es\n", 2, "query_id", "'q9' is not a query"),
        ("q1 Q0 d1 1 1.0 es\n\nq1 Q0 dx 2 0.5 es\n", 3, "doc_id", "'dx' is not a document of the corpus"),
        ("q1 Q0 d1 1 1.0 es\nq1 Q0 d1 2 0.5 es\n", 2, "doc_id", "duplicate"),
        ("q1 Q0 d1 1 nan es\n", 1, "score", "finite"),
        ("q1 Q0 d1 1 1.0 es\nq1 Q0 d2 first 0.5 es\n", 2, "rank", "whole number"),
        ("q1 Q0 d1 1 1.0 es\nq1 Q0 d2 1 0.5 es\n", 2, "rank", "rank 1 of query 'q1' repeats"),
        ("q1 Q0 d1 1 1.0\n", 1, "tag", "expected 6"),
    ],
)
def test_bad_files_are_refused_naming_file_line_and_field(tmp_path, text, line, field, says):
    with pytest.raises(InputError) as caught:
        convert(tmp_path, text)
    assert (caught.value.file, caught.value.line, caught.value.field) == ("run.trec", line, field)
    assert says in str(caught.value)


def test_ranks_that_disagree_with_scores_are_reported_and_the_scores_decide(tmp_path):
    converted = convert(tmp_path, "q1 Q0 d1 1 1.0 es\nq1 Q0 d2 2 3.0 es\n")
    assert converted.run["doc_id"].to_list() == ["d2", "d1"]
    assert converted.meta["external"]["queries_ranked_otherwise_by_file"] == 1


def test_chunk_ids_map_to_documents_through_the_declared_pattern(tmp_path):
    text = "q1 Q0 d1#0-10 1 2.0 es\nq1 Q0 d1#10-20 2 1.5 es\nq1 Q0 d3#0-5 3 1.0 es\n"
    converted = convert(tmp_path, text, unit="chunks", chunk_pattern=r"^(?P<doc_id>[^#]+)#")
    assert converted.run["doc_id"].to_list() == ["d1", "d1", "d3"]
    with pytest.raises(InputError) as caught:
        convert(
            tmp_path,
            "q1 Q0 d1#0-10 1 2.0 es\nq1 Q0 nohash 2 1.0 es\n",
            unit="chunks",
            chunk_pattern="^(?P<doc_id>[^#]+)#",
        )
    assert (caught.value.line, caught.value.field) == (2, "doc_id")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"description": {"system": "x", "produced": "y"}}, "externals.prod.description.by"),
        ({"unit": "passages"}, "externals.prod.unit"),
        ({"unit": "chunks"}, "externals.prod.chunk_pattern"),
        ({"unit": "chunks", "chunk_pattern": "(no-group)"}, "externals.prod.chunk_pattern"),
        ({"format": "csv"}, "externals.prod.format"),
        ({"colour": "red"}, "externals.prod.colour"),
    ],
)
def test_a_declaration_missing_what_it_must_say_is_refused_naming_the_key(fields, field):
    declared = {"path": "run.trec", "format": "trec", "description": DESCRIPTION, **fields}
    with pytest.raises(InputError) as caught:
        external.declared("prod", declared)
    assert caught.value.field == field


def test_an_external_run_is_a_configuration_of_the_grid_and_a_fusion_member():
    grid = {
        "chunkings": ["c256"],
        "models": ["minilm"],
        "external": ["prod"],
        "fused": {"mix": {"fusion": "rrf", "runs": ["external/prod", "model/minilm/c256"]}},
    }
    assert runs.grid_run_folders(grid, "r")["external/prod"].as_posix() == "r/external/prod"
    assert "rrf(external/prod,minilm)/c256" in runs.grid_config_ids(grid)
    assert runs.member_name("external/prod") == "external/prod"


def test_fusion_with_an_external_run_is_over_documents():
    chunk_run = pl.DataFrame(
        {
            "query_id": ["q1"] * 3,
            "chunk_id": ["d1#0", "d1#9", "d2#0"],
            "doc_id": ["d1", "d1", "d2"],
            "score": [3.0, 2.0, 1.0],
            "rank": [1, 2, 3],
        },
        schema=CHUNK_RUN.schema,
    )
    external_run = pl.DataFrame(
        {
            "query_id": ["q1", "q1"],
            "chunk_id": ["d2", "d1"],
            "doc_id": ["d2", "d1"],
            "score": [5.0, 4.0],
            "rank": [1, 2],
        },
        schema=CHUNK_RUN.schema,
    )
    inputs = runs.fusion_inputs([(external_run, {"kind": "external"}), (chunk_run, {"kind": "dense"})])
    fused = fuse(dict(zip(["external/prod", "minilm"], inputs)), FusionConfig(method="rrf", k=60))
    # One row per document: d1 (ranks 2 and 1) and d2 (ranks 1 and 2) tie at 1/61 + 1/62.
    assert sorted(fused["doc_id"].to_list()) == ["d1", "d2"]
    assert fused["score"].to_list() == pytest.approx([1 / 61 + 1 / 62] * 2)
    # Without an external member the chunk runs fuse as they are, chunk by chunk.
    assert runs.fusion_inputs([(chunk_run, {"kind": "dense"})])[0].equals(chunk_run)


# --------------------------------------------------------------------------- the real pipeline


@pytest.mark.heavy
@pytest.mark.slow
def test_a_bm25_run_exported_elsewhere_scores_exactly_as_its_configuration(tmp_path):
    """A bm25 run of the mini project, exported as a TREC file (holdout queries included) and declared
    external: `dvc repro` scores it with the bm25 configuration's numbers, keeps the holdout sealed,
    and reports it in metrics.json, grid.md and the card with its file's sha256."""
    project = make_pydocs_project(
        tmp_path / "project",
        "grid.chunkings=[c256]",
        "grid.models=[wordllama]",
        "grid.fusions=[]",
        "grid.reranked.minilm-c256-e5.run=model/wordllama/c256",
        "rerankers.e5.model=wordllama",
        "~fused@grid.fused.splade_minilm",
        "grid.baseline=bm25/c256",
    )
    run(["dvc", "repro"], project)
    # "Produced elsewhere": the same BM25 over every query, dev and holdout, as a TREC file.
    scratch = tmp_path / "elsewhere"
    run(
        [
            sys.executable,
            str(project / "stages" / "bm25.py"),
            "--chunking",
            "c256",
            "--split",
            "all",
            "--out-root",
            str(scratch),
        ],
        project,
    )
    exported = runs.collapse_to_documents(pl.read_parquet(scratch / "c256" / "run.parquet"))
    (project / "data" / "external").mkdir()
    write_trec_run(
        project / "data" / "external" / "prod.trec", exported.select("query_id", "doc_id", "score"), tag="es"
    )
    (project / "conf" / "external" / "prod.yaml").write_text(
        "path: data/external/prod.trec\nformat: trec\nunit: documents\n"
        "description: {system: BM25 exported as TREC, produced: today, by: releval tests}\n",
        encoding="utf-8",
    )
    run(["releval", "params", "+external@externals.prod=prod", "grid.external=[prod]"], project)
    result = run(["dvc", "repro"], project)
    assert "holdout queries stay sealed" in result.stdout

    metrics = json.loads((project / "reports" / "metrics.json").read_text())["configs"]
    ours, theirs = metrics["bm25/c256"], metrics["external/prod"]
    for metric in ("ndcg@10", "recall@20", "mrr@10", "map", "judged@10"):
        assert theirs[metric] == pytest.approx(ours[metric], abs=1e-12), metric
    assert theirs["counts"] == ours["counts"]
    stored = pl.read_parquet(project / "data" / "work" / "runs" / "external" / "prod" / "run.parquet")
    assert set(stored["query_id"]) <= mini_queries("dev")
    assert not set(stored["query_id"]) & mini_queries("holdout")
    assert (
        "`external/prod`" in (project / "reports" / "grid.md").read_text()
        or "external/prod" in (project / "reports" / "grid.md").read_text()
    )
    sha = io.sha256_file(project / "data" / "external" / "prod.trec")
    observations = json.loads((project / "reports" / "observations.json").read_text())["observations"]
    observed = next(o for o in observations if o["config_id"] == "external/prod")
    assert observed["external"]["sha256"] == sha
    assert observed["external"]["description"]["system"] == "BM25 exported as TREC"
    assert run(["dvc", "status"], project).stdout.strip().endswith("up to date.")
