"""Read judgments and runs (TREC text, releval JSONL, parquet); write TREC run files.

Tables come back in the shapes :mod:`releval.measurement.metrics` takes: qrels
(:data:`releval.tables.QRELS`) ``query_id, doc_id, grade`` and document-level runs
(:data:`releval.tables.DOC_RUN`) ``query_id, doc_id, score``. Every problem is an
:class:`InputError` naming the file, the 1-based line (for parquet: the row) and the field.

TREC qrels lines are ``query_id iteration doc_id grade``; TREC run lines are
``query_id Q0 doc_id rank score tag``. Fields are separated by any whitespace; CRLF line ends,
trailing blanks and blank lines are tolerated. The iteration, Q0, rank and tag columns are not
used: like trec_eval, releval orders a run by its scores. A ``.gz`` suffix is decompressed.
"""

from __future__ import annotations

import gzip
import mmap
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from releval import io
from releval.errors import InputError
from releval.inputs.corpus import read_judgments
from releval.inputs.schemas import parse_json_line
from releval.measurement.metrics import Checked, check_run, checked_qrels, checked_run
from releval.tables import DOC_RUN, QRELS, TREC_QRELS_LINE, TREC_RUN_LINE, Table

FORMATS = ("trec", "jsonl", "parquet")
QRELS_FORMATS = (*FORMATS, "beir")  # qrels only: a BEIR qrels .tsv (header query-id, corpus-id, score)
BEIR_QRELS_HEADER = b"query-id\tcorpus-id\tscore"
RUN_COLUMNS = TREC_RUN_LINE  # the old name, which benchmarks/bench_score.py imports


def infer_format(path: str | Path) -> str:
    """``parquet`` for .parquet/.pq, ``jsonl`` for .jsonl/.ndjson (optionally .gz), else ``trec``."""
    suffixes = [suffix.lower() for suffix in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    last = suffixes[-1] if suffixes else ""
    if last in (".parquet", ".pq"):
        return "parquet"
    if last in (".jsonl", ".ndjson"):
        return "jsonl"
    return "trec"


def read_qrels(path: str | Path, format: str | None = None) -> pl.DataFrame:
    """Judgments as ``query_id, doc_id, grade`` (grades are whole numbers >= 0): TREC qrels, JSONL,
    parquet, or a BEIR qrels .tsv (``format`` default: a file starting with BEIR's header is BEIR, the
    rest as :func:`infer_format` says), read by the same reader the pipeline's judgments stage uses."""
    return read_qrels_checked(path, format).table


def read_qrels_checked(path: str | Path, format: str | None = None) -> Checked:
    """:func:`read_qrels`, with the check's pair keys: :func:`~releval.measurement.metrics.evaluate` skips the check."""
    source = str(path)
    format = format or qrels_format_of(Path(path))
    if format == "beir":
        return checked_qrels(read_judgments(path, "beir"), source=source)  # the judgments stage's reader
    frame, lines = _read_table(Path(path), format, TREC_QRELS_LINE, value_field="grade")
    return checked_qrels(frame, source=source, lines=lines)


def qrels_format_of(path: Path) -> str:
    """``beir`` for a file whose first line is BEIR's qrels header, else :func:`infer_format`."""
    if path.is_file() and path.suffix.lower() != ".gz":
        try:
            with open(path, "rb") as fh:
                first = fh.readline(len(BEIR_QRELS_HEADER) + 8).removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n")
        except OSError:
            first = b""
        if first == BEIR_QRELS_HEADER:
            return "beir"
    return infer_format(path)


def read_run(path: str | Path, format: str | None = None) -> pl.DataFrame:
    """A run as ``query_id, doc_id, score`` (scores are finite numbers)."""
    return read_run_checked(path, format).table


def read_run_checked(path: str | Path, format: str | None = None) -> Checked:
    """:func:`read_run`, with the check's pair keys: :func:`~releval.measurement.metrics.evaluate` skips the check."""
    frame, lines = _read_table(Path(path), format, TREC_RUN_LINE, value_field="score")
    return checked_run(frame, source=str(path), lines=lines)


def write_trec_run(path: str | Path, run: pl.DataFrame, tag: str = "releval") -> None:
    """Write ``run`` as a TREC run file, atomically, ranked by score then doc_id ascending."""
    run = check_run(run)
    if not tag or any(character.isspace() for character in tag):
        raise InputError(f"run tag must be one word, got {tag!r}", file=str(path), field="tag")
    _reject_whitespace_in_ids(run, str(path))
    ranked = run.sort(["query_id", "score", "doc_id"], descending=[False, True, False])
    lines = ranked.select(
        pl.concat_str(
            pl.col("query_id"),
            pl.lit("Q0"),
            pl.col("doc_id"),
            pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.String),
            pl.col("score").cast(pl.String),
            pl.lit(tag),
            separator=" ",
        )
    )
    with io.atomic_path(path) as temporary:
        lines.write_csv(temporary, include_header=False, quote_style="never")


