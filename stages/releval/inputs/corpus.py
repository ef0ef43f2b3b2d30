"""Importers: corpora, query sets and judgments as polars frames with fixed schemas.

Every reader keeps the source order (it is the stable order), decodes UTF-8 strictly, strips a
UTF-8 byte-order mark, accepts LF and CRLF line endings, and reports bad input as an
:class:`~releval.errors.InputError` naming the file, the 1-based line and the field.

Formats
-------
``jsonl``   one JSON object per line; id in ``_id``, ``doc_id``/``query_id`` or ``id`` (first
            present wins; integers are accepted and written as strings), optional ``title``,
            required ``text``.
``folder``  (corpus only) a directory of ``.txt`` and ``.md`` files, searched recursively in
            sorted order of their '/'-separated relative paths; names starting with '.' (files
            or folders) are skipped, and so are symlinks that lead out of the folder (resolved;
            one :class:`LinkOutWarning` names them): a folder's documents are its own files, never
            a file elsewhere on the machine a link points at (links inside the folder are read;
            linked folders are not entered). doc_id = relative path without extension. text = the
            file verbatim except CRLF -> LF. title: for ``.md`` the first ATX heading (``# ...``)
            outside code fences, else ""; for ``.txt`` always "" -- a plain-text file has no
            markup saying which line is a title, and guessing would duplicate text into titles.
``beir``    a BEIR dataset directory: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.
``smart``   SMART / Cranfield: records start ``.I <id>``, fields ``.T`` title, ``.A``, ``.B``,
            ``.W`` text; title and text have whitespace runs collapsed to one space. Corpus
            doc_id = the ``.I`` number without leading zeros. Queries are numbered by position
            (see :func:`read_queries`).

Empty texts are kept, never dropped, with an :class:`EmptyTextWarning`: Cranfield documents 471
and 995 have no title and no text, yet 995 is judged relevant to query 125, so dropping it would
leave a judgment pointing at a missing document and change the corpus size from the published
1,400. Chunking gives such documents no chunks and counts them.
"""

from __future__ import annotations

import hashlib
import gzip
import io
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping

import polars as pl

from releval.errors import InputError, InputErrors
from releval.inputs.schemas import parse_json_line
from releval.stage import RelevalWarning
from releval.tables import DOCUMENTS, IMPORTED_QUERIES, QRELS, SMART_QUERIES

# Cleverdon's codes (cranqrel.readme) run the other way from releval grades: 1 "complete answer",
# 2 "high degree of relevance", 3 "useful", 4 "minimum interest", 5 "no interest" (never listed).
# grade = 5 - code puts them on 4..1 and leaves 0 for "no interest". The readme does not define
# -1, which appears exactly once per query; it is not on Cleverdon's scale, so it gets 0: judged,
# not relevant -- the same reading trec_eval gives the usual distribution of these qrels, which
# keeps -1 (relevance <= 0 is not relevant). Caveat: in a quick check the -1 documents sit very
# close to their query (median BM25 rank 2 of 1,400, above code 1's 13.5), which fits the source
# paper a question was written from more than "no interest"; pass a grade_map to treat them
# otherwise.
CRANFIELD_GRADE_MAP: Mapping[int, int] = {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}

DOC_ID_KEYS = ("_id", "doc_id", "id")
QUERY_ID_KEYS = ("_id", "query_id", "id")
BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")
FOLDER_SUFFIXES = (".txt", ".md")

_BOM = b"\xef\xbb\xbf"
_SMART_MARKER = re.compile(r"\.([A-Z])(?:\s+(.*))?")
_ATX_HEADING = re.compile(r" {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*")
_CODE_FENCE = re.compile(r" {0,3}(```|~~~)")


class EmptyTextWarning(RelevalWarning):
    """Records with an empty text were kept (see the module docstring); shown as a WARNING: line."""


class LinkOutWarning(RelevalWarning):
    """Symlinks leading out of a folder corpus were skipped, not read; shown as one WARNING: line."""


@dataclass(frozen=True)
class _Record:
    """One parsed record and where it came from, for error messages."""

    id: str
    title: str
    text: str
    file: str
    line: int
    id_field: str
    source_id: str = ""


# --- public readers ---------------------------------------------------------------------------


