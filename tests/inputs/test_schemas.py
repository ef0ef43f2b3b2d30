"""Query and judgment schemas, manifests: every problem reported, each with file, line and field."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from releval.inputs import schemas
from releval.errors import InputError, InputErrors
from releval.judging.judgments import read_manifest, validate_version
from releval.tables import JUDGMENTS

SCALE = {0: "not relevant", 1: "partial", 2: "relevant"}


def write_lines(path: Path, *lines) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), encoding="utf-8"
    )
    return path


def where(errors: list[InputError]) -> list[tuple[int | None, str | None]]:
    return [(e.line, e.field) for e in errors]


# --------------------------------------------------------------------------- queries


def test_clean_queries_load_with_defaults(tmp_path):
    path = write_lines(
        tmp_path / "queries.jsonl",
        {"query_id": "q1", "text": "sort a dict", "split": "dev", "slices": ["howto"], "must_never_break": True},
        "",
        {"query_id": 7, "text": "with statement", "split": "holdout"},
    )
    frame = schemas.load_queries(path)
    assert frame.columns == ["query_id", "text", "split", "slices", "must_never_break"]
    assert frame.rows() == [
        ("q1", "sort a dict", "dev", ["howto"], True),
        ("7", "with statement", "holdout", [], False),
    ]


def test_every_query_problem_is_reported_with_line_and_field(tmp_path):
    path = write_lines(
        tmp_path / "queries.jsonl",
        {"query_id": "q1", "text": "fine", "split": "dev"},
        {"query_id": "q1", "text": "   ", "split": "test", "slices": ["a", "a"]},
        {"query_id": "q3", "text": "t", "split": "dev", "must_never_break": "yes"},
        "{not json",
        {"query_id": "q5", "text": 5, "split": "dev", "must_never_brake": True},
        {"query_id": "", "text": "t"},
        [1, 2],
    )
    _, errors = schemas.validate_queries(path)
    assert sorted(where(errors)) == sorted(
        [
            (2, "query_id"),
            (2, "text"),
            (2, "split"),
            (2, "slices"),
            (3, "must_never_break"),
            (4, "json"),
            (5, "must_never_brake"),
            (5, "text"),
            (6, "split"),
            (6, "query_id"),
            (7, "json"),
        ]
    )
    assert [e.line for e in errors] == sorted(e.line for e in errors)
    assert all(e.file == str(path) for e in errors)
    messages = {(e.line, e.field): e.detail for e in errors}
    assert messages[(2, "query_id")] == "duplicate query_id 'q1'; first at line 1"
    assert messages[(2, "split")] == "expected 'dev' or 'holdout', found 'test'"
    assert messages[(3, "must_never_break")] == 'expected true or false, found a string ("yes")'
    assert "unknown field" in messages[(5, "must_never_brake")]
    assert messages[(6, "split")] == "missing"
    with pytest.raises(InputErrors) as caught:
        schemas.load_queries(path)
    assert len(caught.value.errors) == len(errors)
    assert str(caught.value).splitlines()[0].startswith(f"{path}:2: field 'query_id':")


def test_empty_queries_file_is_an_error(tmp_path):
    path = write_lines(tmp_path / "queries.jsonl", "", "   ")
    _, errors = schemas.validate_queries(path)
    assert where(errors) == [(1, "query_id")] and "empty" in errors[0].detail


def test_bom_crlf_and_bad_utf8(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"query_id": "q1", "text": "a", "split": "dev"}\r\n'
        b'{"query_id": "q2", "text": "\xff", "split": "dev"}\r\n'
    )
    frame, errors = schemas.validate_queries(path)
    assert frame["query_id"].to_list() == ["q1"]
    assert where(errors) == [(2, "encoding")]


def test_missing_queries_file(tmp_path):
    _, errors = schemas.validate_queries(tmp_path / "nope.jsonl")
    assert where(errors) == [(None, "path")] and errors[0].detail == "no such file"


# --------------------------------------------------------------------------- judgments


def test_clean_judgments(tmp_path):
    path = write_lines(
        tmp_path / "judgments.jsonl",
        {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"},
        {"query_id": "q1", "doc_id": "d1", "grade": 1, "annotator": "bob", "notes": "meh"},
        {"query_id": "q1", "doc_id": "d2", "grade": 0, "annotator": "alice", "span_start": 0, "span_end": 5},
    )
    frame, errors = schemas.validate_judgments(path, SCALE, ["alice", "bob"])
    assert errors == []
    assert frame.select("query_id", "doc_id", "grade", "annotator", "span_start", "span_end", "line").rows() == [
        ("q1", "d1", 2, "alice", None, None, 1),
        ("q1", "d1", 1, "bob", None, None, 2),
        ("q1", "d2", 0, "alice", 0, 5, 3),
    ]


def test_every_judgment_problem_is_reported(tmp_path):
    path = write_lines(
        tmp_path / "judgments.jsonl",
        {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"},  # 1 fine
        {"query_id": "q1", "doc_id": "d2", "grade": "2", "annotator": "alice"},  # 2 string grade
        {"query_id": "q1", "doc_id": "d3", "grade": 2.0, "annotator": "alice"},  # 3 float grade
        {"query_id": "q1", "doc_id": "d4", "grade": 5, "annotator": "alice"},  # 4 off the scale
        {"query_id": "q1", "doc_id": "d1", "grade": 1, "annotator": "alice"},  # 5 duplicate
        {"query_id": "q1", "doc_id": "d5", "grade": 1, "annotator": "zed"},  # 6 undeclared
        {"query_id": "q1", "doc_id": "d6", "grade": 1, "annotator": "alice", "span_start": 4},  # 7 half a span
        {
            "query_id": "q1",
            "doc_id": "d7",
            "grade": 1,
            "annotator": "alice",
            "span_start": 9,
            "span_end": 3,
        },  # 8 reversed span
        {"query_id": "q1", "doc_id": "d8", "grade": True, "annotator": " "},  # 9 bool, blank
        {"doc_id": "d9", "grade": 1, "annotator": "alice"},  # 10 no query
        {"query_id": "q1", "doc_id": "d10", "grade": -1, "annotator": "alice", "span_start": -2, "span_end": 1},
    )  # 11 negatives
    _, errors = schemas.validate_judgments(path, SCALE, ["alice", "bob"])
    got = sorted(where(errors))
    assert got == sorted(
        [
            (2, "grade"),
            (3, "grade"),
            (4, "grade"),
            (5, "doc_id"),
            (6, "annotator"),
            (7, "span_end"),
            (8, "span_end"),
            (9, "grade"),
            (9, "annotator"),
            (10, "query_id"),
            (11, "grade"),
            (11, "span_start"),
        ]
    )
    messages = {(e.line, e.field): e.detail for e in errors}
    assert messages[(2, "grade")] == 'expected an integer grade, found a string ("2")'
    assert messages[(3, "grade")] == "expected an integer grade, found a float (2.0)"
    assert messages[(4, "grade")] == "grade 5 is not on the scale {0: not relevant, 1: partial, 2: relevant}"
    assert messages[(5, "doc_id")] == "duplicate: annotator 'alice' already judged query 'q1', doc 'd1' at line 1"
    assert "not declared in the manifest" in messages[(6, "annotator")]
    assert messages[(7, "span_end")] == "span_start is given without span_end: give both or neither"
    assert messages[(8, "span_end")] == "span_start (9) must be < span_end (3)"
    assert messages[(9, "grade")] == "expected an integer grade, found a boolean (true)"
    assert messages[(10, "query_id")] == "missing"
    assert messages[(11, "span_start")] == "must be >= 0, found -2"


def test_same_pair_by_two_annotators_is_not_a_duplicate(tmp_path):
    path = write_lines(
        tmp_path / "j.jsonl",
        {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"},
        {"query_id": "q1", "doc_id": "d1", "grade": 0, "annotator": "bob"},
    )
    assert schemas.validate_judgments(path, SCALE)[1] == []


def test_without_a_scale_grades_must_be_non_negative(tmp_path):
    path = write_lines(
        tmp_path / "j.jsonl",
        {"query_id": "q1", "doc_id": "d1", "grade": 17, "annotator": "a"},
        {"query_id": "q1", "doc_id": "d2", "grade": -1, "annotator": "a"},
    )
    _, errors = schemas.validate_judgments(path)
    assert where(errors) == [(2, "grade")]


def test_dangling_ids_and_spans_past_the_end_are_reported(tmp_path):
    path = write_lines(
        tmp_path / "j.jsonl",
        {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "a", "span_start": 0, "span_end": 4},
        {"query_id": "q9", "doc_id": "d1", "grade": 2, "annotator": "a"},
        {"query_id": "q1", "doc_id": "d404", "grade": 1, "annotator": "a"},
        {"query_id": "q1", "doc_id": "d2", "grade": 1, "annotator": "a", "span_start": 2, "span_end": 11},
    )
    frame, errors = schemas.validate_judgments(path, SCALE)
    assert errors == []
    problems = schemas.check_references(frame, str(path), query_ids=["q1"], doc_lengths={"d1": 4, "d2": 10})
    assert where(problems) == [(2, "query_id"), (3, "doc_id"), (4, "span_end")]
    assert problems[0].detail == "unknown query 'q9': not in the query set"
    assert problems[1].detail == "unknown document 'd404': not in the corpus"
    assert "past the end of document 'd2' (10 characters)" in problems[2].detail


def test_pandera_schemas_are_usable_directly():
    good = pl.DataFrame(
        {
            "query_id": ["q1"],
            "doc_id": ["d1"],
            "grade": [1],
            "annotator": ["a"],
            "span_start": [None],
            "span_end": [None],
            "evidence": [None],
            "notes": [None],
            "line": [1],
        },
        schema=JUDGMENTS.schema_with_line,
    )
    schemas.judgments_schema(SCALE).validate(good)
    from pandera.errors import SchemaError

    with pytest.raises(SchemaError):
        schemas.judgments_schema(SCALE).validate(good.with_columns(pl.lit(7, dtype=pl.Int64).alias("grade")))


# --------------------------------------------------------------------------- manifests


def make_set(root: Path, name: str = "v1", *, manifest: str | None = None, lines=None, rubric: bool = True) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    lines = lines if lines is not None else [{"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"}]
    write_lines(directory / "judgments.jsonl", *lines)
    digest = hashlib.sha256((directory / "judgments.jsonl").read_bytes()).hexdigest()
    if rubric:
        (directory / "RUBRIC.md").write_text("# Rubric\n")
    if manifest is None:
        manifest = (
            f"version: {name}\nparent: null\ndate: 2026-11-30\n"
            "scale: {0: not relevant, 1: partial, 2: relevant}\nrubric: RUBRIC.md\n"
            f"annotators: [alice]\njudgments_sha256: {digest}\n"
        )
    (directory / "manifest.yaml").write_text(manifest.replace("DIGEST", digest))
    return directory


def test_a_clean_manifest(tmp_path):
    directory = make_set(tmp_path)
    manifest, errors = read_manifest(directory / "manifest.yaml", expected_version="v1")
    assert errors == []
    assert manifest.scale == SCALE and manifest.date == "2026-11-30" and manifest.parent is None
    assert manifest.annotators == ("alice",) and manifest.rubric == "RUBRIC.md"


def test_a_json_manifest_with_string_grades(tmp_path):
    document = {
        "version": "v1",
        "parent": None,
        "date": "2026-11-30",
        "scale": {"0": "no", "1": "yes"},
        "rubric": "RUBRIC.md",
        "annotators": ["alice"],
        "judgments_sha256": "DIGEST",
    }
    directory = make_set(
        tmp_path,
        manifest=json.dumps(document),
        lines=[{"query_id": "q1", "doc_id": "d1", "grade": 1, "annotator": "alice"}],
    )
    judgment_set, errors = validate_version(directory)
    assert errors == [] and judgment_set.manifest.scale == {0: "no", 1: "yes"}


def test_every_manifest_problem_is_reported_at_its_key_line(tmp_path):
    manifest = (
        "version: v2\n"  # 1: differs from the directory name
        "parent: v1\n"
        "date: 30/11/2026\n"  # 3: not ISO
        "scale: {0: ok, -1: bad, 2: ''}\n"  # 4: negative grade, empty label
        "rubric: MISSING.md\n"  # 5: no such file
        "annotators: []\n"  # 6: empty
        "judgments_sha256: abc\n"  # 7: not a sha256
        "colour: blue\n"
    )  # 8: unknown key
    directory = make_set(tmp_path, manifest=manifest)
    manifest_obj, errors = read_manifest(directory / "manifest.yaml", expected_version="v1")
    assert manifest_obj is None
    assert sorted(where(errors)) == sorted(
        [
            (1, "version"),
            (3, "date"),
            (4, "scale"),
            (4, "scale"),
            (5, "rubric"),
            (6, "annotators"),
            (7, "judgments_sha256"),
            (8, "colour"),
        ]
    )
    assert all(e.file == str(directory / "manifest.yaml") for e in errors)


def test_missing_keys_and_missing_manifest(tmp_path):
    directory = make_set(tmp_path, manifest="version: v1\n")
    _, errors = read_manifest(directory / "manifest.yaml")
    assert sorted(e.field for e in errors) == sorted(
        ["parent", "date", "scale", "rubric", "annotators", "judgments_sha256"]
    )
    assert all(e.detail == "missing" for e in errors)
    (directory / "manifest.yaml").unlink()
    judgment_set, errors = validate_version(directory)
    assert judgment_set is None
    assert [(e.field, e.detail) for e in errors] == [("manifest", "no such file: a judgment set needs a manifest.yaml")]


def test_broken_yaml_names_its_line(tmp_path):
    directory = make_set(tmp_path, manifest="version: v1\nscale: {0: a\nrubric: x\n")
    _, errors = read_manifest(directory / "manifest.yaml")
    assert len(errors) == 1 and errors[0].field == "yaml" and errors[0].line >= 2


def test_hash_mismatch_is_reported(tmp_path):
    directory = make_set(tmp_path)
    with open(directory / "judgments.jsonl", "a") as fh:
        fh.write(json.dumps({"query_id": "q2", "doc_id": "d1", "grade": 1, "annotator": "alice"}) + "\n")
    judgment_set, errors = validate_version(directory)
    assert where(errors) == [(7, "judgments_sha256")]
    assert errors[0].detail.startswith("hash mismatch: judgments.jsonl has sha256 ")


def test_version_problems_are_all_collected(tmp_path):
    directory = make_set(
        tmp_path,
        lines=[
            {"query_id": "q1", "doc_id": "d1", "grade": 9, "annotator": "alice"},
            {"query_id": "q1", "doc_id": "d1", "grade": 1, "annotator": "bob"},
        ],
    )
    _, errors = validate_version(directory, query_ids=["q2"], doc_lengths={"d2": 3})
    fields = sorted(where(errors))
    assert fields == sorted(
        [(1, "grade"), (2, "annotator"), (1, "query_id"), (2, "query_id"), (1, "doc_id"), (2, "doc_id")]
    )


def test_an_empty_first_version_is_valid(tmp_path):
    directory = make_set(tmp_path, lines=[])  # parent: null; a revision may not be empty (tests/test_init_dataset.py)
    judgment_set, errors = validate_version(directory)
    assert errors == [] and judgment_set.judgments.height == 0
