"""Checks of a dataset on disk: queries, judgment sets, a dataset directory, or a filled pool.

:func:`validate_path` recognises what a path is (see `releval validate`) and returns every
problem found and a one-line summary. Queries and corpus come from the configuration
(:mod:`releval.inputs.datasets`: each judgment set is checked against its own dataset) unless
flags name them. It reads only; nothing on disk is written or changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from releval.errors import InputError, InputErrors
from releval.inputs.corpus import corpus_format_of, read_docs, read_queries
from releval.inputs.datasets import (
    Dataset,
    active_dataset,
    dataset_named,
    dataset_of_set,
    known_datasets,
    manifest_fields,
)
from releval.inputs.schemas import (
    check_references,
    parse_json_line,
    validate_judgment_records,
    validate_judgments,
    validate_queries,
)
from releval.judging import judgments as jmod
from releval.judging.pool import read_filled_pool


# --------------------------------------------------------------------------- discovery


def is_set_dir(path: Path) -> bool:
    return path.is_dir() and ((path / jmod.MANIFEST_NAME).exists() or (path / jmod.JUDGMENTS_NAME).exists())


SET_SEARCH_DEPTH = 3  # how far below a folder `validate FOLDER` looks for judgment sets


def sets_below(folder: Path, depth: int = SET_SEARCH_DEPTH) -> list[Path]:
    """Judgment-set directories in ``folder`` and up to ``depth`` levels below (hidden and session folders skipped)."""
    found = []
    for current, dirs, _ in os.walk(folder):
        level = len(Path(current).relative_to(folder).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.endswith(".session"))
        if level >= depth:
            dirs[:] = []
        if level > 0 and is_set_dir(Path(current)):
            found.append(Path(current))
    return sorted(found)


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

    def __init__(
        self,
        queries: Path | None,
        corpus: Path | None,
        corpus_format: str | None,
        queries_format: str = "releval",
        dataset: Dataset | None = None,
    ):
        self.problems: list[InputError] = []
        self.queries_path, self.corpus_path = queries, corpus
        self.dataset = dataset
        self.queries: pl.DataFrame | None = None
        self.docs: pl.DataFrame | None = None
        if queries is not None:
            if queries_format == "releval":
                frame, errors = validate_queries(queries)
                self.problems += errors
                self.queries = frame
            else:
                self.queries = _collect(self.problems, lambda: read_queries(queries, queries_format))
        if corpus is not None:
            self.docs = _collect(self.problems, lambda: read_docs(corpus, corpus_format or corpus_format_of(corpus)))

    @classmethod
    def of(cls, dataset: Dataset) -> _Context:
        return cls(dataset.queries, dataset.corpus, dataset.corpus_format, dataset.queries_format, dataset)

    @property
    def query_ids(self) -> list[str] | None:
        if self.queries is None:
            return None
        return [q for q in self.queries["query_id"].to_list() if q is not None]

    @property
    def doc_lengths(self) -> dict[str, int] | None:
        return None if self.docs is None else jmod.doc_lengths(self.docs)

    def checked_against(self) -> str:
        parts = []
        if self.queries_path is not None:
            parts.append(f"queries {self.queries_path}")
        if self.corpus_path is not None:
            parts.append(f"corpus {self.corpus_path}")
        of = f"dataset {self.dataset.name!r}: " if self.dataset is not None else ""
        return f" (ids checked against {of}{' and '.join(parts)})" if parts else ""


def _collect(problems: list[InputError], read):
    try:
        return read()
    except InputErrors as exc:
        problems += exc.errors
    except InputError as exc:
        problems.append(exc)
    return None


# A set whose ids are mostly unknown to the queries and corpus it is checked against was made for
# another corpus: one line saying so, instead of every row.
FOREIGN_SHARE = 0.5
FOREIGN_MIN_ROWS = 10


def _is_unknown_id(problem: InputError) -> bool:
    return problem.field in ("query_id", "doc_id") and problem.detail.startswith(("unknown query", "unknown document"))


def _foreign_set_line(directory: Path, problems: list[InputError], context: _Context) -> InputError | None:
    """One line for a set checked against a corpus it was not made for: its manifest names another
    dataset, or most of its rows name unknown ids."""
    rows = {e.line for e in problems if _is_unknown_id(e)}
    if not rows:
        return None
    judgments_path = directory / jmod.JUDGMENTS_NAME
    declared = manifest_fields(directory).get("dataset")
    declared = declared if isinstance(declared, str) and declared else None
    checked_name = context.dataset.name if context.dataset is not None else None
    try:
        total = sum(1 for line in judgments_path.open("rb") if line.strip())
    except OSError:
        return None
    mostly_unknown = len(rows) >= FOREIGN_MIN_ROWS and len(rows) >= FOREIGN_SHARE * total
    if not (declared is not None and declared != checked_name) and not mostly_unknown:
        return None
    own = dataset_named(declared) if declared is not None else None
    belongs = (
        f"it belongs to dataset {declared!r} (its manifest's `dataset`)"
        + (f", whose corpus is {own.corpus} and queries {own.queries}" if own is not None else "")
        if declared is not None
        else "its manifest does not say which dataset it belongs to (add `dataset: NAME` to manifest.yaml)"
    )
    against = context.checked_against().strip(" ()").removeprefix("ids checked against ")
    return InputError(
        f"{len(rows)} of {total} judgments name queries or documents not in {against}: {belongs}",
        file=str(judgments_path),
        field="dataset",
    )


def _check_set(directory: Path, context: _Context) -> tuple[jmod.JudgmentSet | None, list[InputError]]:
    judgment_set, problems = jmod.validate_version(
        directory, query_ids=context.query_ids, doc_lengths=context.doc_lengths
    )
    foreign = _foreign_set_line(directory, problems, context)
    if foreign is not None:
        problems = [p for p in problems if not _is_unknown_id(p)] + [foreign]
    return judgment_set, problems


def _set_summary(judgment_set: jmod.JudgmentSet | None, directory: Path) -> str:
    if judgment_set is None:
        return f"judgment set {directory.name}"
    frame = judgment_set.judgments
    return (
        f"judgment set {judgment_set.version}: {frame.height} judgments, "
        f"{frame['query_id'].n_unique()} queries, {len(judgment_set.manifest.annotators)} annotator(s)"
    )


class _Contexts:
    """One context per dataset (read once however many sets refer to it), or the one the flags name."""

    def __init__(self, flags: _Context | None):
        self.flags = flags
        self.by_name: dict[str, _Context] = {}

    def of_dataset(self, dataset: Dataset) -> _Context:
        if dataset.name not in self.by_name:
            self.by_name[dataset.name] = _Context.of(dataset)
        return self.by_name[dataset.name]

    def problems(self) -> list[InputError]:
        contexts = ([self.flags] if self.flags else []) + list(self.by_name.values())
        return [p for c in contexts for p in c.problems]


def validate_sets(directories: list[Path], contexts: _Contexts) -> tuple[list[InputError], list[str]]:
    """Each set against its own dataset's queries and corpus (or the flags'), and each parent present."""
    problems: list[InputError] = []
    summaries: list[str] = []
    for directory in directories:
        if contexts.flags is not None:
            context, note = contexts.flags, ""
        else:
            found = dataset_of_set(directory)
            context = contexts.of_dataset(found.dataset) if found.dataset is not None else _Context(None, None, None)
            note = "" if found.dataset is not None else f" (ids not checked: {found.how})"
            if found.dataset is None and found.declared is not None:
                problems.append(
                    InputError(
                        found.how,
                        file=str(directory / jmod.MANIFEST_NAME),
                        line=jmod.manifest_lines(directory / jmod.MANIFEST_NAME).get("dataset", 1),
                        field="dataset",
                    )
                )
                note = ""
        judgment_set, errors = _check_set(directory, context)
        problems += errors
        summaries.append(_set_summary(judgment_set, directory) + (note or context.checked_against()))
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
    return manifest_fields(manifest_path.parent).get("parent")


def validate_pool_file(
    path: Path, context: _Context, judgment_set_dir: str | None, annotator: str | None = None
) -> tuple[list[InputError], str]:
    problems: list[InputError] = []
    scale, prior = None, None
    if judgment_set_dir is not None:
        judgment_set, errors = _check_set(Path(judgment_set_dir), _Context(None, None, None))
        problems += errors
        if judgment_set is not None:
            scale, prior = judgment_set.manifest.scale, judgment_set.judgments
        found = dataset_of_set(Path(judgment_set_dir))
        if context.queries_path is None and context.corpus_path is None and found.dataset is not None:
            context = _Context.of(found.dataset)
            problems += context.problems
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
    ids_note = context.checked_against() or " (ids not checked: give --judgments SET_DIR, or --queries and --corpus)"
    return problems, f"filled pool {path}: {len(records)} graded rows, {ungraded} ungraded{scale_note}{ids_note}"


def _first_record(path: Path) -> dict | None:
    """The first non-blank line of a JSONL file as an object; None when it is not one."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            for line in fh:
                if line.strip():
                    first = parse_json_line(line, str(path), 1)
                    return first if isinstance(first, dict) else None
    except (OSError, ValueError):  # InputError is a ValueError: not JSON, so not a pool or judgments
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


