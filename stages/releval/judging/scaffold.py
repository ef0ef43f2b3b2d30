"""A new dataset's files, written once: its configs, a queries template, a rubric template and an
empty first judgment version (`releval init-dataset`).

For a dataset NAME in a project root:

``conf/dataset/NAME.yaml``        shaped like conf/dataset/pydocs.yaml; its ``defaults`` name
                                  ``conf/judgments/NAME-v1.yaml``
``conf/judgments/NAME-v1.yaml``   version v1, path data/NAME/judgments/v1, format releval
``data/NAME/queries.jsonl``       unless queries are given: template rows in releval's queries
                                  format, each carrying a ``TEMPLATE`` key that query validation
                                  refuses (unknown field) until the row is replaced
``data/NAME/judgments/RUBRIC.md`` data/judgments/RUBRIC.md's headings and grade table, its
                                  pydocs content replaced by fill-in prompts
``data/NAME/judgments/v1/``       an empty first version: ``judgments.jsonl`` of 0 bytes and a
                                  sealed manifest (``parent: null``, the scale, ``rubric:
                                  ../RUBRIC.md``, the annotators, the sha256 of the empty file)

The corpus and given queries are read by the readers the pipeline's stages use
(:func:`releval.inputs.corpus.read_corpus`, :func:`releval.inputs.schemas.load_queries`), so a
bad file is refused here, naming its file, line and field. Nothing that exists is overwritten:
every target is checked before anything is written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

import polars as pl

from releval import io
from releval.errors import InputError
from releval.inputs.corpus import corpus_format_of, read_corpus, read_queries
from releval.inputs.schemas import load_queries
from releval.inputs.trec import qrels_format_of
from releval.judging import judgments as jmod
from releval.judging.completeness import POOLED, POSITIVES_ONLY, Completeness
from releval.judging.pool import read_qrels_records

CORPUS_FORMATS = ("jsonl", "folder", "beir", "smart")
QUERY_FORMATS = ("releval", "jsonl", "beir", "smart")
FIRST_VERSION = "v1"
TEMPLATE_KEY = "TEMPLATE"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class DatasetFiles:
    """Where a dataset's files go, relative to the project root."""

    name: str
    dataset_conf: Path
    judgments_conf: Path
    data_dir: Path
    queries: Path
    rubric: Path
    first_set: Path

    @classmethod
    def of(cls, name: str) -> DatasetFiles:
        data_dir = Path("data") / name
        return cls(
            name=name,
            dataset_conf=Path("conf") / "dataset" / f"{name}.yaml",
            judgments_conf=Path("conf") / "judgments" / f"{judgments_conf_name(name)}.yaml",
            data_dir=data_dir,
            queries=data_dir / "queries.jsonl",
            rubric=data_dir / "judgments" / jmod.RUBRIC_NAME,
            first_set=data_dir / "judgments" / FIRST_VERSION,
        )


def judgments_conf_name(name: str) -> str:
    return f"{name}-{FIRST_VERSION}"


def check_name(name: str) -> str:
    """A dataset name: a Hydra option, a folder and part of a version's config name."""
    if not _NAME.fullmatch(name):
        raise InputError(
            f"expected letters, digits, '-' and '_' (starting with a letter or digit), found {name!r}",
            file="<command line>",
            field="NAME",
        )
    return name


def parse_scale(text: str) -> dict[int, str]:
    """``0=not relevant,1=partial,2=relevant`` as a scale (grade -> label), checked as a manifest's."""
    scale: dict[int, str] = {}
    for part in (p.strip() for p in text.split(",")):
        grade, sep, label = part.partition("=")
        if not sep or not re.fullmatch(r"\d+", grade.strip()) or not label.strip():
            raise InputError(f"expected GRADE=LABEL pairs separated by commas, found {part!r}", field="scale")
        if int(grade) in scale:
            raise InputError(f"grade {int(grade)} appears twice", field="scale")
        scale[int(grade)] = label.strip()
    if not scale:
        raise InputError("no grades given", field="scale")
    return scale


