"""`releval init-dataset`: a new dataset's configs, templates and empty first judgment version, then its
first judgments through `releval pool --import` (appended to the empty v1, or a new parentless set)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from releval.cli import main
from releval.commands import init_dataset as command
from releval.errors import InputError
from releval.inputs.schemas import validate_queries
from releval.judging import judgments as jmod
from releval.measurement.metrics import evaluate

REPO = Path(__file__).parent.parent
CORPUS = REPO / "tests" / "data" / "corpus"
QUERIES = [
    {"query_id": "q1", "text": "shock waves in supersonic flow", "split": "dev"},
    {"query_id": "q2", "text": "slip flow in a tube", "split": "holdout", "slices": ["tail"]},
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root with the repository's conf/ and a corpus under data/mini/."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "conf", root / "conf", ignore=shutil.ignore_patterns("recorded.yaml"))
    (root / "data" / "mini").mkdir(parents=True)
    shutil.copy(CORPUS / "beir" / "corpus.jsonl", root / "data" / "mini" / "corpus.jsonl")
    return root


def init(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    command.configure(parser)
    return command.run(parser.parse_args(list(argv)))


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def fill_queries(root: Path) -> None:
    (root / "data" / "mini" / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))


def test_init_writes_configs_templates_and_a_valid_empty_first_version(project, capsys):
    corpus = project / "data" / "mini" / "corpus.jsonl"
    assert (
        init("mini", "--corpus", str(corpus), "--root", str(project), "--annotator", "ann", "--date", "2026-12-01") == 0
    )
    out = capsys.readouterr().out
    assert "3 documents" in out
    assert "releval params dataset=mini" in out and "releval pool --missing --out pool.csv" in out
    assert "releval pool --import pool.csv --into data/mini/judgments/v1" in out

    dataset = yaml.safe_load((project / "conf" / "dataset" / "mini.yaml").read_text())
    assert dataset["defaults"][0] == {"/judgments@_global_.judgments": "mini-v1"}
    assert dataset["corpus"] == {"path": "data/mini/corpus.jsonl", "format": "jsonl"}
    assert dataset["queries"] == {"path": "data/mini/queries.jsonl", "format": "releval"}
    assert set(dataset) == set(yaml.safe_load((REPO / "conf" / "dataset" / "pydocs.yaml").read_text())) - {"reports"}
    judgments_conf = yaml.safe_load((project / "conf" / "judgments" / "mini-v1.yaml").read_text())
    assert judgments_conf == {"version": "v1", "path": "data/mini/judgments/v1", "format": "releval"}

    judgment_set, errors = jmod.validate_version(project / "data" / "mini" / "judgments" / "v1")
    assert errors == []
    manifest = judgment_set.manifest
    assert (manifest.parent, manifest.date, manifest.rubric, manifest.annotators) == (
        None,
        "2026-12-01",
        "../RUBRIC.md",
        ("ann",),
    )
    assert manifest.scale == jmod.DEFAULT_SCALE
    assert manifest.judgments_sha256 == jmod.sha256_bytes(b"")
    assert judgment_set.judgments.height == 0 and judgment_set.qrels().height == 0

    # The rubric template keeps data/judgments/RUBRIC.md's headings and asks for the rest.
    rubric = (project / "data" / "mini" / "judgments" / "RUBRIC.md").read_text()
    original = (REPO / "data" / "judgments" / "RUBRIC.md").read_text()
    assert [line for line in rubric.splitlines() if line.startswith("## ")] == [
        line for line in original.splitlines() if line.startswith("## ")
    ]
    assert rubric.startswith("# Grading rubric: mini queries, scale 0–3") and "FILL IN" in rubric
    assert "pydocs" not in rubric.lower() and "python" not in rubric.lower()

    # The queries template is refused, row by row, until it is replaced.
    frame, problems = validate_queries(project / "data" / "mini" / "queries.jsonl")
    assert [(p.line, p.field) for p in problems] == [(1, "TEMPLATE"), (2, "TEMPLATE"), (3, "TEMPLATE")]
    assert sorted(set(frame["split"].to_list())) == ["dev", "holdout"]


def test_the_new_dataset_composes_and_its_empty_judgments_score_nothing(project):
    from releval.composition import compose_text

    init(
        "mini", "--corpus", str(project / "data" / "mini" / "corpus.jsonl"), "--root", str(project), "--annotator", "a"
    )
    params = yaml.safe_load(compose_text(project / "conf", ["dataset=mini"]))
    assert params["dataset"]["name"] == "mini"
    assert params["judgments"] == {"version": "v1", "path": "data/mini/judgments/v1", "format": "releval"}
    fill_queries(project)
    docs = pl.read_ndjson(project / "data" / "mini" / "corpus.jsonl").rename({"_id": "doc_id"})
    judgments_cfg = {**params["judgments"], "path": str(project / params["judgments"]["path"])}
    active = jmod.active_judgments(judgments_cfg, {}, docs, pl.Series(["q1", "q2"]))
    assert active.qrels.height == 0 and active.provenance["parent"] is None
    run = pl.DataFrame({"query_id": ["q1"], "doc_id": ["doc-a"], "score": [1.0]})
    with pytest.raises(InputError, match="there are no judgments"):
        evaluate(active.qrels, run, ["ndcg@10"])


def test_given_queries_and_a_folder_corpus(project, capsys):
    queries = project / "q.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    init(
        "notes",
        "--corpus",
        str(CORPUS / "folder"),
        "--queries",
        str(queries),
        "--root",
        str(project),
        "--annotator",
        "a",
    )
    out = capsys.readouterr().out
    assert "3 documents" in out and "queries: 2" in out
    dataset = yaml.safe_load((project / "conf" / "dataset" / "notes.yaml").read_text())
    assert dataset["corpus"]["format"] == "folder"
    assert (project / dataset["corpus"]["path"]).resolve() == (CORPUS / "folder").resolve()
    assert dataset["queries"] == {"path": "q.jsonl", "format": "releval"}
    assert not (project / "data" / "notes" / "queries.jsonl").exists()


def test_nothing_that_exists_is_overwritten(project):
    corpus = str(project / "data" / "mini" / "corpus.jsonl")
    init("mini", "--corpus", corpus, "--root", str(project), "--annotator", "a")
    (project / "conf" / "judgments" / "mini-v1.yaml").unlink()
    before = snapshot(project)
    with pytest.raises(InputError) as caught:
        init("mini", "--corpus", corpus, "--root", str(project), "--annotator", "a")
    message = str(caught.value)
    assert "conf/dataset/mini.yaml" in message and "data/mini/judgments/v1" in message
    assert "mini-v1.yaml" not in message
    assert snapshot(project) == before


def test_a_bad_corpus_is_refused_naming_file_line_and_field_and_nothing_is_written(project):
    bad = project / "bad.jsonl"
    bad.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b", "txt": "typo"}\n')
    before = snapshot(project)
    with pytest.raises(InputError) as caught:
        init("bad", "--corpus", str(bad), "--root", str(project), "--annotator", "a")
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(bad), 2, "text")
    assert snapshot(project) == before
    with pytest.raises(InputError, match="not a releval project root"):
        init("bad", "--corpus", str(bad), "--root", str(project / "data"), "--annotator", "a")
    with pytest.raises(InputError) as caught:
        init("no/slash", "--corpus", str(bad), "--root", str(project), "--annotator", "a")
    assert caught.value.field == "NAME"


def write_pool(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    lines = ["query_id,query,doc_id,title,snippet,grade,annotator,notes"]
    lines += [f"{q},text,{d},title,snippet,{g},," for q, d, g in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_filled_pool_is_appended_to_the_empty_first_version(project, tmp_path, capsys, monkeypatch):
    init(
        "mini", "--corpus", str(project / "data" / "mini" / "corpus.jsonl"), "--root", str(project), "--annotator", "a"
    )
    fill_queries(project)
    filled = write_pool(tmp_path / "pool.csv", [("q1", "doc-a", "3"), ("q1", "doc-b", "0"), ("q2", "doc-c", "")])
    monkeypatch.chdir(project)
    capsys.readouterr()
    assert main(["pool", "--import", str(filled), "--into", "data/mini/judgments/v1", "--annotator", "bo"]) == 0
    out = capsys.readouterr().out
    assert (
        "2 judgments added to v1 (1 ungraded rows skipped; ids checked against dataset 'mini', named by its "
        "manifest: queries data/mini/queries.jsonl and corpus data/mini/corpus.jsonl)"
    ) in out
    assert "IDCG@10 moved for 1 query" in out
    judgment_set = jmod.load_version("data/mini/judgments/v1")
    assert judgment_set.manifest.parent is None and judgment_set.manifest.annotators == ("a", "bo")
    assert judgment_set.manifest.dataset == "mini"
    # the scaffold's "empty until `releval pool --import` adds judgments" is gone once it is not true
    assert judgment_set.manifest.description == "first judgment set of dataset mini"
    assert judgment_set.qrels().rows() == [("q1", "doc-a", 3), ("q1", "doc-b", 0)]
    # An unknown document is refused, naming the pool's line; nothing changes.
    before = snapshot(project)
    bad = write_pool(tmp_path / "bad.csv", [("q2", "doc-x", "1")])
    assert main(["pool", "--import", str(bad), "--into", "data/mini/judgments/v1", "--annotator", "bo"]) == 1
    assert f"{bad}:2: field 'doc_id': unknown document 'doc-x'" in capsys.readouterr().out
    assert snapshot(project) == before


def test_a_filled_pool_into_a_new_directory_without_parent_is_a_first_version(project, tmp_path, capsys, monkeypatch):
    init(
        "mini", "--corpus", str(project / "data" / "mini" / "corpus.jsonl"), "--root", str(project), "--annotator", "a"
    )
    fill_queries(project)
    filled = write_pool(tmp_path / "pool.csv", [("q1", "doc-a", "2"), ("q2", "doc-c", "1")])
    monkeypatch.chdir(project)
    # Default rubric: the dataset's RUBRIC.md beside the new set, referred to by its relative path.
    assert (
        main(
            [
                "pool",
                "--import",
                str(filled),
                "--into",
                "data/mini/judgments/first",
                "--annotator",
                "bo",
                "--dataset",
                "mini",
                "--date",
                "2026-12-02",
            ]
        )
        == 0
    )
    first = jmod.load_version("data/mini/judgments/first")
    assert (first.manifest.parent, first.manifest.rubric, first.manifest.date) == (None, "../RUBRIC.md", "2026-12-02")
    assert first.manifest.scale == jmod.DEFAULT_SCALE and first.judgments.height == 2
    # A rubric elsewhere is copied into the set; --scale replaces the default grades.
    rubric = tmp_path / "my-rubric.md"
    rubric.write_text("# my rubric\n")
    assert (
        main(
            [
                "pool",
                "--import",
                str(filled),
                "--into",
                "data/mini/judgments/other",
                "--annotator",
                "bo",
                "--dataset",
                "mini",
                "--rubric",
                str(rubric),
                "--scale",
                "0=no,1=partly,2=yes",
            ]
        )
        == 0
    )
    other = jmod.load_version("data/mini/judgments/other")
    assert other.manifest.rubric == "my-rubric.md" and other.manifest.scale == {0: "no", 1: "partly", 2: "yes"}
    assert (project / "data" / "mini" / "judgments" / "other" / "my-rubric.md").read_text() == "# my rubric\n"
    # No rubric anywhere: refused, naming both ways; nothing written.
    (project / "data" / "mini" / "judgments" / "RUBRIC.md").unlink()
    capsys.readouterr()
    third = ["--into", "data/mini/judgments/third", "--annotator", "bo", "--dataset", "mini"]
    assert main(["pool", "--import", str(filled), *third]) == 1
    out = capsys.readouterr().out
    assert "field 'parent'" in out and "--rubric FILE" in out and "--parent SET_DIR" in out
    assert not (project / "data" / "mini" / "judgments" / "third").exists()
    # A grade off the scale of the first version is refused at its line.
    assert (
        main(
            [
                "pool",
                "--import",
                str(write_pool(tmp_path / "off.csv", [("q1", "doc-a", "7")])),
                "--into",
                "data/mini/judgments/fourth",
                "--annotator",
                "bo",
                "--dataset",
                "mini",
                "--rubric",
                str(rubric),
            ]
        )
        == 1
    )
    assert "off.csv:2: field 'grade': grade 7 is not on the scale" in capsys.readouterr().out


def test_only_a_first_version_may_be_empty(project):
    init(
        "mini", "--corpus", str(project / "data" / "mini" / "corpus.jsonl"), "--root", str(project), "--annotator", "a"
    )
    sets = project / "data" / "mini" / "judgments"
    v1 = jmod.load_version(sets / "v1")
    jmod.write_version(sets / "v2", jmod.Manifest(**{**v1.manifest.__dict__, "parent": "v1"}), b"\n")
    _, errors = jmod.validate_version(sets / "v2")
    assert [(e.field, e.line) for e in errors] == [("query_id", 1)]
    assert "only a first version" in errors[0].detail