def _reject_whitespace_in_ids(run: pl.DataFrame, source: str) -> None:
    for field in ("query_id", "doc_id"):
        bad = np.flatnonzero(run[field].str.contains(r"\s|^$").to_numpy())
        if bad.size:
            raise InputError(
                f"{run[field][int(bad[0])]!r} cannot be written as one TREC field",
                file=source,
                line=int(bad[0]) + 1,
                field=field,
            )


def _table(value_field: str) -> Table:
    """The table a file of ``score`` (a run) or ``grade`` (qrels) values is read into."""
    return DOC_RUN if value_field == "score" else QRELS


def _value_dtype(value_field: str) -> pl.DataType:
    return _table(value_field).schema[value_field]


def _read_table(
    path: Path, format: str | None, columns: tuple[str, ...], value_field: str
) -> tuple[pl.DataFrame, np.ndarray | None]:
    format = format or infer_format(path)
    if format == "trec":
        return _read_trec(path, columns, value_field)
    if format == "jsonl":
        return _read_jsonl(path, value_field)
    if format == "parquet":
        return _read_parquet(path), None
    known = QRELS_FORMATS if value_field == "grade" else FORMATS
    raise InputError(f"unknown format {format!r}; known: {', '.join(known)}", file=str(path), field="format")


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from exc
    if path.suffix.lower() == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputError(f"not a readable gzip file: {exc}", file=str(path), field="encoding") from exc
    try:
        return data.decode("utf-8-sig")  # a BOM would otherwise stick to the first query id
    except UnicodeDecodeError as exc:
        bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
        raise InputError(
            f"not UTF-8 text (byte 0x{data[exc.start + bom]:02x})",
            file=str(path),
            line=data.count(b"\n", 0, exc.start + bom) + 1,
            field="encoding",
        ) from exc


def _read_trec(path: Path, columns: tuple[str, ...], value_field: str) -> tuple[pl.DataFrame, np.ndarray | None]:
    fast = _read_plain_trec(path, columns, value_field)
    return fast if fast is not None else _read_trec_tokens(path, columns, value_field)


def _read_plain_trec(path: Path, columns: tuple[str, ...], value_field: str) -> tuple[pl.DataFrame, None] | None:
    """The common case, read by polars' CSV reader: ASCII, single spaces, LF line ends, no blank line.

    Anything else (or any field that does not parse) returns None, and the token reader below
    reads the file again and names the problem; so every message stays the same. Row i is line
    i + 1 here, which is what a missing line array means to the checks.
    """
    if path.suffix.lower() == ".gz":
        return None
    # Only printable ASCII, spaces and LF; empty fields (doubled, leading or trailing spaces) and
    # blank lines surface below as nulls, ragged rows or a row count short of the line count.
    lines = _plain_lines(path)
    if lines is None:
        return None
    value_type = _value_dtype(value_field)
    types = {name: pl.String for name in columns}
    if value_field == "score":
        # Scores are parsed as they are read: polars' CSV reader gives the bits that casting the text gives and
        # refuses what casting leaves null (the token reader then names it); casting 5 million texts costs more.
        types[value_field] = value_type
        # A rank that is not a whole number (never used) sends the file to the token reader; as text it cost more.
        types["rank"] = pl.Int64
    try:
        table = pl.read_csv(
            path,  # memory-mapped by polars: no copy of the file in Python
            separator=" ",
            has_header=False,
            new_columns=list(columns),
            schema_overrides=types,
            quote_char=None,
            truncate_ragged_lines=False,
        )
    except Exception:  # polars raises several types for a malformed line; the token reader names it
        return None
    if table.width != len(columns) or table.height != lines or table.null_count().sum_horizontal().item():
        return None
    frame = table.select("query_id", "doc_id", pl.col(value_field).cast(value_type, strict=False))
    if frame[value_field].null_count():
        return None
    if value_field == "grade" and not table[value_field].str.contains(r"^[+-]?\d+$").all():
        return None  # Int64 casting of "1.0" differs from the token reader; let it decide
    return frame, None


