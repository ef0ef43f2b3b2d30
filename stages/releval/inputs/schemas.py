"""Schemas of releval's own query and judgment files, and validation that reports every problem.

Files on disk (UTF-8, one JSON object per line, blank lines ignored; a problem names the file,
the 1-based line and the field):

``queries.jsonl``
    ``query_id``  non-empty string (an integer is accepted and read as a string); unique
    ``text``      the query, non-empty after stripping blanks
    ``split``     ``"dev"`` (tune on it) or ``"holdout"`` (report on it, never tune)
    ``slices``    optional list of non-empty, distinct strings (tags such as ``"keyword"``);
                  default ``[]``
    ``must_never_break`` optional boolean (a regression on it fails the gate); default false

    {"query_id": "q001", "text": "sort a dict by value", "split": "dev", "slices": ["howto"], "must_never_break": false}

``judgments.jsonl`` (inside a judgment-set directory, see :mod:`releval.judging.judgments`)
    ``query_id``, ``doc_id``  non-empty strings (integers accepted, read as strings)
    ``grade``      an integer on the set's declared scale (``manifest.yaml`` ``scale``); a string
                   such as ``"2"``, a float such as ``2.0`` or a boolean is refused
    ``annotator``  non-empty string, one of the manifest's ``annotators``
    ``evidence``   optional, on a grade >= 1 only: a list of evidence spans, the passages of the
                   document that make it relevant (see *Evidence spans* below); an empty list says
                   the judge looked and no passage carries it
    ``span_start``, ``span_end``  optional, together or not at all: integers with
                   0 <= span_start < span_end, character offsets into the document text
                   (with a corpus at hand, span_end <= the text's length). The older form of
                   one offset span: still read (on any grade, as before), never on a line that
                   also has ``evidence``; new evidence is written as ``evidence``
    ``notes``      optional string
    unique per (query_id, doc_id, annotator)

    {"query_id": "q001", "doc_id": "topic:dict", "grade": 2, "annotator": "alice"}
    {"query_id": "q001", "doc_id": "topic:dict", "grade": 2, "annotator": "bob",
     "evidence": [{"quote": "sorted(d.items(), key=lambda kv: kv[1])"}, {"start": 120, "end": 188}]}

(one line in the file; wrapped here).

Evidence spans (``evidence``), each one of

    ``{"quote": "exact text", "occurrence": 2}``  a quoted anchor: the exact characters (no
        whitespace or case folding), located in the document's text when the corpus is at hand;
        ``occurrence`` (optional, an integer >= 1) picks the n-th place the quote starts at,
        overlapping places counted ("aa" occurs twice in "aaa"); without it the quote must
        occur exactly once
    ``{"start": S, "end": E}``  character offsets, half-open, 0 <= S < E <= the text's length

The basis of every span is the document's **text as ingested, without its title** (the
``text`` column of the documents table): the same characters a chunk's ``start``/``end`` and its
id ``doc_id#start-end`` index (:mod:`releval.retrieval.chunking`), whether or not retrievers
read the title prepended to each chunk. A quote is therefore only ever looked for in the text,
never in the title: one convention, so that an anchor and the offsets it resolves to always
mean the same characters. Offsets count Unicode code points (Python's ``str`` indexing,
polars' ``len_chars``), not bytes.

A span's problem names its field as a JSON path into the line, indices from 0 as jq counts
them: ``evidence[0].quote`` is the first span's quote. Without a corpus, only the spans' form is
checked; against a corpus (:func:`check_references` with ``doc_texts``), each anchor must be
found (once, or at its occurrence) and each end lie within the text, and a problem names the
judged pair (query, doc) as well: a corpus edit that removes an anchor is caught here.

Unknown keys are refused (a typo such as ``must_never_brake`` must not silently become false).

Validation runs in two passes. The first reads each line and checks each value's JSON type; a
wrongly typed value is reported once and left empty for the second pass, which runs the pandera
schemas (:func:`queries_schema`, :func:`judgments_schema`) lazily so that every failing row and
check is reported, then rewrites pandera's failure cases as :class:`~releval.errors.InputError`
with the line of the row. Nothing stops at the first problem.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import polars as pl

from releval.errors import InputError, InputErrors
from releval.tables import JUDGMENTS, QUERIES

SPLITS = ("dev", "holdout")

QUERY_REQUIRED = ("query_id", "text", "split")
JUDGMENT_REQUIRED = ("query_id", "doc_id", "grade", "annotator")

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Record:
    """One input record and where it came from."""

    line: int
    values: dict[str, Any]


# --------------------------------------------------------------------------- reading lines


def read_jsonl(path: str | os.PathLike, errors: list[InputError], *, first_field: str) -> list[Record]:
    """The JSON objects of a JSONL file with their 1-based lines; problems go to ``errors``.

    Strict UTF-8 (a BOM is skipped), LF or CRLF, blank lines ignored. A missing file, an
    unreadable line, a line that is not a JSON object, or a file without any record is reported;
    the other lines are still read.
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        what = "expected a file, found a directory" if path.is_dir() else "no such file"
        errors.append(InputError(what, file=source, field="path"))
        return []
    records: list[Record] = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                errors.append(
                    InputError(
                        f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}",
                        file=source,
                        line=number,
                        field="encoding",
                    )
                )
                continue
            text = text.rstrip("\n").rstrip("\r")
            if not text.strip():
                continue
            try:
                value = parse_json_line(text, source, number)
            except InputError as exc:
                errors.append(exc)
                continue
            if not isinstance(value, dict):
                errors.append(
                    InputError(
                        f"expected a JSON object, found {_json_type(value)}", file=source, line=number, field="json"
                    )
                )
                continue
            records.append(Record(number, value))
    if not records and not errors:
        errors.append(
            InputError("empty: no records (only blank lines, or nothing)", file=source, line=1, field=first_field)
        )
    return records


