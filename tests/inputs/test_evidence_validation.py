"""Evidence spans in judgments (issue 31, item 1): their form, their place in the corpus, one line per problem.

A judged pair of grade >= 1 may carry ``evidence``: quoted anchors and character offsets into the
document's text without its title. Every problem is one line naming the file, the line and the span's
field (``evidence[0].quote``); a corpus edit that removes an anchor is a problem naming the pair; the
shipped judgments, which hold no evidence, read and aggregate exactly as before.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from releval.inputs import schemas
from releval.judging import judgments as jm
from releval.tables import JUDGMENTS
from support import ROOT

SCALE = {0: "not relevant", 1: "partial", 2: "relevant"}
TEXT = "Use sorted(d.items(), key=lambda kv: kv[1]) to sort a dict by value. A dict keeps insertion order."
DOCS = pl.DataFrame(
    {"doc_id": ["d1", "d2"], "title": ["Sorting dicts", "Other"], "text": [TEXT, "nothing here at all"]}
)
V3 = ROOT / "data" / "judgments" / "v3"
# sha256 of data/judgments/v3's qrels as CSV, written by the code before evidence existed (main at 4d7fd44)
V3_QRELS_SHA256 = "73a914ffb579ababeac30ab2c9c286295f01eb546de56176e68fbb9aa673d4a9"


def write_lines(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def judged(doc_id: str = "d1", grade: int = 2, **values) -> dict:
    return {"query_id": "q1", "doc_id": doc_id, "grade": grade, "annotator": "alice", **values}


def problems(path: Path, texts: dict[str, str] | None = None) -> list[schemas.InputError]:
    """Every problem of a judgments file, its form and (with ``texts``) its place in the corpus."""
    frame, errors = schemas.validate_judgments(path, SCALE, ["alice", "bob"])
    if texts is not None:
        errors += schemas.check_references(frame, str(path), doc_texts=texts)
    return errors


def where(errors) -> list[tuple[int | None, str | None]]:
    return [(error.line, error.field) for error in errors]


def assert_one_line_each(errors, path: Path) -> None:
    for error in errors:
        text = str(error)
        assert "\n" not in text and text.startswith(f"{path}:{error.line}: field '{error.field}': ")


# --------------------------------------------------------------------------- what is read


def test_quotes_and_offsets_read_as_the_evidence_column(tmp_path):
    quote = {"quote": "sorted(d.items(), key=lambda kv: kv[1])"}
    path = write_lines(
        tmp_path / "judgments.jsonl",
        judged(evidence=[quote, {"start": 71, "end": 98}]),
        judged("d2", 1, annotator="bob", evidence=[{"quote": "here", "occurrence": 1}]),
        judged("d2", 0),
    )
    frame, errors = schemas.validate_judgments(path, SCALE, ["alice", "bob"])
    assert errors == []
    assert frame.schema == JUDGMENTS.schema_with_line
    assert frame["evidence"].to_list() == [
        [
            {"quote": quote["quote"], "occurrence": None, "start": None, "end": None},
            {"quote": None, "occurrence": None, "start": 71, "end": 98},
        ],
        [{"quote": "here", "occurrence": 1, "start": None, "end": None}],
        None,
    ]
    texts = jm.doc_texts(DOCS)
    assert schemas.check_references(frame, str(path), doc_lengths=jm.doc_lengths(DOCS), doc_texts=texts) == []
    assert [schemas.locate_span(TEXT, span) for span in frame["evidence"][0]] == [(4, 43), (71, 98)]


def test_evidence_written_back_reads_the_same(tmp_path):
    """evidence_json gives the spans as a line holds them (used keys only): what a writer of
    judgments.jsonl (judgment_line) puts in a new line, read back to the same table."""
    spans = [{"quote": "dict", "occurrence": 2}, {"start": 0, "end": 3}]
    path = write_lines(tmp_path / "j.jsonl", judged(evidence=spans))
    frame, errors = schemas.validate_judgments(path, SCALE)
    assert errors == [] and schemas.evidence_json(frame["evidence"][0]) == spans
    again = write_lines(tmp_path / "again.jsonl", judged(evidence=schemas.evidence_json(frame["evidence"][0])))
    assert schemas.validate_judgments(again, SCALE)[0].equals(frame)


def test_the_old_span_pair_still_reads_as_before(tmp_path):
    """span_start/span_end (one offset span) keeps its rules, on any grade: old files stay valid."""
    path = write_lines(tmp_path / "j.jsonl", judged(grade=0, span_start=0, span_end=5))
    frame, errors = schemas.validate_judgments(path, SCALE)
    assert errors == [] and frame.row(0, named=True)["evidence"] is None
    assert frame.select("span_start", "span_end").row(0) == (0, 5)


def test_a_null_key_in_a_span_is_an_absent_key(tmp_path):
    """A span written back from the table has all four keys, the unused ones null."""
    span = {"quote": None, "occurrence": None, "start": 0, "end": 3}
    path = write_lines(tmp_path / "j.jsonl", judged(evidence=[span]))
    frame, errors = schemas.validate_judgments(path, SCALE)
    assert errors == [] and frame["evidence"].to_list() == [[span]]


# --------------------------------------------------------------------------- problems against the corpus


def test_a_missing_anchor_names_file_line_field_and_pair(tmp_path):
    path = write_lines(
        tmp_path / "j.jsonl",
        judged("d2", 1),
        judged(evidence=[{"quote": "sort a dict"}, {"quote": "sort a list"}]),
    )
    errors = problems(path, {"d1": TEXT, "d2": "x"})
    assert where(errors) == [(2, "evidence[1].quote")]
    assert errors[0].detail == """query 'q1', doc 'd1': quote "sort a list" does not occur in the document's text"""
    assert_one_line_each(errors, path)


