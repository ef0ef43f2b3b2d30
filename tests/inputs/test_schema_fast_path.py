"""The schemas' fast path (polars expressions) passes a table exactly when pandera's schema finds no error.

Validation decides the common case, a table with nothing wrong, without importing pandera
(schemas._judgments_pass / _queries_pass); a table the fast path does not pass goes to pandera,
which names the problems. Were the fast path to pass a table pandera refuses, a problem would go
unreported; were it to refuse one pandera passes, nothing is lost but time. Each table below is of
the schema the validators build (JUDGMENTS / QUERIES .schema_with_line); each breaks one rule, or
none, and says which answer it expects, so that a fast path and a schema that agree by both
refusing everything fail here too.
"""

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from pandera.errors import SchemaErrors

from releval.inputs import schemas
from releval.tables import JUDGMENTS, QUERIES

SCALE = {0: "not relevant", 1: "partly", 2: "fully"}


def _judgment(**values: Any) -> dict[str, Any]:
    row = {
        "query_id": "q1",
        "doc_id": "d1",
        "grade": 1,
        "annotator": "ann",
        "span_start": None,
        "span_end": None,
        "notes": None,
        "evidence": None,
        "line": 1,
    }
    return {**row, **values}


def _evidence(quote: str | None = "why", start: int | None = None, end: int | None = None) -> list[dict[str, Any]]:
    return [{"quote": quote, "occurrence": None, "start": start, "end": end}]


def _judgments(*changed: dict[str, Any]) -> list[dict[str, Any]]:
    """Three valid judgments (a quote on a relevant one, a span on another, a non-relevant one) and
    then ``changed`` rows (each a :func:`_judgment`)."""
    return [
        _judgment(grade=2, evidence=_evidence(), notes="clear"),
        _judgment(doc_id="d2", grade=0, line=2),
        _judgment(query_id="q2", annotator="other", span_start=0, span_end=5, line=3),
        *changed,
    ]


# (name, rows, scale, whether the table is valid)
JUDGMENT_CASES: list[tuple[str, list[dict[str, Any]], dict[int, str] | None, bool]] = [
    ("valid", _judgments(), SCALE, True),
    ("valid without a scale", _judgments(_judgment(doc_id="d9", grade=7, line=4)), None, True),
    ("empty", [], SCALE, True),
    ("same pair, another annotator", _judgments(_judgment(annotator="b", line=4)), SCALE, True),
    ("notes and evidence null", _judgments(_judgment(doc_id="d3", line=4)), SCALE, True),
    (
        "span given by evidence offsets",
        _judgments(_judgment(doc_id="d3", evidence=_evidence(None, 0, 4), line=4)),
        SCALE,
        True,
    ),
    ("query_id null", _judgments(_judgment(query_id=None, line=4)), SCALE, False),
    ("query_id empty", _judgments(_judgment(query_id="", line=4)), SCALE, False),
    ("query_id blanks", _judgments(_judgment(query_id=" \t", line=4)), SCALE, False),
    ("doc_id null", _judgments(_judgment(doc_id=None, line=4)), SCALE, False),
    ("doc_id blanks", _judgments(_judgment(doc_id="  ", line=4)), SCALE, False),
    ("annotator null", _judgments(_judgment(annotator=None, line=4)), SCALE, False),
    ("annotator empty", _judgments(_judgment(annotator="", line=4)), SCALE, False),
    ("grade null", _judgments(_judgment(doc_id="d3", grade=None, line=4)), SCALE, False),
    ("grade off the scale", _judgments(_judgment(doc_id="d3", grade=3, line=4)), SCALE, False),
    ("grade negative on the scale", _judgments(_judgment(doc_id="d3", grade=-1, line=4)), SCALE, False),
    ("grade negative without a scale", _judgments(_judgment(doc_id="d3", grade=-1, line=4)), None, False),
    ("line null", _judgments(_judgment(doc_id="d3", line=None)), SCALE, False),
    ("span_start negative", _judgments(_judgment(doc_id="d3", span_start=-1, span_end=4, line=4)), SCALE, False),
    ("span_end negative", _judgments(_judgment(doc_id="d3", span_start=-3, span_end=-1, line=4)), SCALE, False),
    ("span_start without span_end", _judgments(_judgment(doc_id="d3", span_start=2, line=4)), SCALE, False),
    ("span_end without span_start", _judgments(_judgment(doc_id="d3", span_end=2, line=4)), SCALE, False),
    ("span empty", _judgments(_judgment(doc_id="d3", span_start=5, span_end=5, line=4)), SCALE, False),
    ("span reversed", _judgments(_judgment(doc_id="d3", span_start=6, span_end=5, line=4)), SCALE, False),
    ("evidence on grade 0", _judgments(_judgment(doc_id="d3", grade=0, evidence=_evidence(), line=4)), SCALE, False),
    ("empty evidence on grade 0", _judgments(_judgment(doc_id="d3", grade=0, evidence=[], line=4)), SCALE, False),
    (
        "evidence and a span",
        _judgments(_judgment(doc_id="d3", evidence=_evidence(), span_start=0, span_end=3, line=4)),
        SCALE,
        False,
    ),
    ("duplicate key", _judgments(_judgment(grade=0, line=4)), SCALE, False),
    ("duplicate key, null query_id twice", [_judgment(query_id=None), _judgment(query_id=None, line=2)], SCALE, False),
]


