"""The sealed holdout: which queries are scored, and a committed log of every time it is opened.

Queries may carry a ``split`` column, ``dev`` (tune on it) or ``holdout`` (report on it, never
tune); without the column every query is ``dev``. Scoring sees the dev queries unless a caller
asks for the holdout explicitly, and every such opening is appended to an access log
(``reports/holdout_access.jsonl``, committed to git) that the evaluation card reports.

The log is append-only: :func:`append_opening` opens the file in append mode and writes one
complete JSON line; it never reads-and-rewrites, so an earlier line cannot change. A log whose
last line is incomplete (a writer killed mid-line, or a hand edit) is refused rather than
extended, and :func:`check_append_only` tells whether one version of the log extends another
(e.g. the committed one), which is how a rewritten history is caught.

Each log line::

    {"when": "2026-11-30T12:00:00Z", "who": "Ada Lovelace", "split": "holdout",
     "configs": ["minilm/c256", "bm25/c256"], "command": "python stages/score.py --split holdout"}
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from releval.errors import InputError
from releval.provenance import revisions
from releval import paths

SPLITS = ("dev", "holdout")
# What a scoring run may ask for: the dev queries (default), the holdout alone, or both.
SCORE_SPLITS = ("dev", "holdout", "all")
LOG_FIELDS = ("when", "who", "split", "configs", "command")
DEFAULT_LOG = Path(paths.HOLDOUT_LOG)
# Set by `releval holdout` to the entry it has just logged, so the scoring step it runs does
# not log the same opening twice. Honoured only when that entry is the log's last line.
OPENING_ENV = "RELEVAL_HOLDOUT_OPENING"


# --------------------------------------------------------------------------- which queries


def query_splits(queries: pl.DataFrame, *, source: str = "queries") -> pl.DataFrame:
    """``query_id, split`` for every query; ``dev`` for all when there is no ``split`` column.

    A missing or unknown split is refused, naming the query: a holdout query with a lost label
    must not silently become a dev query.
    """
    if "query_id" not in queries.columns:
        raise InputError("missing column", file=source, field="query_id")
    ids = queries["query_id"].cast(pl.Utf8)
    if "split" not in queries.columns:
        return pl.DataFrame({"query_id": ids, "split": pl.Series(["dev"] * len(ids), dtype=pl.Utf8)})
    split = queries["split"].cast(pl.Utf8)
    bad = ~split.is_in(list(SPLITS)) | split.is_null()
    if bad.any():
        rows = [i for i, flag in enumerate(bad.to_list()) if flag]
        shown = ", ".join(f"{ids[i]} ({split[i]!r})" for i in rows[:5])
        raise InputError(
            f"{len(rows)} queries have no valid split (dev or holdout): {shown}"
            + (f", … ({len(rows) - 5} more)" if len(rows) > 5 else ""),
            file=source,
            field="split",
        )
    return pl.DataFrame({"query_id": ids, "split": split})


def split_counts(queries: pl.DataFrame, *, source: str = "queries") -> dict[str, int]:
    """Queries per split, every split named (0 when absent)."""
    splits = query_splits(queries, source=source)["split"].to_list()
    return {name: splits.count(name) for name in SPLITS}


def has_split_column(queries: pl.DataFrame) -> bool:
    return "split" in queries.columns


def select_queries(queries: pl.DataFrame, split: str = "dev", *, source: str = "queries") -> pl.DataFrame:
    """The rows of ``queries`` that a scoring run over ``split`` sees (dev by default).

    ``split`` is ``dev``, ``holdout`` or ``all``; anything but ``dev`` opens the holdout and the
    caller must record it with :func:`append_opening`.
    """
    if split not in SCORE_SPLITS:
        raise InputError(f"must be one of {', '.join(SCORE_SPLITS)}, got {split!r}", field="split")
    labels = query_splits(queries, source=source)["split"]
    if split == "all":
        return queries
    return queries.filter(labels == split)


def add_split_argument(parser) -> None:
    """``--split`` for a stage that reads queries: dev (what DVC runs) unless the holdout is opened."""
    parser.add_argument(
        "--split",
        choices=SCORE_SPLITS,
        default="dev",
        help="dev (default, what DVC runs); holdout or all only from `releval holdout`, which logs the opening first",
    )


def opens_holdout(split: str) -> bool:
    return split in ("holdout", "all")


def read_queries_table(path: str | os.PathLike) -> pl.DataFrame:
    """The queries stage's table (query_id, text, split, ...); missing means the pipeline has not run."""
    path = Path(path)
    if not path.is_file():
        raise InputError("missing; run `dvc repro` (the queries stage writes it)", file=str(path))
    return pl.read_parquet(path)