def test_an_ambiguous_anchor_needs_an_occurrence(tmp_path):
    path = write_lines(
        tmp_path / "j.jsonl",
        judged(evidence=[{"quote": "dict"}]),
        judged(annotator="bob", evidence=[{"quote": "dict", "occurrence": 2}]),
        judged("d2", annotator="bob", evidence=[{"quote": "here", "occurrence": 2}]),
    )
    errors = problems(path, {"d1": TEXT, "d2": DOCS["text"][1]})
    assert where(errors) == [(1, "evidence[0].quote"), (3, "evidence[0].occurrence")]
    assert "occurs 2 times (at characters 54, 71): ambiguous; give occurrence" in errors[0].detail
    assert errors[1].detail == """query 'q1', doc 'd2': occurrence 2 of quote "here": it occurs only once"""
    assert schemas.locate_span(TEXT, {"quote": "dict", "occurrence": 2}) == (71, 75)
    assert_one_line_each(errors, path)


def test_overlapping_places_of_a_quote_count_as_occurrences():
    """'aa' in 'aaa' starts at 0 and at 1: two places, so the bare quote is ambiguous."""
    assert schemas.quote_places("aaa", "aa") == [0, 1]
    with pytest.raises(schemas.SpanError, match="occurs 2 times"):
        schemas.locate_span("aaa", {"quote": "aa"})
    assert schemas.locate_span("aaa", {"quote": "aa", "occurrence": 2}) == (1, 3)


def test_offsets_past_the_end_are_refused_with_the_corpus_or_its_lengths(tmp_path):
    path = write_lines(tmp_path / "j.jsonl", judged(evidence=[{"start": 0, "end": 4}, {"start": 90, "end": 101}]))
    frame, errors = schemas.validate_judgments(path, SCALE)
    assert errors == []
    with_texts = schemas.check_references(frame, str(path), doc_texts={"d1": TEXT})
    with_lengths = schemas.check_references(frame, str(path), doc_lengths={"d1": len(TEXT)})
    for found in (with_texts, with_lengths):
        assert where(found) == [(1, "evidence[1].end")]
        assert (
            found[0].detail
            == f"query 'q1', doc 'd1': end 101 is past the end of the document's text ({len(TEXT)} characters)"
        )
        assert_one_line_each(found, path)


def test_a_quote_is_looked_for_in_the_text_not_the_title(tmp_path):
    """The title 'Sorting dicts' is not part of the text the offsets (and chunk ids) index."""
    path = write_lines(tmp_path / "j.jsonl", judged(evidence=[{"quote": "Sorting dicts"}]))
    frame, _ = schemas.validate_judgments(path, SCALE)
    errors = schemas.check_references(frame, str(path), doc_texts=jm.doc_texts(DOCS))
    assert where(errors) == [(1, "evidence[0].quote")] and "does not occur" in errors[0].detail


def test_spans_on_grade_0_are_refused(tmp_path):
    path = write_lines(
        tmp_path / "j.jsonl", judged(grade=0, evidence=[{"quote": "dict", "occurrence": 1}]), judged("d2", 1)
    )
    errors = problems(path)
    assert where(errors) == [(1, "evidence")]
    assert errors[0].detail == (
        "evidence on grade 0: spans mark what makes a document relevant, so only grades >= 1 carry them"
    )
    assert_one_line_each(errors, path)