def read_corpus(path: str | os.PathLike, fmt: str) -> pl.DataFrame:
    """Read a corpus as ``doc_id, title, text, sha256`` (sha256 of UTF-8 ``title + "\\n" + text``)."""
    source = _source(_CORPUS_SOURCES, fmt, Path(path))
    records = _CORPUS_PARSERS[fmt](source)
    _require_records(records, source, "documents", _ID_FIELDS[fmt])
    _require_unique(records, "doc_id")
    _require_valid_unicode(records)
    _warn_empty_texts(records, "documents")
    return pl.DataFrame(
        {
            "doc_id": [r.id for r in records],
            "title": [r.title for r in records],
            "text": [r.text for r in records],
            "sha256": [_content_sha256(r) for r in records],
        },
        schema=DOCUMENTS.schema,
    )


def read_queries(path: str | os.PathLike, fmt: str) -> pl.DataFrame:
    """Read a query set as ``query_id, text``.

    ``smart`` (cran.qry) adds ``source_id``: the printed ``.I`` id, verbatim. Cranfield's printed
    ids run 001..365 with gaps and are not what its judgments use; the judgments number queries
    by position, so query_id = the 1-based position in the file.
    """
    source = _source(_QUERY_SOURCES, fmt, Path(path))
    records = _QUERY_PARSERS[fmt](source)
    _require_records(records, source, "queries", _ID_FIELDS[fmt])
    _require_unique(records, "query_id")
    _require_valid_unicode(records)
    _warn_empty_texts(records, "queries")
    columns = {"query_id": [r.id for r in records], "text": [r.text for r in records]}
    if fmt != "smart":
        return pl.DataFrame(columns, schema=IMPORTED_QUERIES.schema)
    return pl.DataFrame(columns | {"source_id": [r.source_id for r in records]}, schema=SMART_QUERIES.schema)


def read_judgments(
    path: str | os.PathLike, fmt: str, grade_map: Mapping[int, int] | None = None, *, split: str = "test"
) -> pl.DataFrame:
    """Read judgments as ``query_id, doc_id, grade`` (higher grade = more relevant).

    ``beir``: ``path`` is the dataset directory (reads ``qrels/<split>.tsv``) or a qrels .tsv file
    with the header ``query-id corpus-id score``; scores are grades unless ``grade_map`` is given.
    ``smart``: cranqrel lines ``query doc code``; codes go through ``grade_map``, by default
    :data:`CRANFIELD_GRADE_MAP`. A code missing from the map, or the same (query, doc) judged
    twice, is an error. (TREC qrels are read elsewhere.)
    """
    sources = {"beir": lambda p: _beir_qrels_file(p, split), "smart": _existing_file}
    source = _source(sources, fmt, Path(path))
    if fmt == "beir":
        rows = _beir_qrels_rows(source, grade_map)
    else:
        rows = _smart_qrels_rows(source, CRANFIELD_GRADE_MAP if grade_map is None else grade_map)
    if not rows:
        raise InputError(
            "no judgments found (empty, or only blank lines)", file=str(source), line=1, field=_QRELS_ID_FIELDS[fmt]
        )
    return pl.DataFrame(
        {"query_id": [r[0] for r in rows], "doc_id": [r[1] for r in rows], "grade": [r[2] for r in rows]},
        schema=QRELS.schema,
    )


# --- shared checks ----------------------------------------------------------------------------


def _source(sources: Mapping[str, Callable[[Path], Path]], fmt: str, path: Path) -> Path:
    """Check the format and the path; return the file (or folder) the format reads."""
    if fmt not in sources:
        raise InputError(f"unknown format {fmt!r}; expected one of {', '.join(sources)}", file=str(path), field="fmt")
    if not path.exists():
        raise InputError("no such file or directory", file=str(path), field="path")
    return sources[fmt](path)


def _existing_file(path: Path) -> Path:
    if not path.is_file():
        raise InputError("expected a file, found a directory", file=str(path), field="path")
    return path


def _existing_dir(path: Path) -> Path:
    if not path.is_dir():
        raise InputError("expected a directory of .txt/.md files", file=str(path), field="path")
    return path


def _beir_file(root: Path, name: str) -> Path:
    if not root.is_dir():
        raise InputError(f"expected a BEIR dataset directory containing {name}", file=str(root), field="path")
    path = root / name
    if not path.is_file():
        raise InputError("no such file in the BEIR directory", file=str(path), field="path")
    return path