def contract_split(queries: pl.DataFrame, split: str = "dev") -> str:
    """The contract's ``split`` term for a scoring run over ``split``.

    As stages/score.py writes it: a default run over a query set without a split column scored
    every query, so its term is ``all``; otherwise the split asked for.
    """
    if split not in SCORE_SPLITS:
        raise InputError(f"must be one of {', '.join(SCORE_SPLITS)}, got {split!r}", field="split")
    if split == "dev" and not has_split_column(queries):
        return "all"
    return split


def scored_queries(queries: pl.DataFrame, contract: Mapping[str, Any], *, source: str = "queries") -> pl.DataFrame:
    """The queries a scoring run recorded with ``contract`` scored (its ``split`` term).

    Inverse of :func:`contract_split`: ``all`` over a set without a split column is every
    query; ``dev`` (or ``all`` with a split column, the holdout opened) as named.
    """
    split = str(contract.get("split", "all"))
    if split == "all" and not has_split_column(queries):
        split = "dev"
    return select_queries(queries, split, source=source)


def restrict(frame: pl.DataFrame, query_ids: Iterable[str]) -> pl.DataFrame:
    """Rows of a run or qrels table whose query is among ``query_ids``."""
    ids = pl.Series(list(query_ids), dtype=pl.Utf8)
    return frame.filter(pl.col("query_id").cast(pl.Utf8).is_in(ids.implode()))