MAX_JSON_DEPTH = 100
"""Arrays and objects nested deeper than this in one line are refused. Records are nearly flat (a
judgment's ``evidence``, a list of objects, is the deepest value: depth 3); without a bound,
json.loads of ``[[[...]]]`` 100,000 deep raises RecursionError, a traceback instead of a line naming the file."""

_INT64 = range(-(2**63), 2**63)


def parse_json_line(text: str, file: str, line: int, *, checked: Iterable[str] | None = None) -> Any:
    """The value of one JSONL line; every way it can fail is an InputError naming the file, the line
    and the field (shared by every JSONL reader of records: queries, judgments, filled pools, corpora).

    Refused, besides malformed JSON (field ``json``): nesting deeper than :data:`MAX_JSON_DEPTH`
    (``json``), a number with more digits than Python converts (``json``), and a lone surrogate
    escape such as ``"\\ud800"`` (not Unicode: no UTF-8 file, TREC line or parquet string can hold
    it) in any string, named by the top-level key that holds it (``json`` when the line is not an
    object). ``checked``: the only top-level keys searched for surrogates (a reader that ignores the
    other keys, such as a corpus's ``metadata``, does not refuse them); None: every key.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"malformed JSON: {exc.msg} (column {exc.colno})", file=file, line=line, field="json"
        ) from None
    except ValueError as exc:  # int('9' * 5000): past sys.get_int_max_str_digits()
        raise InputError(
            f"malformed JSON: a number too long to read ({exc})", file=file, line=line, field="json"
        ) from None
    except RecursionError:  # json.loads recurses once per level: [[[...]]] 100,000 deep
        raise _too_deep(file, line) from None
    # Only a line with that many brackets (in strings or not) can nest that deep: the walk is rare.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _json_depth(value) > MAX_JSON_DEPTH:
        raise _too_deep(file, line)
    if "\\u" in text:  # a surrogate can only come from an escape; strict UTF-8 decoding refused raw ones
        where = value.items() if isinstance(value, dict) else [("json", value)]
        for key, item in where:
            if checked is not None and key not in checked:
                continue
            bad = _lone_surrogate(key) or _lone_surrogate(item)
            if bad:
                field = key.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(value, dict) else "json"
                raise InputError(
                    f"contains a lone surrogate escape ({bad}): not valid Unicode", file=file, line=line, field=field
                )
    return value


def _too_deep(file: str, line: int) -> InputError:
    message = f"malformed JSON: arrays or objects nested more than {MAX_JSON_DEPTH} deep"
    return InputError(message, file=file, line=line, field="json")


def _json_depth(value: Any) -> int:
    """How deep arrays and objects nest in a parsed JSON value (the value itself: 1 when it is one);
    stops past :data:`MAX_JSON_DEPTH`. Iterative: it must not recurse where json.loads could."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                return depth
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _lone_surrogate(value: Any) -> str:
    """The first lone surrogate in a parsed JSON value, as its escape (``\\ud800``); "" when none."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"\\u{ord(value[exc.start]):04x}"
        return ""
    if isinstance(value, dict):
        return next((found for k, v in value.items() if (found := _lone_surrogate(k) or _lone_surrogate(v))), "")
    if isinstance(value, list):
        return next((found for v in value if (found := _lone_surrogate(v))), "")
    return ""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, int) and value not in _INT64:
        digits = str(abs(value))
        return f"an integer out of range ({'-' if value < 0 else ''}{digits[:12]}…, {len(digits)} digits)"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a float ({value!r})"
    if isinstance(value, str):
        return f"a string ({json.dumps(value, ensure_ascii=False)[:60]})"
    if isinstance(value, list):
        return "a list"
    return "an object"


# --------------------------------------------------------------------------- first pass: JSON types


def _id_value(value: Any) -> str | None:
    """An id as text; ids holding whitespace are refused here, at import, because a TREC line
    (and so every exported run) cannot carry them."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and not any(ch.isspace() for ch in value):
        return value
    return None