def _beir_qrels_file(path: Path, split: str) -> Path:
    if path.is_file():
        return path
    qrels = path / "qrels" / f"{split}.tsv"
    if not qrels.is_file():
        raise InputError(f"no qrels file for split {split!r}", file=str(qrels), field="path")
    return qrels


def _require_records(records: list[_Record], source: Path, what: str, id_field: str) -> None:
    if not records:
        raise InputError(
            f"no {what} found (empty, or only blank lines)",
            file=str(source),
            line=None if source.is_dir() else 1,
            field=id_field,
        )


def _require_unique(records: list[_Record], kind: str) -> None:
    duplicates = _duplicates(records, kind)
    if duplicates:
        raise duplicates[0]


def _duplicates(records: list[_Record], kind: str) -> list[InputError]:
    """One error per record whose id an earlier record already has."""
    first_seen: dict[str, _Record] = {}
    found = []
    for record in records:
        first = first_seen.setdefault(record.id, record)
        if first is not record:
            found.append(
                InputError(
                    f"duplicate {kind} {record.id!r}; first at {first.file}:{first.line}",
                    file=record.file,
                    line=record.line,
                    field=record.id_field,
                )
            )
    return found


def _raise_all(problems: list[InputError]) -> None:
    """Raise the one problem, or all of them together (:class:`InputErrors`)."""
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise InputErrors(problems)


def _warn_empty_texts(records: list[_Record], what: str) -> None:
    empty = [r for r in records if not r.text.strip()]
    if empty:
        shown = ", ".join(f"{r.id} (line {r.line})" for r in empty[:10])
        more = f" and {len(empty) - 10} more" if len(empty) > 10 else ""
        warnings.warn(
            f"{empty[0].file}: {len(empty)} {what} with an empty text kept: {shown}{more}",
            EmptyTextWarning,
            stacklevel=3,
        )


def _require_valid_unicode(records: list[_Record]) -> None:
    """Reject lone surrogates: only JSON escapes like "\\ud800" make them, and they are not text."""
    for record in records:
        for field in ("title", "text"):
            try:
                getattr(record, field).encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(
                    "contains a lone surrogate escape (not valid Unicode)",
                    file=record.file,
                    line=record.line,
                    field=field,
                ) from None


def _content_sha256(record: _Record) -> str:
    return hashlib.sha256(f"{record.title}\n{record.text}".encode("utf-8")).hexdigest()


# --- line reading -----------------------------------------------------------------------------