# --------------------------------------------------------------------------- checking inputs


def check_corpus(path: Path, fmt: str | None) -> tuple[pl.DataFrame, str]:
    """The corpus as ingest reads it, and its format (given, else inferred from the path)."""
    fmt = fmt or corpus_format_of(path)
    if fmt not in CORPUS_FORMATS:
        raise InputError(
            f"the ingest stage reads {', '.join(CORPUS_FORMATS)}, not {fmt!r}", file=str(path), field="format"
        )
    return read_corpus(path, fmt), fmt


def check_queries(path: Path, fmt: str) -> pl.DataFrame:
    """The queries as the queries stage reads them (releval's format: every problem listed)."""
    if fmt not in QUERY_FORMATS:
        raise InputError(f"expected one of {', '.join(QUERY_FORMATS)}, found {fmt!r}", file=str(path), field="format")
    return load_queries(path) if fmt == "releval" else read_queries(path, fmt)


# --------------------------------------------------------------------------- file contents


def _yaml_scalar(text: str) -> str:
    """A path as a YAML flow scalar: plain when it is only safe characters, else double-quoted (JSON)."""
    import json

    return text if re.fullmatch(r"[A-Za-z0-9_./-]+", text) else json.dumps(text, ensure_ascii=False)


def dataset_yaml(name: str, corpus: str, corpus_format: str, queries: str, queries_format: str) -> str:
    corpus, queries = _yaml_scalar(corpus), _yaml_scalar(queries)
    return (
        "defaults:\n"
        f"  - /judgments@_global_.judgments: {judgments_conf_name(name)}"
        "   # the dataset's judgments; `releval params judgments=...` picks another\n"
        "  - _self_\n"
        f"# Written by `releval init-dataset {name}`. A changed corpus is a new dataset name: archived runs\n"
        "# are re-scored only against judgments of their own dataset.\n"
        f"name: {name}\n"
        f"corpus: {{path: {corpus}, format: {corpus_format}}}\n"
        f"queries: {{path: {queries}, format: {queries_format}}}\n"
        "subset: {docs: null, queries: null}  # first N documents / queries (null: all)\n"
    )


def judgments_yaml(name: str, first_set: Path) -> str:
    return (
        f"# First judgment set of dataset {name} (see {first_set.as_posix()}/manifest.yaml); empty until\n"
        "# `releval pool --import` adds judgments.\n"
        f"version: {FIRST_VERSION}\n"
        f"path: {first_set.as_posix()}\n"
        "format: releval\n"
    )


_QUERY_EXAMPLES = (
    ("q001", "WRITE: a question a user of this collection would type", "dev", ["FILL-IN-slice"], False),
    ("q002", "WRITE: another one, in the user's own words, not the documents'", "dev", [], True),
    ("q003", "WRITE: a query kept aside for the final report (split holdout)", "holdout", [], False),
)


def queries_template() -> str:
    """Three rows in releval's queries format, each refused by validation until it is replaced."""
    import json

    rows = []
    for query_id, text, split, slices, must_never_break in _QUERY_EXAMPLES:
        row = {
            "query_id": query_id,
            "text": text,
            "split": split,
            "slices": slices,
            "must_never_break": must_never_break,
            TEMPLATE_KEY: "an example row: replace it with a real query and drop this key "
            "(split: dev or holdout; slices and must_never_break are optional)",
        }
        rows.append(json.dumps(row, ensure_ascii=False) + "\n")
    return "".join(rows)