def test_malformed_spans_each_name_their_field(tmp_path):
    path = write_lines(
        tmp_path / "j.jsonl",
        judged(evidence=[{"quote": " "}, "dict", {"start": 5, "end": 2}, {"start": -1, "end": True}]),  # 1
        judged("d2", evidence=[{"quote": "x", "end": 3, "occurrence": 0}, {"start": 1}, {"qoute": "x"}]),  # 2
        judged("d3", evidence=[]),  # 3
        judged("d4", evidence={"quote": "x"}),  # 4
        judged("d5", evidence=[{"quote": "x"}], span_start=0, span_end=1),  # 5
        judged("d6", evidence=[{"start": 0, "end": 1, "occurrence": 1}]),  # 6
    )
    errors = problems(path)
    assert sorted(where(errors)) == sorted(
        [
            (1, "evidence[0].quote"),
            (1, "evidence[1]"),
            (1, "evidence[2].end"),
            (1, "evidence[3].start"),
            (1, "evidence[3].end"),
            (2, "evidence[0].end"),
            (2, "evidence[0].occurrence"),
            (2, "evidence[1].end"),
            (2, "evidence[2].qoute"),
            (2, "evidence[2].start"),
            (2, "evidence[2].end"),
            (4, "evidence"),
            (5, "evidence"),
            (6, "evidence[0].occurrence"),
        ]
    )
    messages = {(error.line, error.field): error.detail for error in errors}
    assert messages[(1, "evidence[0].quote")].startswith("empty (or only blanks)")
    assert (
        messages[(1, "evidence[1]")].startswith("expected an object")
        and 'a string ("dict")' in messages[(1, "evidence[1]")]
    )
    assert messages[(1, "evidence[2].end")] == "start (5) must be < end (2)"
    assert messages[(1, "evidence[3].start")] == "must be >= 0, found -1"
    assert messages[(1, "evidence[3].end")] == "expected an integer character offset, found a boolean (true)"
    assert messages[(2, "evidence[0].end")] == "a span is a quote or offsets, not both"
    assert messages[(2, "evidence[0].occurrence")] == "must be >= 1 (the first occurrence is 1), found 0"
    assert messages[(2, "evidence[2].qoute")].startswith("unknown field")
    assert (3, "evidence") not in messages  # an empty list: the judge looked and no passage carries it
    assert (
        messages[(4, "evidence")].startswith("expected a list of spans")
        and "found an object" in messages[(4, "evidence")]
    )
    assert messages[(5, "evidence")].startswith("evidence and span_start/span_end on one line")
    assert_one_line_each(errors, path)


# --------------------------------------------------------------------------- judgment sets and the corpus


def make_set(directory: Path, *records: dict) -> Path:
    data = "".join(jm.judgment_line(record) + "\n" for record in records).encode("utf-8")
    if any("evidence" in record for record in records):  # judgment_line predates evidence: add it as written
        data = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records).encode("utf-8")
    manifest = jm.Manifest(directory.name, None, "2026-11-30", SCALE, "RUBRIC.md", ("alice",), "")
    jm.write_version(directory, manifest, data, {"RUBRIC.md": b"# Rubric\n"})
    return directory


def test_a_corpus_edit_that_removes_an_anchor_is_an_error_naming_the_pair(tmp_path):
    directory = make_set(
        tmp_path / "v1",
        judged(evidence=[{"quote": "keeps insertion order"}]),
        judged("d2", 0),
    )
    loaded = jm.load_version(directory, doc_lengths=jm.doc_lengths(DOCS), doc_texts=jm.doc_texts(DOCS))
    assert loaded.judgments["evidence"].to_list()[0] == [
        {"quote": "keeps insertion order", "occurrence": None, "start": None, "end": None}
    ]
    edited = DOCS.with_columns(pl.col("text").str.replace("keeps insertion order", "remembers the order"))
    _, errors = jm.validate_version(directory, doc_lengths=jm.doc_lengths(edited), doc_texts=jm.doc_texts(edited))
    path = directory / "judgments.jsonl"
    assert where(errors) == [(1, "evidence[0].quote")]
    assert str(errors[0]) == (
        f"{path}:1: field 'evidence[0].quote': query 'q1', doc 'd1': "
        """quote "keeps insertion order" does not occur in the document's text"""
    )
    # the judgments stage reads the configured set against the corpus: the same problem stops it
    config = {"format": "releval", "path": str(directory), "version": "v1"}
    with pytest.raises(schemas.InputError, match=r"evidence\[0\]\.quote.*query 'q1', doc 'd1'"):
        jm.active_judgments(config, {}, edited, pl.Series(["q1"]))
    assert jm.active_judgments(config, {}, DOCS, pl.Series(["q1"])).qrels.height == 2


def test_importing_judgments_checks_their_anchors(tmp_path):
    records = [schemas.Record(1, judged(evidence=[{"quote": "not in the text"}]))]
    (tmp_path / "RUBRIC.md").write_text("# Rubric\n", encoding="utf-8")
    with pytest.raises(schemas.InputError, match=r"filled\.jsonl:1: field 'evidence\[0\]\.quote'"):
        jm.add_judgments(
            records,
            "filled.jsonl",
            tmp_path / "v1",
            doc_lengths=jm.doc_lengths(DOCS),
            doc_texts=jm.doc_texts(DOCS),
            rubric=None,
            scale=SCALE,
        )
    assert not (tmp_path / "v1").exists()


def test_the_shipped_v3_judgments_validate_and_aggregate_unchanged():
    judgment_set = jm.load_version(V3)
    assert judgment_set.manifest.judgments_sha256 == hashlib.sha256((V3 / "judgments.jsonl").read_bytes()).hexdigest()
    assert judgment_set.judgments["evidence"].null_count() == judgment_set.judgments.height
    qrels = judgment_set.qrels()
    assert hashlib.sha256(qrels.write_csv().encode("utf-8")).hexdigest() == V3_QRELS_SHA256