def _open_binary(path: Path):
    """Plain or gzip-compressed (``.gz``); offsets in errors refer to the decompressed bytes."""
    if path.suffix.lower() != ".gz":
        return open(path, "rb")
    try:
        return io.BytesIO(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError) as exc:
        raise InputError(f"not a readable gzip file: {exc}", file=str(path), field="encoding") from None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(1-based line number, line without its LF/CRLF)``; strict UTF-8, BOM stripped.

    Splits on LF only: ``str.splitlines`` would also split on U+2028 and friends, which JSON
    strings may contain raw, and would shift every later line number.
    """
    offset = 0
    with _open_binary(path) as fh:
        for number, raw in enumerate(fh, start=1):
            start = len(_BOM) if number == 1 and raw.startswith(_BOM) else 0
            try:
                text = raw[start:].decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = start + exc.start
                raise InputError(
                    f"not UTF-8: byte 0x{raw[bad]:02x} at byte offset {offset + bad}",
                    file=str(path),
                    line=number,
                    field="encoding",
                ) from None
            offset += len(raw)
            yield number, _strip_line_end(text)


def _strip_line_end(line: str) -> str:
    if line.endswith("\n"):
        line = line[:-1]
    if line.endswith("\r"):
        line = line[:-1]
    return line


def _read_text(path: Path) -> str:
    """A whole file as text: strict UTF-8, BOM stripped, CRLF -> LF."""
    with _open_binary(path) as fh:
        data = fh.read()
    start = len(_BOM) if data.startswith(_BOM) else 0
    try:
        text = data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = start + exc.start
        raise InputError(
            f"not UTF-8: byte 0x{data[bad]:02x} at byte offset {bad}",
            file=str(path),
            line=data.count(b"\n", 0, bad) + 1,
            field="encoding",
        ) from None
    return text.replace("\r\n", "\n")


# --- jsonl / beir -----------------------------------------------------------------------------


def _jsonl_records(path: Path, id_keys: tuple[str, ...], *, with_title: bool) -> list[_Record]:
    records = []
    for number, line in _lines(path):
        if not line.strip():
            continue
        obj = _json_object(line, path, number, (*id_keys, "title", "text"))
        id_key, record_id = _json_id(obj, id_keys, path, number)
        title = _json_string(obj, "title", path, number, required=False) if with_title else ""
        text = _json_string(obj, "text", path, number, required=True)
        records.append(_Record(record_id, title, text, str(path), number, id_key))
    return records


def _json_object(line: str, path: Path, number: int, fields: tuple[str, ...]) -> dict:
    # Deep nesting, a lone surrogate in a field read (ignored keys may hold one): one InputError.
    obj = parse_json_line(line, str(path), number, checked=fields)
    if not isinstance(obj, dict):
        raise InputError(
            f"expected a JSON object, found {type(obj).__name__}", file=str(path), line=number, field="json"
        )
    return obj


def _json_id(obj: dict, keys: tuple[str, ...], path: Path, number: int) -> tuple[str, str]:
    key = next((k for k in keys if k in obj), None)
    if key is None:
        raise InputError(f"missing id: expected one of {', '.join(keys)}", file=str(path), line=number, field=keys[0])
    value = obj[key]
    # bool is an int subclass; True is not an id.
    if isinstance(value, int) and not isinstance(value, bool):
        return key, str(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(
            f"expected a non-empty string or integer id, found {value!r}", file=str(path), line=number, field=key
        )
    if any(ch.isspace() for ch in value):  # no TREC line could carry it: refuse now, not after encoding
        raise InputError(f"id {value!r} contains whitespace", file=str(path), line=number, field=key)
    return key, value


def _json_string(obj: dict, key: str, path: Path, number: int, *, required: bool) -> str:
    if key not in obj:
        if required:
            raise InputError("missing", file=str(path), line=number, field=key)
        return ""
    value = obj[key]
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise InputError(f"expected a string, found {type(value).__name__}", file=str(path), line=number, field=key)
    return value


def _beir_qrels_rows(path: Path, grade_map: Mapping[int, int] | None) -> list[tuple[str, str, int, int]]:
    rows = []
    for number, line in _lines(path):
        if number == 1:
            _check_beir_header(line, path)
            continue
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise InputError(
                f"expected 3 tab-separated columns, found {len(fields)}", file=str(path), line=number, field="query-id"
            )
        query_id, doc_id = fields[0].strip(), fields[1].strip()
        score = _parse_int(fields[2], path, number, "score")
        grade = _map_grade(score, grade_map, path, number, "score") if grade_map is not None else score
        rows.append((query_id, doc_id, grade, number))
    _require_unique_pairs(rows, path, "corpus-id")
    return rows


def _check_beir_header(line: str, path: Path) -> None:
    found = tuple(column.strip() for column in line.split("\t"))
    if found != BEIR_QRELS_HEADER:
        raise InputError(
            f"expected the header {' '.join(BEIR_QRELS_HEADER)!r} (tab-separated), found {line!r}",
            file=str(path),
            line=1,
            field="header",
        )


# --- folder -----------------------------------------------------------------------------------


def _folder_records(root: Path) -> list[_Record]:
    relative_paths = _folder_files(root)
    if not relative_paths:
        raise InputError(f"no {'/'.join(FOLDER_SUFFIXES)} files found", file=str(root), field="path")
    records, problems = [], []
    for relative in relative_paths:  # every unreadable file is reported, not only the first
        path = root / relative
        try:
            text = _read_text(path)
        except InputError as exc:
            problems.append(exc)
            continue
        except OSError as exc:  # a dangling link inside the folder, a file without read permission
            problems.append(InputError(f"cannot read: {exc.strerror}", file=str(path), field="path"))
            continue
        title = _markdown_title(text) if path.suffix.lower() == ".md" else ""
        doc_id = re.sub(r"\s", "_", relative.rsplit(".", 1)[0])  # ids never hold whitespace (TREC)
        records.append(_Record(doc_id, title, text, str(path), 1, "path"))
    _raise_all(problems + _duplicates(records, "doc_id"))
    return records


def _folder_files(root: Path) -> list[str]:
    """'/'-separated relative paths of the corpus files, sorted by code point (platform-independent).

    Symlinks (to files or folders) whose target resolves outside ``root`` are left out and named in
    one :class:`LinkOutWarning`; os.walk enters no linked folder in any case."""
    found, out = [], []
    inside = root.resolve()
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if not d.startswith(".")]
        names = [name for name in files if not name.startswith(".") and name.lower().endswith(FOLDER_SUFFIXES)]
        for kind, name in [*(("folder", d) for d in subdirs), *(("file", f) for f in names)]:
            path = Path(directory, name)
            relative = path.relative_to(root).as_posix()
            if path.is_symlink() and not path.resolve().is_relative_to(inside):
                out.append(f"{relative} -> {path.resolve()}")
            elif kind == "file":
                found.append(relative)
    if out:
        out.sort()
        more = f" and {len(out) - 10} more" if len(out) > 10 else ""
        warnings.warn(
            f"{root}: {len(out)} symlink(s) lead out of the corpus folder, skipped (not read): "
            f"{', '.join(out[:10])}{more}",
            LinkOutWarning,
            stacklevel=4,
        )
    return sorted(found)


def _markdown_title(text: str) -> str:
    in_fence = False
    for line in text.split("\n"):
        if _CODE_FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else _ATX_HEADING.fullmatch(line)
        if heading and heading.group(1):
            return heading.group(1).strip()
    return ""


# --- SMART / Cranfield ------------------------------------------------------------------------


@dataclass
class _SmartRecord:
    printed_id: str
    line: int
    fields: dict[str, list[str]]

    def field(self, name: str) -> str:
        """The field's lines with whitespace runs collapsed to one space."""
        return " ".join(" ".join(self.fields.get(name, [])).split())