def _query(**values: Any) -> dict[str, Any]:
    row = {"query_id": "q1", "text": "what is it", "split": "dev", "slices": [], "must_never_break": False, "line": 1}
    return {**row, **values}


def _queries(*changed: dict[str, Any]) -> list[dict[str, Any]]:
    """Two valid queries (one holdout, with slices, must-never-break) and then ``changed`` rows."""
    return [
        _query(),
        _query(query_id="q2", split="holdout", slices=["code", "howto"], must_never_break=True, line=2),
        *changed,
    ]


QUERY_CASES: list[tuple[str, list[dict[str, Any]], bool]] = [
    ("valid", _queries(), True),
    ("empty", [], True),
    ("one slice", _queries(_query(query_id="q3", slices=["code"], line=3)), True),
    ("query_id null", _queries(_query(query_id=None, line=3)), False),
    ("query_id empty", _queries(_query(query_id="", line=3)), False),
    ("query_id blanks", _queries(_query(query_id="\n ", line=3)), False),
    ("text null", _queries(_query(query_id="q3", text=None, line=3)), False),
    ("text blanks", _queries(_query(query_id="q3", text="   ", line=3)), False),
    ("split unknown", _queries(_query(query_id="q3", split="test", line=3)), False),
    ("split null", _queries(_query(query_id="q3", split=None, line=3)), False),
    ("split in capitals", _queries(_query(query_id="q3", split="Dev", line=3)), False),
    ("slices null", _queries(_query(query_id="q3", slices=None, line=3)), False),
    ("a slice empty", _queries(_query(query_id="q3", slices=["code", ""], line=3)), False),
    ("a slice blanks", _queries(_query(query_id="q3", slices=[" "], line=3)), False),
    ("a slice twice", _queries(_query(query_id="q3", slices=["code", "code"], line=3)), False),
    ("must_never_break null", _queries(_query(query_id="q3", must_never_break=None, line=3)), False),
    ("line null", _queries(_query(query_id="q3", line=None)), False),
    ("duplicate query_id", _queries(_query(text="again", line=3)), False),
]


def _pandera_passes(schema, frame: pl.DataFrame) -> bool:
    try:
        schema.validate(frame, lazy=True)
    except SchemaErrors:
        return False
    return True


def _agree(fast: Callable[[pl.DataFrame], bool], schema, frame: pl.DataFrame, valid: bool) -> None:
    assert _pandera_passes(schema, frame) is valid, "the case does not break what it says (pandera)"
    assert fast(frame) is valid, "the fast path disagrees with pandera"


@pytest.mark.parametrize(("name", "rows", "scale", "valid"), JUDGMENT_CASES, ids=[c[0] for c in JUDGMENT_CASES])
def test_judgments_fast_path_passes_exactly_what_pandera_passes(name, rows, scale, valid) -> None:
    frame = pl.DataFrame(rows, schema=JUDGMENTS.schema_with_line)
    _agree(lambda f: schemas._judgments_pass(f, scale), schemas.judgments_schema(scale), frame, valid)


@pytest.mark.parametrize(("name", "rows", "valid"), QUERY_CASES, ids=[c[0] for c in QUERY_CASES])
def test_queries_fast_path_passes_exactly_what_pandera_passes(name, rows, valid) -> None:
    frame = pl.DataFrame(rows, schema=QUERIES.schema_with_line)
    _agree(schemas._queries_pass, schemas.queries_schema(), frame, valid)


def test_a_table_of_another_shape_goes_to_pandera() -> None:
    # Extra or missing columns, or another dtype: the fast path leaves the verdict to pandera.
    judgments = pl.DataFrame(_judgments(), schema=JUDGMENTS.schema_with_line)
    queries = pl.DataFrame(_queries(), schema=QUERIES.schema_with_line)
    for frame in (judgments.with_columns(extra=pl.lit(1)), judgments.with_columns(pl.col("grade").cast(pl.Int32))):
        assert not schemas._judgments_pass(frame, SCALE)
        assert not _pandera_passes(schemas.judgments_schema(SCALE), frame)
    assert not schemas._queries_pass(queries.drop("slices"))
    assert not _pandera_passes(schemas.queries_schema(), queries.drop("slices"))