def _flag_context(corpus: Path | None, corpus_format: str | None, queries: Path | None) -> _Context | None:
    if corpus is None and queries is None:
        return None
    return _Context(queries, corpus, corpus_format)


def _dataset_summary(dataset: Dataset, context: _Context) -> str:
    parts = []
    if context.queries is not None:
        if "split" in context.queries.columns:
            splits = context.queries["split"].value_counts().sort("split").iter_rows()
            parts.append(f"{context.queries.height} queries ({', '.join(f'{n} {s}' for s, n in splits if s)})")
        else:
            parts.append(f"{context.queries.height} queries ({dataset.queries_format})")
    if context.docs is not None:
        parts.append(f"{context.docs.height} documents in {context.corpus_path}")
    return f"dataset {dataset.name} ({dataset.declared_in}): " + ", ".join(parts)


def _validate_datasets(
    datasets: list[Dataset], set_dirs: list[Path], contexts: _Contexts
) -> tuple[list[InputError], str]:
    summaries = []
    for dataset in datasets:
        context = contexts.flags or contexts.of_dataset(dataset)
        summaries.append(_dataset_summary(dataset, context))
    problems, set_summaries = validate_sets(set_dirs, contexts)
    summaries += set_summaries
    return contexts.problems() + problems, "\n  ".join(summaries)