def scoring_selection(
    queries: pl.DataFrame,
    split: str,
    *,
    configs: Sequence[str],
    command: str | Sequence[str],
    log_path: str | os.PathLike = DEFAULT_LOG,
    source: str = "queries",
    who: str | None = None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """For stages/score.py: the queries a run over ``split`` scores, and its contract terms.

    Opening the holdout (``holdout`` or ``all`` over a query set with holdout queries) appends
    an entry to the access log *before* anything is scored, so an interrupted run is still on
    record; a query set without holdout queries has nothing to open and logs nothing. Terms:
    ``split``, ``queries`` (how many are scored) and ``holdout_queries_sealed`` (holdout queries
    left unscored).
    """
    scored = select_queries(queries, split, source=source)
    opened = opens_holdout(split) and split_counts(queries, source=source)["holdout"] > 0
    if opened and not already_logged(log_path, os.environ.get(OPENING_ENV)):
        append_opening(log_path, opening(configs, command, split=split, who=who))
    terms = {
        "split": contract_split(queries, split),
        "queries": scored.height,
        "holdout_queries_sealed": 0 if opened else split_counts(queries, source=source)["holdout"],
    }
    return scored, terms


# --------------------------------------------------------------------------- the access log


def who_opens(cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> str:
    """``git config user.name``, else $USER (or $LOGNAME), else ``unknown``."""
    env = dict(os.environ if env is None else env)
    return revisions.user_name(cwd, env) or env.get("USER") or env.get("LOGNAME") or "unknown"


def already_logged(path: str | os.PathLike, entry_json: str | None) -> bool:
    """Whether ``entry_json`` (an opening as JSON) is the last line of the log at ``path``."""
    if not entry_json:
        return False
    entries = read_log(path)
    return bool(entries) and entries[-1] == json.loads(entry_json)


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def opening(
    configs: Sequence[str],
    command: str | Sequence[str],
    *,
    split: str = "holdout",
    who: str | None = None,
    when: str | None = None,
) -> dict[str, Any]:
    """One log entry. ``command`` is the command line (a list is joined with spaces)."""
    if not opens_holdout(split):
        raise InputError(f"a {split!r} run does not open the holdout; nothing to log", field="split")
    if isinstance(command, (list, tuple)):
        command = " ".join(str(part) for part in command)
    entry = {
        "when": when or utc_now(),
        "who": who or who_opens(),
        "split": split,
        "configs": sorted(str(c) for c in configs),
        "command": str(command),
    }
    _check_entry(entry, "<opening>", None)
    return entry


def append_opening(path: str | os.PathLike, entry: Mapping[str, Any]) -> None:
    """Append one entry to the log as a single line, never touching the lines before it.

    The file is opened in append mode (created when absent) and fsynced. A log whose last line
    is incomplete is refused: appending after it would fuse two records.
    """
    path = Path(path)
    _check_entry(dict(entry), str(path), None)
    line = (json.dumps(dict(entry), sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                raise InputError(
                    "the last line is incomplete (no newline at the end); the log is not "
                    "appended to until it is repaired from git",
                    file=str(path),
                    line=len(path.read_bytes().splitlines()),
                )
    if not path.exists() or not path.stat().st_size:
        line = LOG_HEADER_LINE.encode("utf-8") + line
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(f"short write to {path}: {written} of {len(line)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


# The log's first line: it names the file, and keeps a never-opened log from being empty (DVC
# warns "is empty" about an empty dependency on every repro).
LOG_HEADER = {"log": "releval holdout openings", "format": 1}
LOG_HEADER_LINE = json.dumps(LOG_HEADER, sort_keys=True) + "\n"


def parse_log(data: bytes | str, source: str = str(DEFAULT_LOG)) -> list[dict[str, Any]]:
    """Entries of a log's text (the header line left out); a bad line is an error naming its line."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc.msg}", file=source, line=number) from None
        if not isinstance(entry, dict):
            raise InputError("expected a JSON object", file=source, line=number)
        if number == 1 and entry == LOG_HEADER:
            continue
        _check_entry(entry, source, number)
        entries.append(entry)
    return entries


def read_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Entries of the log at ``path``; none when the file does not exist (never opened)."""
    path = Path(path)
    if not path.exists():
        return []
    return parse_log(path.read_bytes(), str(path))


def check_append_only(before: bytes, after: bytes, source: str = str(DEFAULT_LOG)) -> None:
    """Refuse unless ``after`` is ``before`` with lines added at the end (earlier lines intact)."""
    if not after.startswith(before):
        old, new = before.splitlines(), after.splitlines()
        line = next((i + 1 for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)) + 1)
        raise InputError(
            "earlier lines of the holdout access log were changed or removed; the log is append-only",
            file=source,
            line=line,
        )


def summary(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the evaluation card reports: how often the holdout was opened and the last time."""
    if not entries:
        return {"openings": 0, "last_opening": None}
    last = max(entries, key=lambda e: e["when"])
    return {"openings": len(entries), "last_opening": dict(last)}


def _check_entry(entry: Mapping[str, Any], source: str, line: int | None) -> None:
    missing = [f for f in LOG_FIELDS if f not in entry]
    if missing:
        raise InputError(f"missing field(s) {', '.join(missing)}", file=source, line=line, field=missing[0])
    unknown = sorted(set(entry) - set(LOG_FIELDS))
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(unknown)}", file=source, line=line, field=unknown[0])
    for field in ("when", "who", "command"):
        if not isinstance(entry[field], str) or not entry[field].strip():
            raise InputError("must be a non-empty string", file=source, line=line, field=field)
    try:
        when = _dt.datetime.fromisoformat(entry["when"].replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"not an ISO date-time: {entry['when']!r}", file=source, line=line, field="when") from None
    if when.tzinfo is None or when.utcoffset() != _dt.timedelta(0):
        raise InputError(f"must be UTC (end in Z), got {entry['when']!r}", file=source, line=line, field="when")
    if entry["split"] not in ("holdout", "all"):
        raise InputError(f"must be holdout or all, got {entry['split']!r}", file=source, line=line, field="split")
    configs = entry["configs"]
    if not isinstance(configs, list) or not all(isinstance(c, str) and c for c in configs):
        raise InputError("must be a list of configuration ids", file=source, line=line, field="configs")
