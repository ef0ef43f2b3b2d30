"""`releval validate`: every problem printed as FILE:LINE: field 'F': message; exit 1 on any; reads only."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from releval.cli import main
from releval.judging.judgments import Manifest
from support import ROOT
from support.projects import declare_dataset

PROBLEM = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): field '(?P<field>[^']+)': .+$")


def jsonl(path: Path, *records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def make_set(
    root: Path, name: str, rows: list, *, parent: str | None = None, annotators=("alice", "bob"), dataset="mini"
) -> Path:
    directory = root / "judgments" / name
    jsonl(directory / "judgments.jsonl", *rows)
    (directory / "RUBRIC.md").write_text("# Rubric\n")
    manifest = Manifest(
        name,
        parent,
        "2026-11-30",
        {0: "not relevant", 1: "partial", 2: "relevant"},
        "RUBRIC.md",
        tuple(annotators),
        hashlib.sha256((directory / "judgments.jsonl").read_bytes()).hexdigest(),
        dataset=dataset,
    )
    (directory / "manifest.yaml").write_text(manifest.to_yaml())
    return directory


@pytest.fixture
def dataset(tmp_path: Path, monkeypatch) -> Path:
    """A project whose conf/ declares the dataset ``mini`` (data/queries.jsonl, data/corpus.jsonl.gz)
    with two judgment sets naming it; the working directory is the project. Returns its data/."""
    monkeypatch.chdir(tmp_path)
    declare_dataset(tmp_path, "mini", "data/corpus.jsonl.gz", "data/queries.jsonl")
    root = Path("data")
    jsonl(
        root / "queries.jsonl",
        {"query_id": "q1", "text": "sort a dict", "split": "dev", "slices": ["howto"]},
        {"query_id": "q2", "text": "with statement", "split": "holdout", "must_never_break": True},
    )
    corpus = "".join(
        json.dumps({"_id": d, "title": d.upper(), "text": f"text of {d}"}) + "\n" for d in ("d1", "d2", "d3")
    )
    (root / "corpus.jsonl.gz").write_bytes(gzip.compress(corpus.encode(), mtime=0))
    make_set(
        root,
        "v1",
        [
            {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"},
            {"query_id": "q1", "doc_id": "d1", "grade": 1, "annotator": "bob"},
            {"query_id": "q2", "doc_id": "d2", "grade": 0, "annotator": "alice", "span_start": 0, "span_end": 4},
        ],
    )
    make_set(
        root,
        "v2",
        [
            {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"},
            {"query_id": "q2", "doc_id": "d3", "grade": 1, "annotator": "bob"},
        ],
        parent="v1",
    )
    return root


def tree_state(root: Path) -> dict[str, tuple[str, int]]:
    return {
        p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    } | {p.relative_to(root).as_posix() + "/": ("dir", 0) for p in root.rglob("*") if p.is_dir()}


def validate(capsys, *args) -> tuple[int, list[str], str]:
    code = main(["validate", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_a_clean_dataset(dataset, capsys):
    before = tree_state(dataset)
    code, out, _ = validate(capsys, dataset)
    assert code == 0
    checked = "(ids checked against dataset 'mini': queries data/queries.jsonl and corpus data/corpus.jsonl.gz)"
    assert out == [
        "ok: dataset mini (conf/dataset/mini.yaml): 2 queries (1 dev, 1 holdout), 3 documents in data/corpus.jsonl.gz",
        f"  judgment set v1: 3 judgments, 2 queries, 2 annotator(s) {checked}",
        f"  judgment set v2: 2 judgments, 2 queries, 2 annotator(s) {checked}",
    ]
    assert tree_state(dataset) == before


def test_every_problem_in_a_dataset_is_printed_and_nothing_changes(dataset, capsys):
    jsonl(
        dataset / "queries.jsonl",
        {"query_id": "q1", "text": "sort a dict", "split": "dev"},
        {"query_id": "q1", "text": "", "split": "later"},
        {"query_id": "q2", "text": "with statement", "split": "holdout"},
    )
    v1 = dataset / "judgments" / "v1"
    with open(v1 / "judgments.jsonl", "a") as fh:  # edited without a new manifest
        fh.write(json.dumps({"query_id": "q1", "doc_id": "d9", "grade": "2", "annotator": "carol"}) + "\n")
    v2 = make_set(
        dataset,
        "v3",
        [
            {"query_id": "q9", "doc_id": "d1", "grade": 5, "annotator": "alice"},
            {"query_id": "q2", "doc_id": "d2", "grade": 1, "annotator": "alice", "span_start": 3, "span_end": 99},
        ],
        parent="v0",
    )
    (v2 / "RUBRIC.md").unlink()
    before = tree_state(dataset)
    code, out, err = validate(capsys, dataset)
    assert code == 1
    assert all(PROBLEM.match(line) for line in out), out
    found = {
        (Path(m["file"]).relative_to(dataset).as_posix(), int(m["line"]), m["field"]) for m in map(PROBLEM.match, out)
    }
    assert found == {
        ("queries.jsonl", 2, "query_id"),
        ("queries.jsonl", 2, "text"),
        ("queries.jsonl", 2, "split"),
        ("judgments/v1/manifest.yaml", 7, "judgments_sha256"),
        ("judgments/v1/judgments.jsonl", 4, "grade"),
        ("judgments/v1/judgments.jsonl", 4, "annotator"),
        ("judgments/v1/judgments.jsonl", 4, "doc_id"),
        ("judgments/v3/manifest.yaml", 2, "parent"),
        ("judgments/v3/manifest.yaml", 5, "rubric"),
        ("judgments/v3/judgments.jsonl", 1, "query_id"),
        ("judgments/v3/judgments.jsonl", 2, "span_end"),
    }
    assert len(out) == len(found)
    assert f"{len(out)} problems in {dataset}" in err
    assert tree_state(dataset) == before


def test_a_set_directory_finds_its_dataset_queries_and_corpus(dataset, capsys):
    jsonl(
        dataset / "judgments" / "v2" / "judgments.jsonl",
        {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"},
        {"query_id": "q7", "doc_id": "d404", "grade": 1, "annotator": "bob"},
    )
    code, out, _ = validate(capsys, dataset / "judgments" / "v2")
    assert code == 1
    assert [PROBLEM.match(line)["field"] for line in out] == ["query_id", "doc_id", "judgments_sha256"]
    assert "unknown query 'q7'" in out[0] and "unknown document 'd404'" in out[1]


def test_a_clean_set_directory_and_its_judgments_file(dataset, capsys):
    code, out, _ = validate(capsys, dataset / "judgments" / "v1")
    assert code == 0 and out[0].startswith("ok: judgment set v1: 3 judgments")
    assert "ids checked against dataset 'mini': queries data/queries.jsonl and corpus data/corpus.jsonl.gz" in out[0]
    code, out, _ = validate(capsys, dataset / "judgments" / "v1" / "judgments.jsonl")
    assert code == 0 and out[0].startswith("ok: judgment set v1")


def test_a_directory_of_sets(dataset, capsys):
    code, out, _ = validate(capsys, dataset / "judgments")
    assert code == 0 and out[0].startswith("ok: judgment set v1") and out[1].startswith("  judgment set v2")


def test_a_missing_manifest(dataset, capsys):
    (dataset / "judgments" / "v2" / "manifest.yaml").unlink()
    code, out, _ = validate(capsys, dataset / "judgments" / "v2")
    assert code == 1
    assert out == [
        f"{dataset / 'judgments' / 'v2' / 'manifest.yaml'}: field 'manifest': "
        "no such file: a judgment set needs a manifest.yaml"
    ]


def test_a_queries_file(dataset, capsys):
    code, out, _ = validate(capsys, dataset / "queries.jsonl")
    assert (code, out) == (0, [f"ok: queries {dataset / 'queries.jsonl'}: 2 queries (1 dev, 1 holdout)"])
    empty = jsonl(dataset / "empty.jsonl", "")
    code, out, _ = validate(capsys, empty)
    assert code == 1 and out == [f"{empty}:1: field 'query_id': empty: no records (only blank lines, or nothing)"]


def test_a_judgments_file_without_manifest_and_an_explicit_corpus(dataset, tmp_path, capsys):
    loose = jsonl(
        tmp_path / "loose.jsonl",
        {"query_id": "q1", "doc_id": "d1", "grade": 3, "annotator": "x"},
        {"query_id": "q1", "doc_id": "d8", "grade": 1.5, "annotator": "x"},
    )
    code, out, _ = validate(
        capsys, loose, "--corpus", dataset / "corpus.jsonl.gz", "--queries", dataset / "queries.jsonl"
    )
    assert code == 1
    assert [(PROBLEM.match(line)["line"], PROBLEM.match(line)["field"]) for line in out] == [
        ("2", "grade"),
        ("2", "doc_id"),
    ]


def test_a_broken_corpus_is_reported(dataset, tmp_path, capsys):
    bad = jsonl(tmp_path / "corpus.jsonl", {"_id": "d1", "text": "x"}, {"_id": "d1", "text": "y"})
    code, out, _ = validate(capsys, dataset, "--corpus", bad)
    assert code == 1 and out == [f"{bad}:2: field '_id': duplicate doc_id 'd1'; first at {bad}:1"]


def test_a_filled_pool_against_a_set(dataset, tmp_path, capsys):
    filled = tmp_path / "filled.csv"
    filled.write_text(
        "query_id,query,doc_id,title,snippet,grade,annotator\n"
        "q1,sort,d1,D1,s,2,alice\n"
        "q1,sort,d2,D2,s,,\n"
        "q1,sort,d3,D3,s,3,carol\n"
        "q2,with,d3,D3,s,1,\n"
    )
    code, out, _ = validate(
        capsys,
        filled,
        "--judgments",
        dataset / "judgments" / "v1",
        "--queries",
        dataset / "queries.jsonl",
        "--corpus",
        dataset / "corpus.jsonl.gz",
    )
    assert code == 1
    assert [(PROBLEM.match(line)["line"], PROBLEM.match(line)["field"]) for line in out] == [
        ("2", "doc_id"),
        ("4", "grade"),
        ("5", "annotator"),
    ]
    assert "already judged" in out[0] and "not on the scale" in out[1] and out[2].endswith("missing")
    filled.write_text(
        "query_id,query,doc_id,title,snippet,grade,annotator\n"
        "q1,sort,d1,D1,s,3,dave\n"
        "q1,sort,d2,D2,s,,\n"
        "q2,with,d3,D3,s,1,\n"
    )
    code, out, _ = validate(capsys, filled, "--annotator", "dave")
    assert code == 0
    assert out[0].endswith(
        "2 graded rows, 1 ungraded (no --judgments: grades checked as integers >= 0 only) "
        "(ids not checked: give --judgments SET_DIR, or --queries and --corpus)"
    )
    filled.write_text(filled.read_text().replace("d1,D1,s,3,dave", "d1,D1,s,2,dave"))
    code, out, _ = validate(capsys, filled, "--annotator", "dave", "--judgments", dataset / "judgments" / "v2")
    assert code == 0, out
    checked = "(ids checked against dataset 'mini': queries data/queries.jsonl and corpus data/corpus.jsonl.gz)"
    assert out[0].endswith(checked)
    code, out, _ = validate(capsys, filled)
    assert code == 1 and out == [f"{filled}:4: field 'annotator': missing"]


def test_a_path_that_does_not_exist(tmp_path, capsys):
    code, out, _ = validate(capsys, tmp_path / "nope")
    assert code == 1 and "no such file or directory" in out[0]


def test_an_unrecognised_directory(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, out, _ = validate(capsys, tmp_path / "empty")
    assert code == 1 and "no judgment set" in out[0] and "no dataset the configuration declares" in out[0]


def test_validating_the_embedded_corpus_as_corpus(dataset, capsys):
    corpus = ROOT / "data" / "pydocs" / "corpus.jsonl.gz"
    queries = jsonl(dataset / "q.jsonl", {"query_id": "p1", "text": "json dumps", "split": "dev"})
    loose = jsonl(
        dataset / "j.jsonl",
        {"query_id": "p1", "doc_id": "module:json", "grade": 2, "annotator": "a"},
        {"query_id": "p1", "doc_id": "module:nope", "grade": 0, "annotator": "a"},
    )
    code, out, _ = validate(capsys, loose, "--corpus", corpus, "--queries", queries)
    assert code == 1 and len(out) == 1 and "unknown document 'module:nope'" in out[0]
    assert os.path.exists(corpus)


# --------------------------------------------------------------------------- folder corpora, grouped messages


def folder_corpus(root: Path, ids=("d1", "d2", "d3")) -> Path:
    """The dataset's documents as a folder of .md files (doc_id = file name without extension),
    declared as its corpus in conf/dataset/mini.yaml."""
    (root / "corpus.jsonl.gz").unlink(missing_ok=True)
    for doc_id in ids:
        path = root / "corpus" / f"{doc_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {doc_id.upper()}\n\ntext of {doc_id}\n")
    declare_dataset(Path.cwd(), "mini", (root / "corpus").as_posix(), "data/queries.jsonl", corpus_format="folder")
    return root / "corpus"


def test_a_folder_corpus_in_a_dataset_is_read_as_ingest_reads_it(dataset, capsys):
    corpus = folder_corpus(dataset)
    code, out, _ = validate(capsys, dataset)
    assert code == 0 and f"3 documents in {corpus}" in out[0]
    (corpus / "d3.md").unlink()  # judged by v2
    code, out, _ = validate(capsys, dataset)
    assert code == 1 and len(out) == 1 and "unknown document 'd3'" in out[0]
    assert PROBLEM.match(out[0])["field"] == "doc_id"


def test_the_corpus_the_configuration_names_is_the_one_checked(dataset, capsys):
    """A dataset whose corpus lives outside the folder validated is checked against the corpus its
    configuration names (the one the ingest stage reads), never one that merely sits in the folder."""
    docs = folder_corpus(Path("docs"), ids=("d1", "d2"))
    jsonl(dataset / "corpus.jsonl", {"_id": "d1", "text": "x"}, {"_id": "d2", "text": "x"}, {"_id": "d3", "text": "x"})
    code, out, _ = validate(capsys, "data")
    assert code == 1 and len(out) == 1 and "unknown document 'd3'" in out[0] and str(docs) in out[0] + str(docs)
    code, out, _ = validate(capsys, dataset / "judgments" / "v2")
    assert code == 1 and "unknown document 'd3'" in out[0]


def test_a_set_of_another_corpus_is_one_line_naming_its_dataset(dataset, tmp_path, capsys):
    """Checked against a corpus it was not made for, a set is one line naming the dataset it belongs
    to, not a line per unknown id."""
    other = jsonl(tmp_path / "other" / "corpus.jsonl", {"_id": "x1", "text": "x"})
    queries = jsonl(tmp_path / "other" / "queries.jsonl", {"query_id": "p1", "text": "t", "split": "dev"})
    code, out, _ = validate(capsys, dataset / "judgments" / "v1", "--corpus", other, "--queries", queries)
    assert code == 1 and len(out) == 1
    assert out[0].startswith(f"{dataset / 'judgments' / 'v1' / 'judgments.jsonl'}: field 'dataset': ")
    assert "3 of 3 judgments name queries or documents not in" in out[0]
    assert "it belongs to dataset 'mini' (its manifest's `dataset`), whose corpus is data/corpus.jsonl.gz" in out[0]


def test_a_set_naming_an_undeclared_dataset_is_a_problem(dataset, capsys):
    v3 = make_set(dataset, "v3", [{"query_id": "q1", "doc_id": "d1", "grade": 1, "annotator": "alice"}], dataset="gone")
    code, out, _ = validate(capsys, v3)
    assert code == 1
    assert out == [
        f"{v3 / 'manifest.yaml'}:8: field 'dataset': its manifest names dataset 'gone', which no configuration "
        "declares (known: mini)"
    ]


def test_a_set_no_configuration_places_is_checked_structurally_and_says_so(dataset, capsys):
    v3 = make_set(dataset, "v3", [{"query_id": "q9", "doc_id": "d9", "grade": 1, "annotator": "alice"}], dataset="")
    code, out, _ = validate(capsys, v3)
    assert code == 0
    assert out[0].endswith(
        "(ids not checked: no dataset: neither its manifest (`dataset: NAME`) nor params.yaml's judgments name it)"
    )


def test_every_bad_file_of_a_folder_corpus_is_printed(dataset, capsys):
    corpus = folder_corpus(dataset)
    (corpus / "d1.md").write_bytes(b"caf\xe9\n")
    (corpus / "d2.md").write_bytes("# T\n".encode("utf-16"))
    code, out, err = validate(capsys, dataset)
    assert code == 1
    assert [(Path(PROBLEM.match(line)["file"]).name, PROBLEM.match(line)["field"]) for line in out] == [
        ("d1.md", "encoding"),
        ("d2.md", "encoding"),
    ]
    code, out, _ = validate(capsys, dataset / "judgments" / "v1", "--corpus", corpus)  # format inferred: folder
    assert code == 1 and len(out) == 2


def test_a_repeated_message_is_one_line_with_its_count_and_first_lines(dataset, tmp_path, capsys):
    filled = tmp_path / "filled.csv"
    rows = [f"q1,sort,d{i},D,s,1," for i in range(1, 8)]
    filled.write_text("query_id,query,doc_id,title,snippet,grade,annotator\n" + "\n".join(rows) + "\n")
    code, out, err = validate(capsys, filled)
    assert code == 1
    assert out == [f"{filled}: field 'annotator': missing (7 rows: lines 2, 3, 4, 5, 6, …)"]
    assert "7 problems" in err


def test_every_shipped_set_validates_against_its_own_dataset(monkeypatch, capsys):
    """`releval validate data/` on the shipped data: v1 and v2 against corpus edition v2 (dataset
    pydocs), v3 and v4 (v3's grades with evidence spans) against v3 (pydocs-v3); it reported 3,508
    problems when sets were checked against
    the files that happened to sit beside them."""
    monkeypatch.chdir(ROOT)
    code, out, _ = validate(capsys, "data")
    assert code == 0, out[:5]
    sets = {line.split(":")[0].strip(): line for line in out if "judgment set" in line}
    assert set(sets) == {"judgment set v1", "judgment set v2", "judgment set v3", "judgment set v4"}
    assert "ids checked against dataset 'pydocs':" in sets["judgment set v1"]
    assert "ids checked against dataset 'pydocs':" in sets["judgment set v2"]
    assert "ids checked against dataset 'pydocs-v3':" in sets["judgment set v3"]
    assert "ids checked against dataset 'pydocs-v3':" in sets["judgment set v4"]
    code, out, _ = validate(capsys)  # the active dataset
    assert code == 0 and out[0].startswith("ok: dataset pydocs-v3 (params.yaml)")


def test_a_file_no_reader_could_take_is_one_line(tmp_path, capsys):
    """A 100,000-deep first line (RecursionError while guessing what the file is) and a 5,000-digit grade
    in a filled pool (int() refuses it) were tracebacks."""
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    code, out, _ = validate(capsys, deep)
    assert code == 1 and out == [f"{deep}:1: field 'json': malformed JSON: arrays or objects nested more than 100 deep"]
    pool = tmp_path / "pool.csv"
    pool.write_text("query_id,query,doc_id,title,snippet,grade,annotator\nq1,x,d1,t,s," + "9" * 5000 + ",a\n")
    code, out, _ = validate(capsys, pool)
    assert code == 1 and len(out) == 1 and out[0].startswith(f"{pool}:2: field 'grade': expected an integer grade")