def rubric_template(name: str, scale: Mapping[int, str]) -> str:
    """data/judgments/RUBRIC.md's headings and grade table, with fill-in prompts for its content."""
    grades = sorted(scale, reverse=True)
    rows = "\n".join(
        f"| **{g}** | {scale[g]} | **FILL IN.** What can the user do with a document of grade {g}? "
        f"{'(e.g. act on it: it states what the query asks for)' if g == grades[0] else ''}"
        f"{'(e.g. gain nothing: it is about something else)' if g == grades[-1] else ''} |"
        for g in grades
    )
    return f"""# Grading rubric: {name} queries, scale {grades[-1]}–{grades[0]}

Grade one (query, document) pair at a time. The question to ask is: **what can the person
who typed this query do with this document, as it is shown?** FILL IN: who the users of
{name} are, and how to read their queries (typos, terse phrasing, jargon).

| Grade | Name | The user, having read this document, can … |
|---|---|---|
{rows}

Write each definition before any judging, by what the user can do with the document, with no
comparative wording ("better than", "the most relevant").

## Edge cases

- **Judge the text as shown.** FILL IN: what a judge sees of a document (the whole text? cut?)
  and that content not shown earns no credit.
- **Passing mentions.** FILL IN: how to grade a document that only names the thing asked for
  (an index, a list, a "see also").
- **The same answer in two or more documents.** Grade each document on its own; several can
  share the top grade. FILL IN: overlaps known in {name}.
- **Ambiguous queries.** A document that fully answers one plausible reading gets the top
  grade; write the reading used in `notes`. FILL IN: readings that do not count.
- **FILL IN: other cases** your collection raises (negated queries, outdated documents, noise
  such as boilerplate, licences or navigation text).

## How judges work

- Read the document text against the query and this rubric only. Never look at any system's
  score, rank or run, or at which system retrieved the document. Grades must not depend on
  them, and they must not be used to break a tie.
- Grade documents independently. Each grade is a statement about this query and this
  document, not a position in a list.
- When two grades seem to fit, reread both definitions and assign the one whose condition the
  document fully meets.
- For the upper grades, you may mark the passage that carries the answer with
  `span_start`/`span_end` (character offsets into the document text). Use `notes` for
  anything a second judge would need, such as the reading of an ambiguous query or why the
  document is partial.
"""


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class Scaffold:
    """What `releval init-dataset` wrote."""

    files: DatasetFiles
    written: list[Path]  # relative to the root, in the order written
    documents: int
    queries: pl.DataFrame | None  # the given queries, read; None: a template was written
    manifest: jmod.Manifest


def _first_version_from_qrels(
    qrels: Path,
    into: Path,
    name: str,
    docs: pl.DataFrame,
    queries: pl.DataFrame,
    scale: Mapping[int, str],
    date: str | None,
    completeness: str | None,
) -> jmod.Manifest:
    """The first version of dataset ``name``: the qrels file's rows, checked against ``docs`` and ``queries``."""
    records, errors = read_qrels_records(qrels, None)
    zeros = any(r.values["grade"] == 0 for r in records)
    declared = Completeness(completeness or (POOLED if zeros else POSITIVES_ONLY))
    judgment_set, added = jmod.add_judgments(
        records,
        str(qrels),
        into,
        date=date,
        query_ids=queries["query_id"].to_list(),
        doc_lengths=jmod.doc_lengths(docs),
        errors=errors,
        scale=scale,
        dataset=name,
        completeness=declared,
        imported_from={"file": qrels.as_posix(), "format": qrels_format_of(qrels), "sha256": io.sha256_file(qrels)},
        description=f"first judgment set of dataset {name}: the {len(records)} labels of {qrels.name}",
    )
    return judgment_set.manifest


def _conf_path(path: Path, root: Path) -> str:
    """A path for a config under ``root``: relative to the root (``../shared/...`` outside it), '/'-separated."""
    return Path(os.path.relpath(path.resolve(), root.resolve())).as_posix()


def existing_targets(files: DatasetFiles, root: Path, with_queries: bool) -> list[Path]:
    targets = [files.dataset_conf, files.judgments_conf, files.rubric, files.first_set]
    if with_queries:
        targets.insert(2, files.queries)
    return [t for t in targets if (root / t).exists() or (root / t).is_symlink()]


