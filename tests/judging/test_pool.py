"""`releval pool`: the unjudged top-k pool, written blind to system ranks, and importing it back."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import re
from pathlib import Path

import polars as pl
import pytest

from releval.retrieval import runs
from releval.cli import main
from releval.judging.pool import build_pool, read_filled_pool, snippet
from releval.judging.judgments import Manifest, load_version
from support.projects import declare_dataset

DOCS = {
    "alpha": ("Alpha", "alpha text " * 40),
    "beta": ("Beta", "beta\n\ntext   here"),
    "gamma": ("Gamma", "gamma"),
    "delta": ("Delta", "delta"),
    "omega": ("Omega", "omega"),
}


@pytest.fixture
def dataset(tmp_path: Path, monkeypatch) -> Path:
    """data/ of a project (the working directory) whose conf/ declares the dataset ``pooled`` that the
    judgment set v1 names."""
    monkeypatch.chdir(tmp_path)
    declare_dataset(tmp_path, "pooled", "data/corpus.jsonl.gz", "data/queries.jsonl")
    root = tmp_path / "data"
    (root / "judgments" / "v1").mkdir(parents=True)
    (root / "queries.jsonl").write_text(
        json.dumps({"query_id": "q1", "text": "first\nquestion", "split": "dev"})
        + "\n"
        + json.dumps({"query_id": "q2", "text": "second question", "split": "holdout"})
        + "\n"
    )
    corpus = "".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, (t, x) in DOCS.items())
    (root / "corpus.jsonl.gz").write_bytes(gzip.compress(corpus.encode(), mtime=0))
    data = (json.dumps({"query_id": "q1", "doc_id": "omega", "grade": 1, "annotator": "alice"}) + "\n").encode()
    (root / "judgments" / "v1" / "judgments.jsonl").write_bytes(data)
    (root / "judgments" / "v1" / "RUBRIC.md").write_text("rubric\n")
    manifest = Manifest(
        "v1",
        None,
        "2026-11-30",
        {0: "no", 1: "partly", 2: "yes"},
        "RUBRIC.md",
        ("alice",),
        hashlib.sha256(data).hexdigest(),
        dataset="pooled",
    )
    (root / "judgments" / "v1" / "manifest.yaml").write_text(manifest.to_yaml())
    # Run A (chunks): q1 ranks omega, gamma, gamma(again), alpha, beta; q2 ranks delta, alpha.
    run_a = pl.DataFrame(
        {
            "query_id": ["q1"] * 5 + ["q2"] * 2,
            "chunk_id": ["omega#0-5", "gamma#0-5", "gamma#5-9", "alpha#0-5", "beta#0-4", "delta#0-5", "alpha#0-5"],
            "doc_id": ["omega", "gamma", "gamma", "alpha", "beta", "delta", "alpha"],
            "score": [0.9, 0.8, 0.7, 0.6, 0.5, 0.9, 0.1],
            "rank": [1, 2, 3, 4, 5, 1, 2],
        }
    )
    runs.write_run(root / "runs" / "a", run_a, {"config_id": "a"})
    # Run B (TREC file): q1 ranks beta first.
    (tmp_path / "b.run").write_text("q1 Q0 beta 1 5.0 b\nq1 Q0 delta 2 4.0 b\nq1 Q0 alpha 3 3.0 b\n")
    return root


def pool(*args: str) -> int:
    return main(["pool", *map(str, args)])


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_pool_is_the_union_of_top_k_less_judged_sorted_blind(dataset, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RELEVAL_PROGRESS", "line")
    out = tmp_path / "pool.csv"
    code = pool(
        "--runs",
        dataset / "runs",
        tmp_path / "b.run",
        "--queries",
        dataset / "queries.jsonl",
        "--corpus",
        dataset / "corpus.jsonl.gz",
        "--judgments",
        dataset / "judgments" / "v1",
        "--depth",
        3,
        "--out",
        out,
    )
    assert code == 0
    rows = read_csv(out)
    assert list(rows[0]) == ["query_id", "query", "doc_id", "title", "snippet", "grade", "annotator", "notes"]
    # A top-3 documents: q1 omega, gamma, alpha (gamma's two chunks are one document); q2 delta, alpha.
    # B top-3: q1 beta, delta, alpha. Less (q1, omega), judged in v1. Sorted by query then doc_id.
    assert [(r["query_id"], r["doc_id"]) for r in rows] == [
        ("q1", "alpha"),
        ("q1", "beta"),
        ("q1", "delta"),
        ("q1", "gamma"),
        ("q2", "alpha"),
        ("q2", "delta"),
    ]
    assert all(r["grade"] == "" and r["annotator"] == "" and r["notes"] == "" for r in rows)
    assert rows[0]["query"] == "first question" and rows[1]["title"] == "Beta"
    assert rows[1]["snippet"] == "beta text here"
    assert len(rows[0]["snippet"]) <= 302 and rows[0]["snippet"].endswith(" …")
    printed = capsys.readouterr()
    assert "1 already judged left out" in printed.out
    assert re.fullmatch(r"pool: 2 runs in \d+\.\d s( \(.* runs/s\))?\n", printed.err)  # the runs' progress
    text = out.read_text()
    assert "score" not in text and "rank" not in text and "0.9" not in text  # nothing about the systems
    assert len(text.splitlines()) == 7  # one physical line per row: line numbers are row numbers


def test_depth_and_jsonl_output(dataset, tmp_path):
    out = tmp_path / "pool.jsonl"
    assert (
        pool(
            "--runs",
            dataset / "runs" / "a" / "run.parquet",
            "--queries",
            dataset / "queries.jsonl",
            "--corpus",
            dataset / "corpus.jsonl.gz",
            "--depth",
            1,
            "--out",
            out,
        )
        == 0
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["query_id"], r["doc_id"], r["grade"], r["annotator"]) for r in records] == [
        ("q1", "omega", None, ""),
        ("q2", "delta", None, ""),
    ]


def test_an_existing_pool_is_never_overwritten_without_force(dataset, tmp_path, capsys):
    out = tmp_path / "pool.csv"
    out.write_text("an annotator's half-filled work\n")
    args = [
        "--runs",
        dataset / "runs",
        "--queries",
        dataset / "queries.jsonl",
        "--corpus",
        dataset / "corpus.jsonl.gz",
        "--out",
        out,
    ]
    assert pool(*args) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == "an annotator's half-filled work\n"
    assert pool(*args, "--force") == 0 and out.read_text().startswith("query_id,")


def test_unknown_ids_in_runs_are_errors(dataset, tmp_path, capsys):
    (tmp_path / "odd.run").write_text("q1 Q0 nowhere 1 1.0 x\nq7 Q0 alpha 1 1.0 x\n")
    code = pool(
        "--runs",
        tmp_path / "odd.run",
        "--queries",
        dataset / "queries.jsonl",
        "--corpus",
        dataset / "corpus.jsonl.gz",
        "--out",
        tmp_path / "p.csv",
    )
    err = capsys.readouterr().err
    assert code == 2 and "'q7'" in err and "'nowhere'" in err
    assert not (tmp_path / "p.csv").exists()


def test_missing_arguments(capsys):
    assert pool("--depth", 3) == 2
    assert "--runs" in capsys.readouterr().err


def test_snippet():
    assert snippet("a  b\n c") == "a b c"
    long = "word " * 100
    cut = snippet(long, 30)
    assert cut.endswith(" …") and len(cut) <= 32 and not cut[:-2].endswith(" ")


def test_build_pool_directly_ignores_rank_order():
    tops = [pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["z", "a"]})]
    queries = pl.DataFrame({"query_id": ["q1"], "text": ["q"]})
    docs = pl.DataFrame({"doc_id": ["a", "z"], "title": ["A", "Z"], "text": ["a", "z"]})
    table, left_out = build_pool(tops, queries, docs)
    assert table["doc_id"].to_list() == ["a", "z"] and left_out == 0


# --------------------------------------------------------------------------- import


def fill(path: Path, grades: dict[tuple[str, str], str], annotator: str = "", out: Path | None = None) -> Path:
    rows = read_csv(path)
    for row in rows:
        row["grade"] = grades.get((row["query_id"], row["doc_id"]), "")
        row["annotator"] = annotator
    out = out or path.with_name("filled.csv")
    with open(out, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return out


@pytest.fixture
def pool_file(dataset, tmp_path) -> Path:
    out = tmp_path / "pool.csv"
    assert (
        pool(
            "--runs",
            dataset / "runs",
            tmp_path / "b.run",
            "--queries",
            dataset / "queries.jsonl",
            "--corpus",
            dataset / "corpus.jsonl.gz",
            "--judgments",
            dataset / "judgments" / "v1",
            "--depth",
            3,
            "--out",
            out,
        )
        == 0
    )
    return out


def test_import_a_filled_pool_as_a_new_version(dataset, pool_file, capsys):
    filled = fill(pool_file, {("q1", "alpha"): "2", ("q1", "beta"): "0", ("q2", "delta"): " 1 "})
    capsys.readouterr()
    code = pool(
        "--import",
        filled,
        "--annotator",
        "bob",
        "--into",
        dataset / "judgments" / "v2",
        "--parent",
        dataset / "judgments" / "v1",
        "--date",
        "2026-12-01",
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "3 judgments added to v2" in out and "3 ungraded rows skipped" in out
    assert "IDCG@10 moved for 2 queries" in out  # q1 gains alpha (2); q2 gains delta (1); beta is grade 0
    judgment_set = load_version(dataset / "judgments" / "v2")
    assert (judgment_set.manifest.parent, judgment_set.manifest.date) == ("v1", "2026-12-01")
    assert judgment_set.manifest.annotators == ("alice", "bob")
    assert judgment_set.qrels().rows() == [
        ("q1", "alpha", 2),
        ("q1", "beta", 0),
        ("q1", "omega", 1),
        ("q2", "delta", 1),
    ]
    lines = (dataset / "judgments" / "v2" / "judgments.jsonl").read_text().splitlines()
    assert json.loads(lines[-1]) == {"query_id": "q2", "doc_id": "delta", "grade": 1, "annotator": "bob"}
    assert main(["validate", str(dataset)]) == 0


def test_a_bad_filled_pool_reports_everything_and_writes_nothing(dataset, pool_file, capsys):
    filled = fill(
        pool_file, {("q1", "alpha"): "2.5", ("q1", "beta"): "two", ("q1", "delta"): "7", ("q2", "alpha"): "1"}
    )
    rows = read_csv(filled)
    rows[4]["doc_id"] = "nowhere"  # q2 alpha -> an unknown document
    rows[3]["grade"], rows[3]["annotator"] = "1", "mallory"  # q1 gamma, another annotator than --annotator
    with open(filled, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    before = sorted(p.relative_to(dataset).as_posix() for p in dataset.rglob("*"))
    capsys.readouterr()
    code = pool(
        "--import",
        filled,
        "--annotator",
        "bob",
        "--into",
        dataset / "judgments" / "v2",
        "--parent",
        dataset / "judgments" / "v1",
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out == [
        f"{filled}:2: field 'grade': expected an integer grade, found a string (\"2.5\")",
        f"{filled}:3: field 'grade': expected an integer grade, found a string (\"two\")",
        f"{filled}:4: field 'grade': grade 7 is not on the scale {{0: no, 1: partly, 2: yes}}",
        f"{filled}:5: field 'annotator': the row names annotator 'mallory', but --annotator is 'bob'",
        f"{filled}:6: field 'doc_id': unknown document 'nowhere': not in the corpus",
    ]
    assert sorted(p.relative_to(dataset).as_posix() for p in dataset.rglob("*")) == before


def test_import_appends_to_an_existing_set_and_refuses_repeats(dataset, pool_file, capsys):
    target = dataset / "judgments" / "v1"
    filled = fill(pool_file, {("q1", "gamma"): "1"}, annotator="alice")
    assert pool("--import", filled, "--into", target) == 0
    assert load_version(target).judgments.height == 2
    before = (target / "judgments.jsonl").read_bytes()
    capsys.readouterr()
    assert pool("--import", filled, "--into", target) == 1
    assert "already judged query 'q1', doc 'gamma'" in capsys.readouterr().out
    assert (target / "judgments.jsonl").read_bytes() == before


def test_read_filled_pool_counts_line_numbers_across_multiline_cells(tmp_path):
    path = tmp_path / "filled.csv"
    path.write_text(
        'query_id,query,doc_id,title,snippet,grade,annotator\n'
        'q1,"two\nlines",d1,T,S,1,ann\n'
        '\n'
        'q1,x,d2,T,"a\nb\nc",,\n'
        'q1,x,d3,T,S,x3,ann\n',
        encoding="utf-8",
    )
    records, ungraded, errors = read_filled_pool(path, None)
    assert errors == [] and ungraded == 1
    assert [(r.line, r.values["doc_id"], r.values["grade"]) for r in records] == [(2, "d1", 1), (8, "d3", "x3")]


def test_read_filled_pool_header_problems(tmp_path):
    path = tmp_path / "filled.csv"
    path.write_text("query_id,doc,grade\nq1,d1,1\n")
    _, _, errors = read_filled_pool(path, "a")
    assert [(e.line, e.field) for e in errors] == [(1, "doc_id")]