def validate_path(
    path: Path | None,
    *,
    corpus: str | None = None,
    corpus_format: str | None = None,
    queries: str | None = None,
    judgment_set: str | None = None,
    annotator: str | None = None,
) -> tuple[list[InputError], str]:
    """Every problem under ``path`` and a one-line summary. Reads only; writes nothing.

    ``path`` None: the active dataset (params.yaml): its queries, corpus and judgment set.
    ``corpus_format`` None: inferred from the corpus path (:func:`~releval.inputs.corpus.corpus_format_of`).
    """
    corpus_path = Path(corpus) if corpus else None
    queries_path = Path(queries) if queries else None
    contexts = _Contexts(_flag_context(corpus_path, corpus_format, queries_path))
    if path is None:
        active = active_dataset()
        if active is None:
            return [InputError("missing; compose it with `releval params`, or name a PATH", file="params.yaml")], ""
        sets = [active.judgment_set] if active.judgment_set is not None and is_set_dir(active.judgment_set) else []
        return _validate_datasets([active], sets, contexts)
    if not path.exists():
        return [InputError("no such file or directory", file=str(path), field="path")], ""
    if is_set_dir(path):
        problems, summaries = validate_sets([path], contexts)
        return contexts.problems() + problems, summaries[0]
    if path.is_dir():
        datasets = [d for d in known_datasets() if d.holds(path)]
        set_dirs = sets_below(path)
        if not datasets and not set_dirs:
            return [
                InputError(
                    "no dataset the configuration declares (conf/dataset/, params.yaml) keeps its corpus, queries "
                    "or judgments here, and no judgment set (manifest.yaml, judgments.jsonl) is here or below",
                    file=str(path),
                    field="path",
                )
            ], ""
        return _validate_datasets(datasets, set_dirs, contexts)
    context = contexts.flags or _Context(None, None, None)
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
            + (context.checked_against() or " (ids not checked: give --queries and --corpus)")
        )
    frame, problems = validate_queries(path)
    summary = f"queries {path}: {frame.height} queries"
    if frame.height:
        counts = dict(frame["split"].value_counts().iter_rows())
        summary += f" ({counts.get('dev', 0)} dev, {counts.get('holdout', 0)} holdout)"
    return context.problems + problems, summary