def _int_value(value: Any) -> int | None:
    """An integer the table can hold (64-bit: grades and spans); None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value in _INT64 else None


def _typed(
    records: list[Record],
    source: str,
    fields: tuple[str, ...],
    required: tuple[str, ...],
    converters: Mapping[str, tuple[Callable[[Any], Any], str]],
    defaults: Mapping[str, Any],
    errors: list[InputError],
) -> tuple[dict[str, list[Any]], set[tuple[int, str]]]:
    """Columns of converted values (None where missing or mistyped) and the (line, field) pairs reported."""
    columns: dict[str, list[Any]] = {name: [] for name in (*fields, "line")}
    reported: set[tuple[int, str]] = set()
    for record in records:
        for key in record.values:
            if key not in fields:
                errors.append(
                    InputError(f"unknown field; expected {', '.join(fields)}", file=source, line=record.line, field=key)
                )
        for name in fields:
            convert, expected = converters[name]
            if name not in record.values or (record.values[name] is None and name not in required):
                if name in required:
                    errors.append(InputError("missing", file=source, line=record.line, field=name))
                    reported.add((record.line, name))
                columns[name].append(defaults.get(name))
                continue
            raw = record.values[name]
            value = convert(raw)
            if value is None:
                errors.append(
                    InputError(
                        f"expected {expected}, found {_json_type(raw)}", file=source, line=record.line, field=name
                    )
                )
                reported.add((record.line, name))
            columns[name].append(value)
        columns["line"].append(record.line)
    return columns, reported


def _string_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    return None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: Any) -> list | None:
    return value if isinstance(value, list) else None


_QUERY_CONVERTERS = {
    "query_id": (_id_value, "a non-empty string without whitespace"),
    "text": (_str, "a string"),
    "split": (_str, "a string: dev or holdout"),
    "slices": (_string_list, "a list of strings"),
    "must_never_break": (_bool, "true or false"),
}
_JUDGMENT_CONVERTERS = {
    "query_id": (_id_value, "a non-empty string without whitespace"),
    "doc_id": (_id_value, "a non-empty string without whitespace"),
    "grade": (_int_value, "an integer grade"),
    "annotator": (_str, "a non-empty string"),
    "span_start": (_int_value, "an integer character offset"),
    "span_end": (_int_value, "an integer character offset"),
    "notes": (_str, "a string"),
    "evidence": (_list, 'a list of spans ({"quote": "..."} or {"start": S, "end": E})'),
}


# --------------------------------------------------------------------------- evidence spans

EVIDENCE_KEYS = ("quote", "occurrence", "start", "end")  # the fields of one span (JUDGMENTS' evidence struct)
_EVIDENCE_FORMS = 'quote (with an optional occurrence), or start and end'


class SpanError(ValueError):
    """One evidence span that cannot be located: ``key`` is the span's field at fault."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key, self.message = key, message


def evidence_field(index: int, key: str | None = None) -> str:
    """The field naming span ``index`` (0-based) of a line's evidence: ``evidence[0].quote``."""
    return f"evidence[{index}]" + (f".{key}" if key else "")


def parse_span(raw: Any) -> tuple[dict[str, Any] | None, list[tuple[str | None, str]]]:
    """One span of a line's ``evidence`` as the table holds it (every key of :data:`EVIDENCE_KEYS`,
    None where absent), or None and its problems as (key or None for the span itself, message).

    Only the form is checked here; where the span lies needs the document (:func:`locate_span`).
    A null value is an absent key (a table's struct written back has every key).
    """
    if not isinstance(raw, dict):
        return None, [
            (None, f'expected an object ({{"quote": ...}} or {{"start": S, "end": E}}), found {_json_type(raw)}')
        ]
    problems: list[tuple[str | None, str]] = []
    for key in raw:
        if key not in EVIDENCE_KEYS:
            problems.append((str(key), f"unknown field; a span has {_EVIDENCE_FORMS}"))
    given = {key: raw[key] for key in EVIDENCE_KEYS if raw.get(key) is not None}
    span: dict[str, Any] = dict.fromkeys(EVIDENCE_KEYS)
    if "quote" in given:
        quote = given["quote"]
        if not isinstance(quote, str):
            problems.append(("quote", f"expected a string, found {_json_type(quote)}"))
        elif not quote.strip():
            problems.append(("quote", "empty (or only blanks): an anchor must be text the document holds"))
        span["quote"] = quote
        for key in ("start", "end"):
            if key in given:
                problems.append((key, "a span is a quote or offsets, not both"))
        if "occurrence" in given:
            occurrence = _int_value(given["occurrence"])
            if occurrence is None:
                problems.append(("occurrence", f"expected an integer >= 1, found {_json_type(given['occurrence'])}"))
            elif occurrence < 1:
                problems.append(("occurrence", f"must be >= 1 (the first occurrence is 1), found {occurrence}"))
            span["occurrence"] = occurrence
    else:
        if "occurrence" in given:
            problems.append(("occurrence", "occurrence belongs to a quote; offsets need none"))
        for key in ("start", "end"):
            if key not in given:
                problems.append((key, f"missing: a span has {_EVIDENCE_FORMS}"))
                continue
            value = _int_value(given[key])
            if value is None:
                problems.append((key, f"expected an integer character offset, found {_json_type(given[key])}"))
            elif value < 0:
                problems.append((key, f"must be >= 0, found {value}"))
            span[key] = value
        start, end = span["start"], span["end"]
        if isinstance(start, int) and isinstance(end, int) and 0 <= start and 0 <= end and start >= end:
            problems.append(("end", f"start ({start}) must be < end ({end})"))
    return (None if problems else span), problems