def _smart_records(path: Path) -> Iterator[_SmartRecord]:
    record: _SmartRecord | None = None
    current: list[str] | None = None
    for number, line in _lines(path):
        marker = _SMART_MARKER.fullmatch(line.rstrip())
        if marker and marker.group(1) == "I":
            if record is not None:
                yield record
            record, current = _SmartRecord(_smart_id(marker.group(2), path, number), number, {}), None
        elif record is None:
            if line.strip():
                raise InputError(
                    "record without .I: text before the first '.I <id>' line", file=str(path), line=number, field=".I"
                )
        elif marker:
            current = record.fields.setdefault(marker.group(1), [])
            if marker.group(2):
                current.append(marker.group(2))
        elif current is not None:
            current.append(line)
        elif line.strip():
            raise InputError(
                "text after '.I' before any field marker (.T, .W, ...)", file=str(path), line=number, field=".I"
            )
    if record is not None:
        yield record


def _smart_id(value: str | None, path: Path, number: int) -> str:
    value = (value or "").strip()
    if not (value.isascii() and value.isdigit()):
        raise InputError(f"expected '.I <number>', found id {value!r}", file=str(path), line=number, field=".I")
    return value


def _smart_corpus_records(path: Path) -> list[_Record]:
    return [
        _Record(str(int(r.printed_id)), r.field("T"), r.field("W"), str(path), r.line, ".I")
        for r in _smart_records(path)
    ]


def _smart_query_records(path: Path) -> list[_Record]:
    records = list(_smart_records(path))
    # Printed ids are not the query ids, but a repeated one still means a broken or doubled file.
    _require_unique([_Record(r.printed_id, "", "", str(path), r.line, ".I") for r in records], "printed .I id")
    return [
        _Record(str(position), "", r.field("W"), str(path), r.line, ".I", source_id=r.printed_id)
        for position, r in enumerate(records, start=1)
    ]


def _smart_qrels_rows(path: Path, grade_map: Mapping[int, int]) -> list[tuple[str, str, int, int]]:
    rows = []
    for number, line in _lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3:
            raise InputError(
                f"expected 3 columns 'query doc code', found {len(fields)}", file=str(path), line=number, field="query"
            )
        query, doc, code = (
            _parse_int(value, path, number, name) for value, name in zip(fields, ("query", "doc", "code"))
        )
        rows.append((str(query), str(doc), _map_grade(code, grade_map, path, number, "code"), number))
    _require_unique_pairs(rows, path, "doc")
    return rows