def _plain_lines(path: Path, chunk: int = 1 << 18) -> int | None:
    """The number of lines of a file of printable ASCII and LFs that ends with an LF; None for any other file.

    One pass over the mapped file, a quarter of a MiB at a time (it stays in the processor's cache): no byte
    above 0x7E, and every byte below 0x20 an LF, counted. numpy's vector loops do it in half the time of
    deleting printable bytes with ``bytes.translate``, and a third of reading the file into Python first.
    """
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data[-1:] != b"\n":
                return None
            lines, below = 0, np.empty(chunk, dtype=bool)
            view = np.frombuffer(data, dtype=np.uint8)
            try:
                for start in range(0, len(view), chunk):
                    part = view[start : start + chunk]
                    flags = below[: len(part)]
                    controls = np.count_nonzero(np.less(part, 0x20, out=flags))
                    feeds = np.count_nonzero(np.equal(part, 0x0A, out=flags))
                    if controls != feeds or part.max() > 0x7E:
                        return None
                    lines += feeds
            finally:
                del view, part  # the map closes only once no array looks into it
    except (OSError, ValueError):  # unreadable, or empty (which cannot be mapped)
        return None
    return lines


def _read_trec_tokens(path: Path, columns: tuple[str, ...], value_field: str) -> tuple[pl.DataFrame, np.ndarray]:
    source = str(path)
    tokens = (
        pl.DataFrame({"text": _read_text(path).split("\n")})
        .with_row_index("line", offset=1)
        .select("line", pl.col("text").str.extract_all(r"\S+").alias("tokens"))
        .filter(pl.col("tokens").list.len() > 0)
    )
    _reject_wrong_column_counts(tokens, columns, source)
    fields = tokens.select(
        "line",
        *[pl.col("tokens").list.get(columns.index(name)).alias(name) for name in ("query_id", "doc_id", value_field)],
    )
    value_type = _value_dtype(value_field)
    values = fields[value_field].cast(value_type, strict=False)
    unparsed = np.flatnonzero(values.is_null().to_numpy())
    if unparsed.size:
        row = int(unparsed[0])
        expected = "a number" if value_field == "score" else "a whole number"
        raise InputError(
            f"expected {expected}, got {fields[value_field][row]!r}",
            file=source,
            line=int(fields["line"][row]),
            field=value_field,
        )
    frame = pl.DataFrame({"query_id": fields["query_id"], "doc_id": fields["doc_id"], value_field: values})
    return frame, fields["line"].to_numpy()


def _reject_wrong_column_counts(tokens: pl.DataFrame, columns: tuple[str, ...], source: str) -> None:
    counts = tokens["tokens"].list.len().to_numpy()
    wrong = np.flatnonzero(counts != len(columns))
    if wrong.size == 0:
        return
    row = int(wrong[0])
    found = int(counts[row])
    field = columns[found] if found < len(columns) else columns[-1]
    raise InputError(
        f"expected {len(columns)} whitespace-separated columns ({' '.join(columns)}), found {found}",
        file=source,
        line=int(tokens["line"][row]),
        field=field,
    )


def _read_jsonl(path: Path, value_field: str) -> tuple[pl.DataFrame, np.ndarray]:
    source = str(path)
    rows: dict[str, list[Any]] = {"query_id": [], "doc_id": [], value_field: []}
    lines: list[int] = []
    for number, text in enumerate(_read_text(path).split("\n"), start=1):
        if not text.strip():
            continue
        record = _json_object(text, source, number)
        rows["query_id"].append(_json_id(record, "query_id", source, number))
        rows["doc_id"].append(_json_id(record, "doc_id", source, number))
        rows[value_field].append(_json_value(record, value_field, source, number))
        lines.append(number)
    return pl.DataFrame(rows, schema=_table(value_field).schema), np.array(lines, dtype=np.int64)


def _json_object(text: str, source: str, line: int) -> dict[str, Any]:
    record = parse_json_line(text, source, line)  # the shared reader: malformed, too deep, lone surrogates
    if not isinstance(record, dict):
        raise InputError(f"expected a JSON object, got {type(record).__name__}", file=source, line=line)
    return record


def _json_id(record: dict[str, Any], field: str, source: str, line: int) -> str:
    value = record.get(field)
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    problem = "missing" if value is None else f"expected a non-empty string, got {value!r}"
    raise InputError(problem, file=source, line=line, field=field)


def _json_value(record: dict[str, Any], field: str, source: str, line: int) -> float | int:
    value = record.get(field)
    if field == "grade" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if field == "score" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    expected = "a number" if field == "score" else "a whole number"
    problem = "missing" if value is None else f"expected {expected}, got {value!r}"
    raise InputError(problem, file=source, line=line, field=field)


def _read_parquet(path: Path) -> pl.DataFrame:
    try:
        return pl.read_parquet(path)
    except FileNotFoundError as exc:
        raise InputError("cannot read: no such file", file=str(path)) from exc
    except Exception as exc:  # polars raises several unrelated types for a damaged file
        raise InputError(f"not a readable parquet file: {exc}", file=str(path)) from exc
