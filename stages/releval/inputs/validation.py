"""Checks of a dataset on disk: queries, judgment sets, a dataset directory, or a filled pool.

:func:`validate_path` recognises what a path is (see `releval validate`) and returns every
problem found and a one-line summary. It reads only; nothing on disk is written or changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from releval.config import load_params
from releval.errors import InputError, InputErrors
from releval.inputs.corpus import (
    QUERIES_NAME,
    corpus_format_of,
    dataset_root_of,
    find_corpus_source,
    find_queries,
    read_docs,
)
from releval.inputs.schemas import check_references, validate_judgment_records, validate_judgments, validate_queries
from releval.judging import judgments as jmod
from releval.judging.pool import read_filled_pool


# --------------------------------------------------------------------------- discovery


def is_set_dir(path: Path) -> bool:
    return path.is_dir() and ((path / jmod.MANIFEST_NAME).exists() or (path / jmod.JUDGMENTS_NAME).exists())


def is_dataset_dir(path: Path) -> bool:
    return path.is_dir() and ((path / QUERIES_NAME).is_file() or (path / "judgments").is_dir())


# --------------------------------------------------------------------------- reporting

SHOWN_LINES = 5  # line numbers listed for a message repeated on many lines


def grouped_problems(problems: list[InputError]) -> list[str]:
    """The problems as printed lines, in file and line order; one message repeated in one file
    (same field, same words) is one line with its count and first lines:
    ``FILE: field 'annotator': missing (62 rows: lines 3, 5, 9, 12, 15, …)``."""
    groups: dict[tuple[str, str, str], list[InputError]] = {}
    for problem in sorted(problems, key=lambda e: (e.file or "", e.line or 0)):
        groups.setdefault((problem.file or "", problem.field or "", problem.detail), []).append(problem)
    lines = []
    for (file, field, detail), members in groups.items():
        if len(members) == 1:
            lines.append(str(members[0]))
            continue
        where = InputError(detail, file=file or None, field=field or None)
        numbers = [m.line for m in members if m.line is not None]
        if numbers:
            shown = ", ".join(str(n) for n in numbers[:SHOWN_LINES]) + (", …" if len(numbers) > SHOWN_LINES else "")
            lines.append(f"{where} ({len(members)} rows: lines {shown})")
        else:
            lines.append(f"{where} ({len(members)} times)")
    return lines


# --------------------------------------------------------------------------- checks


class _Context:
    """Queries and corpus, read once, with their own problems collected."""

    def __init__(self, queries: Path | None, corpus: Path | None, corpus_format: str | None):
        self.problems: list[InputError] = []
        self.notes: list[str] = []
        self.queries_path, self.corpus_path = queries, corpus
        self.queries: pl.DataFrame | None = None
        self.docs: pl.DataFrame | None = None
        if queries is not None:
            frame, errors = validate_queries(queries)
            self.problems += errors
            self.queries = frame
        if corpus is not None:
            try:
                self.docs = read_docs(corpus, corpus_format or corpus_format_of(corpus))
            except InputErrors as exc:
                self.problems += exc.errors
            except InputError as exc:
                self.problems.append(exc)

    @property
    def query_ids(self) -> list[str] | None:
        if self.queries is None:
            return None
        return [q for q in self.queries["query_id"].to_list() if q is not None]

    @property
    def doc_lengths(self) -> dict[str, int] | None:
        return None if self.docs is None else jmod.doc_lengths(self.docs)


def dataset_corpus(
    root: Path | None, corpus: Path | None, corpus_format: str | None, params_path: Path = Path("params.yaml")
) -> tuple[Path | None, str | None]:
    """The corpus to check ids against, and its format: the one given, else the one the ingest
    stage reads (params.yaml's ``dataset.corpus``) when that dataset lives in ``root``, else the
    one found in ``root`` (:func:`~releval.inputs.corpus.find_corpus_source`)."""
    if corpus is not None:
        return corpus, corpus_format
    if root is None:
        return None, None
    return configured_corpus(root, params_path) or find_corpus_source(root) or (None, None)


def configured_corpus(root: Path, params_path: Path = Path("params.yaml")) -> tuple[Path, str] | None:
    """params.yaml's ``dataset.corpus`` (path, format) when its corpus or queries lie in ``root``."""
    try:
        dataset = load_params(params_path).get("dataset")
    except (InputError, OSError, ValueError):
        return None
    if not isinstance(dataset, dict):
        return None
    corpus = dataset.get("corpus") if isinstance(dataset.get("corpus"), dict) else {}
    queries = dataset.get("queries") if isinstance(dataset.get("queries"), dict) else {}
    if not corpus.get("path") or not corpus.get("format"):
        return None
    inside = [Path(str(p)) for p in (corpus.get("path"), queries.get("path")) if p]
    if not any(_is_within(p, root) for p in inside):
        return None
    return Path(str(corpus["path"])), str(corpus["format"])


def _is_within(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _check_set(directory: Path, context: _Context) -> tuple[jmod.JudgmentSet | None, list[InputError]]:
    return jmod.validate_version(directory, query_ids=context.query_ids, doc_lengths=context.doc_lengths)


def _set_summary(judgment_set: jmod.JudgmentSet | None, directory: Path) -> str:
    if judgment_set is None:
        return f"judgment set {directory.name}"
    frame = judgment_set.judgments
    return (
        f"judgment set {judgment_set.version}: {frame.height} judgments, "
        f"{frame['query_id'].n_unique()} queries, {len(judgment_set.manifest.annotators)} annotator(s)"
    )


def _checked_against(context: _Context) -> str:
    parts = []
    if context.queries_path is not None:
        parts.append(f"queries {context.queries_path}")
    if context.corpus_path is not None:
        parts.append(f"corpus {context.corpus_path}")
    return f" (ids checked against {' and '.join(parts)})" if parts else " (ids not checked: no queries or corpus)"


def validate_sets(directories: list[Path], context: _Context) -> tuple[list[InputError], list[str]]:
    problems: list[InputError] = []
    summaries: list[str] = []
    for directory in directories:
        judgment_set, errors = _check_set(directory, context)
        problems += errors
        summaries.append(_set_summary(judgment_set, directory))
    for directory in directories:
        names = sorted(d.name for d in directory.parent.iterdir() if is_set_dir(d))
        parent = _declared_parent(directory / jmod.MANIFEST_NAME)
        if isinstance(parent, str) and parent not in names:
            manifest_path = directory / jmod.MANIFEST_NAME
            problems.append(
                InputError(
                    f"parent version {parent!r} not found next to this set (sets here: {', '.join(names)})",
                    file=str(manifest_path),
                    line=jmod.manifest_lines(manifest_path).get("parent", 1),
                    field="parent",
                )
            )
    return problems, summaries


def _declared_parent(manifest_path: Path) -> object:
    """The manifest's ``parent`` value even when other keys are wrong (None when unreadable)."""
    import yaml

    try:
        data = yaml.safe_load(manifest_path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return data.get("parent") if isinstance(data, dict) else None


def validate_pool_file(
    path: Path, context: _Context, judgment_set_dir: str | None, annotator: str | None = None
) -> tuple[list[InputError], str]:
    problems: list[InputError] = []
    scale, prior = None, None
    if judgment_set_dir is not None:
        judgment_set, errors = _check_set(Path(judgment_set_dir), _Context(None, None, "jsonl"))
        problems += errors
        if judgment_set is not None:
            scale, prior = judgment_set.manifest.scale, judgment_set.judgments
    records, ungraded, errors = read_filled_pool(path, annotator)
    problems += errors
    frame, errors = validate_judgment_records(
        records,
        str(path),
        scale,
        None,
        prior=prior,
        prior_source=str(Path(judgment_set_dir or ".") / jmod.JUDGMENTS_NAME),
    )
    problems += errors
    problems += check_references(frame, str(path), query_ids=context.query_ids, doc_lengths=context.doc_lengths)
    scale_note = "" if scale is not None else " (no --judgments: grades checked as integers >= 0 only)"
    return problems, f"filled pool {path}: {len(records)} graded rows, {ungraded} ungraded{scale_note}"


def _first_record(path: Path) -> dict | None:
    """The first non-blank line of a JSONL file as an object; None when it is not one."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            for line in fh:
                if line.strip():
                    first = json.loads(line)
                    return first if isinstance(first, dict) else None
    except (OSError, ValueError):
        return None
    return None


def _looks_like_pool(path: Path) -> bool:
    if path.suffix.lower() == ".csv":
        return True
    first = _first_record(path)
    return first is not None and "snippet" in first


def _looks_like_judgments(path: Path) -> bool:
    if path.name == jmod.JUDGMENTS_NAME:
        return True
    first = _first_record(path)
    return first is not None and "doc_id" in first and "grade" in first


def validate_path(
    path: Path,
    *,
    corpus: str | None = None,
    corpus_format: str | None = None,
    queries: str | None = None,
    judgment_set: str | None = None,
    annotator: str | None = None,
) -> tuple[list[InputError], str]:
    """Every problem under ``path`` and a one-line summary. Reads only; writes nothing.

    ``corpus_format`` None: inferred from the corpus path (:func:`~releval.inputs.corpus.corpus_format_of`).
    """
    corpus_path = Path(corpus) if corpus else None
    queries_path = Path(queries) if queries else None
    if not path.exists():
        return [InputError("no such file or directory", file=str(path), field="path")], ""
    if is_set_dir(path):
        root = dataset_root_of(path)
        context = _Context(queries_path or find_queries(root), *dataset_corpus(root, corpus_path, corpus_format))
        problems, summaries = validate_sets([path], context)
        return context.problems + problems, summaries[0] + _checked_against(context)
    if is_dataset_dir(path):
        context = _Context(queries_path or find_queries(path), *dataset_corpus(path, corpus_path, corpus_format))
        set_dirs = (
            sorted(p for p in (path / "judgments").iterdir() if is_set_dir(p)) if (path / "judgments").is_dir() else []
        )
        problems, summaries = validate_sets(set_dirs, context)
        parts = []
        if context.queries is not None:
            splits = context.queries["split"].value_counts().sort("split").iter_rows()
            parts.append(f"{context.queries.height} queries ({', '.join(f'{n} {s}' for s, n in splits if s)})")
        if context.docs is not None:
            parts.append(f"{context.docs.height} documents in {context.corpus_path}")
        elif context.corpus_path is None:
            parts.append("no corpus (doc ids not checked; give --corpus)")
        parts.append(f"{len(set_dirs)} judgment set(s)" + (f": {'; '.join(summaries)}" if summaries else ""))
        return context.problems + problems, f"dataset {path}: " + ", ".join(parts)
    if path.is_dir():
        set_dirs = sorted(p for p in path.iterdir() if is_set_dir(p))
        if not set_dirs:
            return [
                InputError(
                    "not a judgment set, a dataset or a directory of judgment sets: no manifest.yaml, "
                    "judgments.jsonl, queries.jsonl or judgments/ here",
                    file=str(path),
                    field="path",
                )
            ], ""
        root = path.resolve().parent if path.resolve().name == "judgments" else None
        context = _Context(queries_path or find_queries(root), *dataset_corpus(root, corpus_path, corpus_format))
        problems, summaries = validate_sets(set_dirs, context)
        return context.problems + problems, "; ".join(summaries) + _checked_against(context)
    context = _Context(queries_path, corpus_path, corpus_format)
    if _looks_like_pool(path):
        problems, summary = validate_pool_file(path, context, judgment_set, annotator)
        return context.problems + problems, summary
    if _looks_like_judgments(path):
        if (path.parent / jmod.MANIFEST_NAME).exists():
            return validate_path(path.parent, corpus=corpus, corpus_format=corpus_format, queries=queries)
        frame, problems = validate_judgments(path)
        problems += check_references(frame, str(path), query_ids=context.query_ids, doc_lengths=context.doc_lengths)
        return context.problems + problems, (
            f"judgments {path}: {frame.height} judgments (no manifest: grades checked as integers >= 0 only)"
        )
    frame, problems = validate_queries(path)
    summary = f"queries {path}: {frame.height} queries"
    if frame.height:
        counts = dict(frame["split"].value_counts().iter_rows())
        summary += f" ({counts.get('dev', 0)} dev, {counts.get('holdout', 0)} holdout)"
    return context.problems + problems, summary