def init_dataset(
    name: str,
    corpus: str | os.PathLike,
    *,
    root: str | os.PathLike = ".",
    corpus_format: str | None = None,
    queries: str | os.PathLike | None = None,
    queries_format: str = "releval",
    annotators: tuple[str, ...] = (),
    scale: Mapping[int, str] | None = None,
    date: str | None = None,
    qrels: str | os.PathLike | None = None,
    completeness: str | None = None,
) -> Scaffold:
    """Check the corpus (and queries, when given) and write the dataset's files (module docstring).

    ``corpus`` and ``queries`` are paths as given (relative to the working directory); the configs
    name them relative to ``root``. ``annotators``: the first version's declared names (at least
    one: a manifest declares who may judge; an import adds new names). Refuses, writing nothing,
    when a target exists, the root is not a releval project, or an input is bad.

    ``qrels`` (TREC qrels or a BEIR .tsv; needs ``queries``): the labels you already have become the
    first version instead of an empty one, checked against the corpus and queries, recording the
    file's path, format and sha256 and what it declares (``completeness``: default positives-only when
    no row has grade 0, else pooled; :func:`releval.judging.pool.import_filled_pool`).
    """
    check_name(name)
    root = Path(root)
    if not (root / "conf" / "dataset").is_dir() or not (root / "conf" / "judgments").is_dir():
        raise InputError(
            "not a releval project root: no conf/dataset/ and conf/judgments/ here "
            "(run from the project root, or give --root)",
            file=str(root),
            field="root",
        )
    if not annotators or not all(isinstance(a, str) and a.strip() for a in annotators):
        raise InputError(f"expected one or more annotator names, found {list(annotators)!r}", field="annotator")
    files = DatasetFiles.of(name)
    exists = existing_targets(files, root, queries is None)
    if exists:
        raise InputError(
            "exists already, nothing was written: "
            + ", ".join(str(root / p) for p in exists)
            + " (a dataset's files are never overwritten; choose another NAME or remove them)",
            file=str(root / exists[0]),
            field="NAME",
        )
    corpus_path = Path(corpus)
    docs, corpus_format = check_corpus(corpus_path, corpus_format)
    query_table = check_queries(Path(queries), queries_format) if queries is not None else None
    if qrels is not None and query_table is None:
        raise InputError(
            "the qrels' query ids must be those of your queries: give --queries too", file=str(qrels), field="queries"
        )
    checked = jmod.checked_scale(scale)
    if date is not None and jmod._date_text(date) is None:
        raise InputError(f"expected YYYY-MM-DD, got {date!r}", file="<command line>", field="date")
    queries_ref = _conf_path(Path(queries), root) if queries is not None else files.queries.as_posix()
    queries_fmt = queries_format if queries is not None else "releval"
    written: list[Path] = []

    def write(relative: Path, text: str) -> None:
        io.write_text(root / relative, text)
        written.append(relative)

    write(
        files.dataset_conf,
        dataset_yaml(name, _conf_path(corpus_path, root), corpus_format, queries_ref, queries_fmt),
    )
    write(files.judgments_conf, judgments_yaml(name, files.first_set))
    if queries is None:
        write(files.queries, queries_template())
    write(files.rubric, rubric_template(name, checked))
    if qrels is not None:
        sealed = _first_version_from_qrels(
            Path(qrels), root / files.first_set, name, docs, query_table, checked, date, completeness
        )
    else:
        manifest, _ = jmod.first_manifest(root / files.first_set, None, checked, date, annotators)
        description = f"first judgment set of dataset {name}{jmod.EMPTY_SET_NOTE}"
        sealed = jmod.write_version(
            root / files.first_set, replace(manifest, description=description, dataset=name), b""
        )
    written.append(files.first_set)
    jmod.load_version(root / files.first_set)  # the validator's word on what was written
    return Scaffold(files, written, docs.height, query_table, sealed)