def _check_evidence(columns: dict[str, list[Any]], source: str, errors: list[InputError], reported: set) -> None:
    """Check the form of every line's ``evidence`` in place: a good list becomes the table's list of
    spans; a bad one is reported (each problem at its ``evidence[i].key``) and left empty."""
    for index, (raw, line) in enumerate(zip(columns["evidence"], columns["line"])):
        if raw is None or (isinstance(raw, list) and not raw):
            continue  # an empty list says "judged: no passage carries it" (an adjudicator's settles the pair)
        spans, bad = [], False
        for number, item in enumerate(raw):
            span, problems = parse_span(item)
            for key, message in problems:
                errors.append(InputError(message, file=source, line=line, field=evidence_field(number, key)))
            bad = bad or bool(problems)
            spans.append(span)
        if bad:
            reported.add((line, "evidence"))
            columns["evidence"][index] = None
        else:
            columns["evidence"][index] = spans


def evidence_json(spans: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A line's ``evidence`` as judgments.jsonl writes it: each span with its used keys only, in the
    order of :data:`EVIDENCE_KEYS` (the table's structs carry all four, the unused ones null)."""
    return [{key: span[key] for key in EVIDENCE_KEYS if span.get(key) is not None} for span in spans]


def quote_places(text: str, quote: str) -> list[int]:
    """Every index at which ``quote`` starts in ``text``, overlapping places included."""
    places, at = [], text.find(quote)
    while at != -1 and quote:
        places.append(at)
        at = text.find(quote, at + 1)
    return places


def locate_span(text: str, span: Mapping[str, Any]) -> tuple[int, int]:
    """The half-open character offsets ``(start, end)`` of one evidence span in a document's text
    (as ingested, without its title); :class:`SpanError` naming the span's field when it cannot be
    placed: a quote not found, found more than once without ``occurrence``, found fewer times than
    its ``occurrence``, or offsets past the text's end. ``span`` has the table's keys
    (:data:`EVIDENCE_KEYS`; absent ones None or missing) and a form already checked."""
    quote = span.get("quote")
    if quote is None:
        start, end = int(span["start"]), int(span["end"])
        if end > len(text):
            raise SpanError("end", f"end {end} is past the end of the document's text ({len(text)} characters)")
        return start, end
    places = quote_places(text, quote)
    shown = _preview(quote)
    occurrence = span.get("occurrence")
    if not places:
        raise SpanError("quote", f"quote {shown} does not occur in the document's text")
    if occurrence is None:
        if len(places) > 1:
            at = ", ".join(str(place) for place in places[:5]) + (", ..." if len(places) > 5 else "")
            raise SpanError(
                "quote",
                f"quote {shown} occurs {len(places)} times (at characters {at}): "
                "ambiguous; give occurrence (1 = the first) or a longer quote",
            )
        occurrence = 1
    if occurrence > len(places):
        times = "once" if len(places) == 1 else f"{len(places)} times"
        raise SpanError("occurrence", f"occurrence {occurrence} of quote {shown}: it occurs only {times}")
    start = places[occurrence - 1]
    return start, start + len(quote)


def _preview(quote: str, width: int = 60) -> str:
    """A quote as a message shows it: JSON-quoted, cut after ``width`` characters."""
    return json.dumps(quote if len(quote) <= width else quote[:width] + "…", ensure_ascii=False)


# --------------------------------------------------------------------------- pandera schemas


def _non_empty(column: str):
    import pandera.polars as pa

    return pa.Check(
        lambda data: data.lazyframe.select(pl.col(data.key).str.strip_chars().str.len_chars() > 0),
        name="non_empty",
        error="non_empty",
    )


def queries_schema():
    """The pandera schema of a query table being validated (:attr:`releval.tables.QUERIES.schema_with_line`)."""
    import pandera.polars as pa

    slices_ok = pa.Check(
        lambda data: data.lazyframe.select(
            (
                pl.col(data.key).list.eval(pl.element().str.strip_chars().str.len_chars() > 0).list.all()
                & (pl.col(data.key).list.len() == pl.col(data.key).list.unique().list.len())
            ).fill_null(True)
        ),
        name="slices_valid",
        error="slices_valid",
    )
    dtype = QUERIES.schema_with_line
    return pa.DataFrameSchema(
        {
            "query_id": pa.Column(dtype["query_id"], checks=[_non_empty("query_id")], unique=True, nullable=False),
            "text": pa.Column(dtype["text"], checks=[_non_empty("text")], nullable=False),
            "split": pa.Column(
                dtype["split"],
                checks=[pa.Check.isin(list(SPLITS), name="split_known", error="split_known")],
                nullable=False,
            ),
            "slices": pa.Column(dtype["slices"], checks=[slices_ok], nullable=False),
            "must_never_break": pa.Column(dtype["must_never_break"], nullable=False),
            "line": pa.Column(dtype["line"], nullable=False),
        },
        strict=True,
        name="queries",
    )


def judgments_schema(scale: Mapping[int, str] | None = None):
    """The pandera schema of a judgment table being validated
    (:attr:`releval.tables.JUDGMENTS.schema_with_line`); ``scale`` (grade -> label) bounds the grades.

    Without a scale, grades must be integers >= 0 (what the metric engine takes).
    """
    import pandera.polars as pa

    grade_check = (
        pa.Check.isin(sorted(scale), name="grade_on_scale", error="grade_on_scale")
        if scale is not None
        else pa.Check.ge(0, name="grade_non_negative", error="grade_non_negative")
    )
    both_or_neither = pa.Check(
        lambda data: data.lazyframe.select(pl.col("span_start").is_null() == pl.col("span_end").is_null()),
        name="span_pair",
        error="span_pair",
    )

    def non_negative():
        return pa.Check.ge(0, name="span_non_negative", error="span_non_negative")

    ordered = pa.Check(
        lambda data: data.lazyframe.select((pl.col("span_start") < pl.col("span_end")).fill_null(True)),
        name="span_order",
        error="span_order",
    )

    # Evidence marks what makes a document relevant: none on grade 0, whatever the set's threshold.
    # A frame without the evidence column (built before evidence existed) passes both checks.
    def evidence_check(rule: pl.Expr, name: str):
        def check(data):
            has_evidence = "evidence" in data.lazyframe.collect_schema().names()
            return data.lazyframe.select(rule.fill_null(True) if has_evidence else pl.lit(True))

        return pa.Check(check, name=name, error=name)

    evidence_relevant = evidence_check(pl.col("evidence").is_null() | (pl.col("grade") >= 1), "evidence_relevant")
    evidence_or_span = evidence_check(pl.col("evidence").is_null() | pl.col("span_start").is_null(), "evidence_or_span")
    dtype = JUDGMENTS.schema_with_line
    return pa.DataFrameSchema(
        {
            "query_id": pa.Column(dtype["query_id"], checks=[_non_empty("query_id")], nullable=False),
            "doc_id": pa.Column(dtype["doc_id"], checks=[_non_empty("doc_id")], nullable=False),
            "grade": pa.Column(dtype["grade"], checks=[grade_check], nullable=False),
            "annotator": pa.Column(dtype["annotator"], checks=[_non_empty("annotator")], nullable=False),
            "span_start": pa.Column(dtype["span_start"], checks=[non_negative()], nullable=True),
            "span_end": pa.Column(dtype["span_end"], checks=[non_negative()], nullable=True),
            "notes": pa.Column(dtype["notes"], nullable=True),
            # optional in a frame built elsewhere, so that a table of judgments without evidence,
            # built before evidence existed, still validates
            "evidence": pa.Column(dtype["evidence"], nullable=True, required=False),
            "line": pa.Column(dtype["line"], nullable=False),
        },
        checks=[both_or_neither, ordered, evidence_relevant, evidence_or_span],
        unique=["query_id", "doc_id", "annotator"],
        strict=True,
        name="judgments",
    )


def _non_blank(column: str) -> pl.Expr:
    """Present and not only blanks: what ``not_nullable`` and :func:`_non_empty` pass."""
    return pl.col(column).is_not_null() & (pl.col(column).str.strip_chars().str.len_chars() > 0)


def _passes(frame: pl.DataFrame, schema: pl.Schema, rules: list[pl.Expr], unique: list[str]) -> bool:
    """Whether ``frame`` (of exactly ``schema``) holds every rule on every row and no two rows share ``unique``.

    The common case, a table with no problem, is decided by these polars expressions, each the rule of one
    check of the pandera schema beside it (null cells pass a check as pandera skips them in a nullable
    column); any table they do not pass goes to pandera, which names every problem as before. Importing
    pandera (and pandas under it) took 0.5-0.65 s of each judgments, rescore and queries stage.
    """
    if frame.schema != schema:
        return False
    if frame.height == 0:
        return True
    found = frame.select(pl.all_horizontal(rules).all().alias("rules"), pl.struct(unique).is_duplicated().any())
    rules_hold, duplicated = found.row(0)
    return bool(rules_hold) and not duplicated


def _judgments_pass(frame: pl.DataFrame, scale: Mapping[int, str] | None) -> bool:
    """Whether :func:`judgments_schema` (``scale``) would find nothing wrong in ``frame`` (:func:`_passes`)."""
    start, end, grade = pl.col("span_start"), pl.col("span_end"), pl.col("grade")
    evidence = pl.col("evidence").is_null()
    return _passes(
        frame,
        JUDGMENTS.schema_with_line,
        [
            _non_blank("query_id"),
            _non_blank("doc_id"),
            _non_blank("annotator"),
            grade.is_in(sorted(scale)) if scale is not None else grade >= 0,
            grade.is_not_null() & pl.col("line").is_not_null(),
            (start >= 0).fill_null(True) & (end >= 0).fill_null(True),  # span_non_negative
            start.is_null() == end.is_null(),  # span_pair
            (start < end).fill_null(True),  # span_order
            (evidence | (grade >= 1)).fill_null(True),  # evidence_relevant
            (evidence | start.is_null()).fill_null(True),  # evidence_or_span
        ],
        ["query_id", "doc_id", "annotator"],
    )


def _queries_pass(frame: pl.DataFrame) -> bool:
    """Whether :func:`queries_schema` would find nothing wrong in ``frame`` (:func:`_passes`)."""
    slices = pl.col("slices")
    return _passes(
        frame,
        QUERIES.schema_with_line,
        [
            _non_blank("query_id"),
            _non_blank("text"),
            pl.col("split").is_in(list(SPLITS)).fill_null(False),
            slices.is_not_null()
            & (
                slices.list.eval(pl.element().str.strip_chars().str.len_chars() > 0).list.all()
                & (slices.list.len() == slices.list.unique().list.len())
            ).fill_null(True),
            pl.col("must_never_break").is_not_null() & pl.col("line").is_not_null(),
        ],
        ["query_id"],
    )


def _pandera_errors(
    schema,
    frame: pl.DataFrame,
    source: str,
    reported: set[tuple[int, str]],
    describe: Callable[[str, str | None, dict[str, Any]], tuple[str, str] | None],
) -> list[InputError]:
    """Run ``schema`` lazily; each failure case becomes an InputError at the row's line.

    ``describe(check, column, row)`` gives (field, message), or None to skip the case (e.g. a
    uniqueness failure of a row's first occurrence). Cases on a (line, field) already reported in
    the first pass are skipped: a mistyped value is reported once.
    """
    from pandera.errors import SchemaError, SchemaErrors

    try:
        schema.validate(frame, lazy=True)
    except SchemaErrors as exc:
        cases = exc.failure_cases
    except SchemaError as exc:  # pragma: no cover - lazy validation raises SchemaErrors
        raise InputError(f"schema check failed: {exc}", file=source) from None
    else:
        return []
    errors: list[InputError] = []
    seen: set[tuple[int, str, str]] = set()
    rows = frame.to_dicts()
    for case in cases.iter_rows(named=True):
        index = case["index"]
        if index is None:
            errors.append(
                InputError(f"{case['check']}: {case['failure_case']}", file=source, field=case["column"] or "table")
            )
            continue
        row = rows[int(index)]
        described = describe(str(case["check"]), case["column"], row)
        if described is None:
            continue
        field, message = described
        key = (row["line"], field, message)
        if (row["line"], field) in reported or key in seen:
            continue
        seen.add(key)
        errors.append(InputError(message, file=source, line=row["line"], field=field))
    return errors


def _first_lines(frame: pl.DataFrame, keys: list[str]) -> dict[tuple, int]:
    first: dict[tuple, int] = {}
    for row in frame.select(*keys, "line").iter_rows():
        first.setdefault(tuple(row[:-1]), row[-1])
    return first


def _sort_errors(errors: list[InputError]) -> list[InputError]:
    return sorted(errors, key=lambda e: (e.file or "", e.line or 0))


# --------------------------------------------------------------------------- queries


def validate_query_records(records: list[Record], source: str) -> tuple[pl.DataFrame, list[InputError]]:
    """Check query records; return the table (rows with problems included) and every problem."""
    errors: list[InputError] = []
    columns, reported = _typed(
        records,
        source,
        QUERIES.columns,
        QUERY_REQUIRED,
        _QUERY_CONVERTERS,
        {"slices": [], "must_never_break": False},
        errors,
    )
    for i, value in enumerate(columns["slices"]):
        if value is None:
            columns["slices"][i] = []
    for i, value in enumerate(columns["must_never_break"]):
        if value is None:
            columns["must_never_break"][i] = False
    frame = pl.DataFrame(columns, schema=QUERIES.schema_with_line)
    first = _first_lines(frame.filter(pl.col("query_id").is_not_null()), ["query_id"])

    def describe(check: str, column: str | None, row: dict[str, Any]) -> tuple[str, str] | None:
        if check == "field_uniqueness":
            if row["query_id"] is None:
                return None
            line = first.get((row["query_id"],))
            if line == row["line"]:
                return None
            return "query_id", f"duplicate query_id {row['query_id']!r}; first at line {line}"
        if check == "not_nullable":
            return column or "", "missing"
        if check == "split_known":
            return "split", f"expected 'dev' or 'holdout', found {row['split']!r}"
        if check == "non_empty":
            return column or "", "empty (or only blanks)"
        if check == "slices_valid":
            return "slices", f"slices must be non-empty, distinct strings, found {row['slices']!r}"
        return column or "", f"fails {check}"

    if not _queries_pass(frame):
        errors += _pandera_errors(queries_schema(), frame, source, reported, describe)
    return frame, _sort_errors(errors)


def validate_queries(path: str | os.PathLike) -> tuple[pl.DataFrame, list[InputError]]:
    """Read and check a ``queries.jsonl``; return the table and every problem found."""
    errors: list[InputError] = []
    records = read_jsonl(path, errors, first_field="query_id")
    frame, more = validate_query_records(records, str(path))
    return frame, _sort_errors(errors + more)


def load_queries(path: str | os.PathLike) -> pl.DataFrame:
    """A checked query table (query_id, text, split, slices, must_never_break); InputErrors otherwise."""
    frame, errors = validate_queries(path)
    raise_all(errors)
    return frame.drop("line")


# --------------------------------------------------------------------------- judgments


def validate_judgment_records(
    records: list[Record],
    source: str,
    scale: Mapping[int, str] | None = None,
    annotators: Iterable[str] | None = None,
    prior: pl.DataFrame | None = None,
    prior_source: str = "the judgment set",
) -> tuple[pl.DataFrame, list[InputError]]:
    """Check judgment records (from judgments.jsonl or a filled pool) against the scale.

    ``annotators``: the names the set's manifest declares (None: any name). ``prior``: judgments
    already in the set (with their own ``line``, in the file ``prior_source``), which the new
    records must not duplicate.
    Returns the table (problem rows included) and every problem.
    """
    errors: list[InputError] = []
    columns, reported = _typed(records, source, JUDGMENTS.columns, JUDGMENT_REQUIRED, _JUDGMENT_CONVERTERS, {}, errors)
    _check_evidence(columns, source, errors, reported)
    frame = pl.DataFrame(columns, schema=JUDGMENTS.schema_with_line)
    keys = ["query_id", "doc_id", "annotator"]
    complete = frame.filter(pl.all_horizontal(pl.col(k).is_not_null() for k in keys))
    first = _first_lines(complete, keys)
    scale_text = _scale_text(scale) if scale is not None else ""

    def describe(check: str, column: str | None, row: dict[str, Any]) -> tuple[str, str] | None:
        if check == "multiple_fields_uniqueness":
            if any(row[k] is None for k in keys):
                return None
            line = first.get(tuple(row[k] for k in keys))
            if line == row["line"]:
                return None
            return "doc_id", (
                f"duplicate: annotator {row['annotator']!r} already judged query "
                f"{row['query_id']!r}, doc {row['doc_id']!r} at line {line}"
            )
        if check == "not_nullable":
            return column or "", "missing"
        if check == "grade_on_scale":
            return "grade", f"grade {row['grade']} is not on the scale {scale_text}"
        if check == "grade_non_negative":
            return "grade", f"grade {row['grade']} is negative; grades are integers >= 0"
        if check == "non_empty":
            return column or "", "empty (or only blanks)"
        if check == "span_non_negative":
            return column or "", f"must be >= 0, found {row[column]}" if column else "must be >= 0"
        if check == "span_pair":
            given = "span_start" if row["span_start"] is not None else "span_end"
            missing = "span_end" if given == "span_start" else "span_start"
            if (row["line"], given) in reported or (row["line"], missing) in reported:
                return None
            return missing, f"{given} is given without {missing}: give both or neither"
        if check == "span_order":
            return "span_end", f"span_start ({row['span_start']}) must be < span_end ({row['span_end']})"
        if check == "evidence_relevant":
            return "evidence", (
                f"evidence on grade {row['grade']}: spans mark what makes a document relevant, "
                "so only grades >= 1 carry them"
            )
        if check == "evidence_or_span":
            return "evidence", (
                "evidence and span_start/span_end on one line: give evidence only "
                '(span_start/span_end is the older form of one {"start": S, "end": E} span)'
            )
        return column or "", f"fails {check}"

    if not _judgments_pass(frame, scale):
        errors += _pandera_errors(judgments_schema(scale), frame, source, reported, describe)
    if annotators is not None:
        allowed = set(annotators)
        for row in frame.filter(pl.col("annotator").is_not_null()).iter_rows(named=True):
            if row["annotator"].strip() and row["annotator"] not in allowed:
                errors.append(
                    InputError(
                        f"annotator {row['annotator']!r} is not declared in the manifest "
                        f"(annotators: {', '.join(sorted(allowed)) or 'none'})",
                        file=source,
                        line=row["line"],
                        field="annotator",
                    )
                )
    if prior is not None and prior.height:
        earlier = _first_lines(prior, keys)
        for row in complete.iter_rows(named=True):
            line = earlier.get(tuple(row[k] for k in keys))
            if line is not None:
                errors.append(
                    InputError(
                        f"annotator {row['annotator']!r} already judged query {row['query_id']!r}, "
                        f"doc {row['doc_id']!r} at {prior_source}:{line}",
                        file=source,
                        line=row["line"],
                        field="doc_id",
                    )
                )
    return frame, _sort_errors(errors)


def validate_judgments(
    path: str | os.PathLike, scale: Mapping[int, str] | None = None, annotators: Iterable[str] | None = None
) -> tuple[pl.DataFrame, list[InputError]]:
    """Read and check a ``judgments.jsonl``; return the table and every problem found."""
    errors: list[InputError] = []
    records = read_jsonl(path, errors, first_field="query_id")
    frame, more = validate_judgment_records(records, str(path), scale, annotators)
    return frame, _sort_errors(errors + more)


def check_references(
    judgments: pl.DataFrame,
    source: str,
    *,
    query_ids: Iterable[str] | None = None,
    doc_lengths: Mapping[str, int] | None = None,
    doc_texts: Mapping[str, str] | None = None,
) -> list[InputError]:
    """Dangling ids: judgments naming queries or documents that do not exist, and spans past a
    document's end. ``doc_lengths`` maps doc_id -> length of its text in characters.

    ``doc_texts`` (doc_id -> the document's text as ingested, without its title; optional, and
    only looked up for lines with ``evidence``) places every evidence span: an anchor that no
    longer occurs (a corpus edit removed it), occurs more than once without an occurrence, or
    offsets past the end are each one problem naming the field (``evidence[0].quote``) and the
    judged pair. Without it, evidence offsets are still checked against ``doc_lengths``. With
    ``doc_texts`` and no ``doc_lengths``, unknown documents are the ones ``doc_texts`` lacks.
    """
    errors: list[InputError] = []
    known_queries = set(query_ids) if query_ids is not None else None
    if doc_lengths is None and doc_texts is not None:
        doc_lengths = _TextLengths(doc_texts)
    for row in judgments.iter_rows(named=True):
        if known_queries is not None and row["query_id"] is not None and row["query_id"] not in known_queries:
            errors.append(
                InputError(
                    f"unknown query {row['query_id']!r}: not in the query set",
                    file=source,
                    line=row["line"],
                    field="query_id",
                )
            )
        if doc_lengths is not None and row["doc_id"] is not None:
            length = doc_lengths.get(row["doc_id"])
            if length is None:
                errors.append(
                    InputError(
                        f"unknown document {row['doc_id']!r}: not in the corpus",
                        file=source,
                        line=row["line"],
                        field="doc_id",
                    )
                )
            elif row.get("span_end") is not None and row["span_end"] > length:
                errors.append(
                    InputError(
                        f"span_end {row['span_end']} is past the end of document "
                        f"{row['doc_id']!r} ({length} characters)",
                        file=source,
                        line=row["line"],
                        field="span_end",
                    )
                )
            if length is not None and row.get("evidence"):
                text = doc_texts.get(row["doc_id"]) if doc_texts is not None else None
                errors += _evidence_problems(row, text, length, source)
    return errors


class _TextLengths(Mapping):
    """doc_id -> length, read from a doc_id -> text mapping only when asked."""

    def __init__(self, texts: Mapping[str, str]):
        self.texts = texts

    def __getitem__(self, key: str) -> int:
        return len(self.texts[key])

    def __iter__(self):
        return iter(self.texts)

    def __len__(self) -> int:
        return len(self.texts)


def _evidence_problems(row: Mapping[str, Any], text: str | None, length: int, source: str) -> list[InputError]:
    """Each span of one judgment line that does not lie in its document (``text``; None: only the
    offsets are checked, against ``length``), as a problem naming the span's field and the pair."""
    pair = f"query {row['query_id']!r}, doc {row['doc_id']!r}"
    problems = []
    for index, span in enumerate(row["evidence"]):
        try:
            if text is not None:
                locate_span(text, span)
            elif span.get("quote") is None and span["end"] > length:
                raise SpanError(
                    "end", f"end {span['end']} is past the end of the document's text ({length} characters)"
                )
        except SpanError as exc:
            problems.append(
                InputError(
                    f"{pair}: {exc.message}", file=source, line=row["line"], field=evidence_field(index, exc.key)
                )
            )
    return problems


# --------------------------------------------------------------------------- helpers


def _scale_text(scale: Mapping[int, str]) -> str:
    return "{" + ", ".join(f"{grade}: {label}" for grade, label in sorted(scale.items())) + "}"


def raise_all(errors: list[InputError]) -> None:
    """Raise the one problem, or :class:`InputErrors` holding all of them; nothing when empty."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InputErrors(errors)