_ASCII_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int(value: str, path: Path, number: int, field: str) -> int:
    # int() would also take '1_0' (= 10) and non-ASCII digits; a judgment file means neither.
    if not _ASCII_INT.fullmatch(value):
        raise InputError(f"expected an integer, found {value!r}", file=str(path), line=number, field=field)
    return int(value)


def _map_grade(code: int, grade_map: Mapping[int, int], path: Path, number: int, field: str) -> int:
    if code not in grade_map:
        raise InputError(
            f"code {code} is not in the grade map {dict(grade_map)}", file=str(path), line=number, field=field
        )
    return int(grade_map[code])


def _require_unique_pairs(rows: list[tuple[str, str, int, int]], path: Path, field: str) -> None:
    first_line: dict[tuple[str, str], int] = {}
    for query_id, doc_id, _, number in rows:
        first = first_line.setdefault((query_id, doc_id), number)
        if first != number:
            raise InputError(
                f"query {query_id!r} judges doc {doc_id!r} twice; first at line {first}",
                file=str(path),
                line=number,
                field=field,
            )


# --- format tables ----------------------------------------------------------------------------

_CORPUS_SOURCES: dict[str, Callable[[Path], Path]] = {
    "jsonl": _existing_file,
    "folder": _existing_dir,
    "beir": lambda root: _beir_file(root, "corpus.jsonl"),
    "smart": _existing_file,
}
_CORPUS_PARSERS: dict[str, Callable[[Path], list[_Record]]] = {
    "jsonl": lambda path: _jsonl_records(path, DOC_ID_KEYS, with_title=True),
    "folder": _folder_records,
    "beir": lambda path: _jsonl_records(path, DOC_ID_KEYS, with_title=True),
    "smart": _smart_corpus_records,
}
_QUERY_SOURCES: dict[str, Callable[[Path], Path]] = {
    "jsonl": _existing_file,
    "beir": lambda root: _beir_file(root, "queries.jsonl"),
    "smart": _existing_file,
}
_QUERY_PARSERS: dict[str, Callable[[Path], list[_Record]]] = {
    "jsonl": lambda path: _jsonl_records(path, QUERY_ID_KEYS, with_title=False),
    "beir": lambda path: _jsonl_records(path, QUERY_ID_KEYS, with_title=False),
    "smart": _smart_query_records,
}
# The field an "empty input" error names: where the first record's id would have been.
_ID_FIELDS = {"jsonl": "_id", "beir": "_id", "folder": "path", "smart": ".I"}
_QRELS_ID_FIELDS = {"beir": "query-id", "smart": "query"}


def corpus_format_of(path: Path) -> str:
    """The format a corpus path is read in when none is named: parquet, beir, folder or jsonl."""
    if path.suffix.lower() == ".parquet":
        return "parquet"
    if path.is_dir():
        return "beir" if (path / "corpus.jsonl").is_file() else "folder"
    return "jsonl"


def read_docs(path: str | Path, fmt: str = "jsonl") -> pl.DataFrame:
    """doc_id, title, text of a corpus file (jsonl[.gz], folder, beir, smart) or a docs.parquet."""
    path = Path(path)
    if fmt == "parquet" or path.suffix.lower() == ".parquet":
        try:
            frame = pl.read_parquet(path)
        except Exception as exc:  # polars raises several types for a bad file
            raise InputError(f"not a readable parquet file: {exc}", file=str(path), field="path") from None
        for column in ("doc_id", "text"):
            if column not in frame.columns:
                raise InputError("missing column", file=str(path), field=column)
        if "title" not in frame.columns:
            frame = frame.with_columns(pl.lit("").alias("title"))
        return frame.select(pl.col("doc_id").cast(pl.Utf8), pl.col("title").cast(pl.Utf8), pl.col("text").cast(pl.Utf8))
    return read_corpus(path, fmt).select("doc_id", "title", "text")


def judgments_file(path: str | os.PathLike, fmt: str, *, split: str = "test") -> Path:
    """The file :func:`read_judgments` reads for ``path`` (a BEIR dataset directory names its qrels file)."""
    return _source({"beir": lambda p: _beir_qrels_file(p, split), "smart": _existing_file}, fmt, Path(path))
