"""Judgment sets: versioned directories of graded judgments, their qrels, and what a new version changes.

A judgment set is a directory ``data/judgments/<version>/`` holding

``manifest.yaml``
    ``version``           the set's id; equal to the directory's name
    ``parent``            the version this one revises, or null for the first
    ``date``              ISO date (YYYY-MM-DD) the version was written
    ``scale``             grade -> label, integer grades >= 0, e.g. {0: not relevant, 1: partial, 2: relevant}
    ``rubric``            the annotators' rubric, a file path relative to the set's directory
    ``annotators``        the names allowed in the ``annotator`` field
    ``judgments_sha256``  sha256 of ``judgments.jsonl``'s bytes: an edit without a new manifest is caught
    ``description``       optional free text
``judgments.jsonl``
    one judgment per line (fields in :mod:`releval.inputs.schemas`)
the rubric file (e.g. ``RUBRIC.md``)

Example ``manifest.yaml``::

    version: pydocs-v2
    parent: pydocs-v1
    date: '2026-11-30'
    scale: {0: not relevant, 1: partially relevant, 2: relevant, 3: highly relevant}
    rubric: RUBRIC.md
    annotators: [alice, bob]
    judgments_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08

A first version (``parent: null``) may hold no judgments yet (an empty ``judgments.jsonl``):
`releval init-dataset` writes one, and judgments are added to it with `releval pool --import`.
Scoring it gives no number: the metric engine refuses ("there are no judgments"). A revision
(with a parent) must hold judgments.

Versions are never edited in place once scores are reported from them: a revision is a new
directory whose ``parent`` names the old one; :func:`idcg_change_report` says which queries' ideal
DCG moved between the two and why.

Several annotators, one grade (:func:`aggregate`): when more than one annotator judged the same
(query, document), the qrels grade is the **lower median** of their grades (for grades sorted
ascending, the element at index (n - 1) // 2): the middle grade for an odd count, the lower of
the two middle grades for an even count -- so two annotators give the lower of their two grades.
It is always a grade someone gave (on the scale, an integer), it does not depend on the
annotators' order or names, one outlier cannot move it past the middle, and ties go the
conservative way: a document is only as relevant as half the annotators (rounded up) say.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from releval import io
from releval.errors import InputError
from releval.judging.completeness import Completeness, default_for_format
from releval.judging.completeness import parse as parse_completeness
from releval.inputs.corpus import judgments_file, read_judgments
from releval.inputs.schemas import (
    Record,
    check_references,
    evidence_json,
    raise_all,
    validate_judgment_records,
    validate_judgments,
)
from releval.measurement.metrics import GAINS, grade_gains
from releval.tables import JUDGMENTS, QRELS

# An annotator id starting with this is a model judge's (releval.judging.judges.annotator_identity), not a person's.
MODEL_PREFIX = "model:"
MANIFEST_NAME = "manifest.yaml"
JUDGMENTS_NAME = "judgments.jsonl"
MANIFEST_KEYS = ("version", "parent", "date", "scale", "rubric", "annotators", "judgments_sha256")
OPTIONAL_MANIFEST_KEYS = ("description", "dataset", "completeness", "imported_from")
QRELS_SCHEMA = QRELS.schema  # the old name, which tests/judging/test_judgment_versions.py imports
# What the description of an empty first version says until judgments arrive (releval.judging.scaffold).
EMPTY_SET_NOTE = ": empty until `releval pool --import` adds judgments"
RUBRIC_NAME = "RUBRIC.md"  # a dataset's rubric, beside its judgment sets (data/<dataset>/judgments/RUBRIC.md)
# The grades of a first version when none are given: the four grades of data/judgments/RUBRIC.md.
DEFAULT_SCALE: dict[int, str] = {
    0: "not useful",
    1: "on topic, points the way",
    2: "substantial part of the answer",
    3: "answers the query",
}

_VERSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Manifest:
    version: str
    parent: str | None
    date: str
    scale: dict[int, str]
    rubric: str
    annotators: tuple[str, ...]
    judgments_sha256: str
    description: str = ""
    dataset: str = ""  # the dataset (its configuration's `name`) whose corpus and queries the ids refer to
    completeness: Completeness = Completeness()  # pooled (the default) or positives-only: releval.judging.completeness
    imported_from: dict[str, str] | None = None  # a version made from a qrels file: its path, format and sha256

    def to_yaml(self) -> str:
        """The manifest as YAML, keys in a fixed order (identical manifests give identical bytes)."""
        import yaml

        document: dict[str, Any] = {
            "version": self.version,
            "parent": self.parent,
            "date": self.date,
            "scale": {int(g): self.scale[g] for g in sorted(self.scale)},
            "rubric": self.rubric,
            "annotators": list(self.annotators),
            "judgments_sha256": self.judgments_sha256,
        }
        if self.description:
            document["description"] = self.description
        if self.dataset:
            document["dataset"] = self.dataset
        if self.completeness != Completeness():
            document["completeness"] = self.completeness.to_manifest()
        if self.imported_from:
            document["imported_from"] = dict(self.imported_from)
        return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)


@dataclass(frozen=True)
class JudgmentSet:
    """A loaded, validated judgment set."""

    path: Path
    manifest: Manifest
    judgments: pl.DataFrame  # releval.tables.JUDGMENTS.schema_with_line
    rubric_sha256: str = ""

    @property
    def version(self) -> str:
        return self.manifest.version

    def qrels(self) -> pl.DataFrame:
        return aggregate(self.judgments)


# --------------------------------------------------------------------------- manifest


def read_manifest(
    path: str | os.PathLike, *, expected_version: str | None = None
) -> tuple[Manifest | None, list[InputError]]:
    """Read and check ``manifest.yaml`` (YAML, or JSON, which YAML reads too); every problem is listed.

    Returns (manifest or None when it is unusable, problems). Lines are those of the key.
    """
    import yaml

    path = Path(path)
    source = str(path)
    if not path.is_file():
        return None, [InputError("no such file: a judgment set needs a manifest.yaml", file=source, field="manifest")]
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, [InputError(f"not UTF-8 (byte offset {exc.start})", file=source, line=1, field="encoding")]
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, [
            InputError(
                f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
                file=source,
                line=mark.line + 1 if mark else 1,
                field="yaml",
            )
        ]
    if not isinstance(data, dict) or node is None:
        found = "an empty file" if data is None else type(data).__name__
        return None, [
            InputError(
                f"expected a mapping of {', '.join(MANIFEST_KEYS)}, found {found}",
                file=source,
                line=1,
                field="manifest",
            )
        ]
    lines = {str(key.value): key.start_mark.line + 1 for key, _ in node.value}
    errors: list[InputError] = []

    def err(key: str, message: str) -> None:
        errors.append(InputError(message, file=source, line=lines.get(key, 1), field=key))

    for key in data:
        if str(key) not in MANIFEST_KEYS + OPTIONAL_MANIFEST_KEYS:
            err(str(key), f"unknown key; expected {', '.join(MANIFEST_KEYS + OPTIONAL_MANIFEST_KEYS)}")
    for key in MANIFEST_KEYS:
        if key not in data:
            err(key, "missing")
    version = data.get("version")
    if "version" in data:
        if not isinstance(version, str) or not _VERSION_ID.fullmatch(version):
            err("version", f"expected a version id (letters, digits, '.', '_', '-'), found {version!r}")
            version = None
        elif expected_version is not None and version != expected_version:
            err("version", f"version {version!r} differs from its directory's name {expected_version!r}")
    parent = data.get("parent")
    if parent is not None and (not isinstance(parent, str) or not _VERSION_ID.fullmatch(parent)):
        err("parent", f"expected a version id or null, found {parent!r}")
        parent = None
    elif parent is not None and parent == version:
        err("parent", "a version cannot be its own parent")
    date = _date_text(data.get("date"))
    if "date" in data and date is None:
        err("date", f"expected an ISO date YYYY-MM-DD, found {data.get('date')!r}")
    scale = _scale(data.get("scale"), err) if "scale" in data else None
    rubric = data.get("rubric")
    if "rubric" in data and (not isinstance(rubric, str) or not rubric.strip()):
        err("rubric", f"expected the rubric's file path, found {rubric!r}")
        rubric = None
    elif isinstance(rubric, str) and (problem := rubric_problem(path.parent, rubric)):
        err("rubric", problem)
    annotators = data.get("annotators")
    if "annotators" in data:
        if (
            not isinstance(annotators, list)
            or not annotators
            or not all(isinstance(a, str) and a.strip() for a in annotators)
        ):
            err("annotators", f"expected a non-empty list of names, found {annotators!r}")
            annotators = None
        elif len(set(annotators)) != len(annotators):
            err("annotators", "names repeat")
    digest = data.get("judgments_sha256")
    if "judgments_sha256" in data and (not isinstance(digest, str) or not _SHA256.fullmatch(digest)):
        err("judgments_sha256", f"expected 64 lowercase hex digits, found {digest!r}")
        digest = None
    description = data.get("description", "")
    if not isinstance(description, str):
        err("description", "expected a string")
        description = ""
    dataset = data.get("dataset", "")
    if not isinstance(dataset, str):
        err("dataset", f"expected the name of the dataset whose corpus and queries the ids refer to, found {dataset!r}")
        dataset = ""
    completeness = Completeness()
    if "completeness" in data:
        completeness = parse_completeness(data["completeness"], lambda m: err("completeness", m)) or Completeness()
    imported_from = data.get("imported_from")
    if imported_from is not None and (
        not isinstance(imported_from, dict) or not all(isinstance(v, str) for v in imported_from.values())
    ):
        err("imported_from", f"expected a mapping of file, format and sha256, found {imported_from!r}")
        imported_from = None
    if (
        errors
        or version is None
        or date is None
        or scale is None
        or rubric is None
        or annotators is None
        or digest is None
    ):
        return None, errors
    return (
        Manifest(
            version,
            parent,
            date,
            scale,
            rubric,
            tuple(annotators),
            digest,
            description,
            dataset,
            completeness,
            imported_from,
        ),
        errors,
    )


def rubric_problem(set_dir: str | os.PathLike, rubric: str) -> str | None:
    """Why the manifest's ``rubric`` of the set in ``set_dir`` cannot be read, or None.

    A rubric is a file inside the set's directory or its dataset folder (the set's parent
    directory, where the shipped layout keeps RUBRIC.md), symlinks resolved: a manifest must not
    make the judging page show, or a model judge send, any other file of the machine.
    """
    where = Path(os.path.abspath(set_dir))
    target = where / rubric
    resolved = target.resolve()
    if not any(resolved.is_relative_to(folder) for folder in (where.resolve(), where.parent.resolve())):
        shown = Path(set_dir) if Path(set_dir).parent != Path(set_dir) and str(Path(set_dir).parent) != "." else where
        lexically_inside = Path(os.path.normpath(target)).is_relative_to(where.parent)
        through = f" (a symlink to {resolved})" if lexically_inside else ""
        return (
            f"rubric {rubric!r} is outside the judgment set and its dataset folder{through}: a rubric must be a "
            f"file inside {shown} or {shown.parent}"
        )
    if not resolved.is_file():
        return f"rubric file {rubric!r} not found (relative to {set_dir})"
    return None


def manifest_lines(path: str | os.PathLike) -> dict[str, int]:
    """1-based line of each top-level key (1 for an unreadable file)."""
    import yaml

    try:
        node = yaml.compose(Path(path).read_text(encoding="utf-8-sig"))
        return {str(key.value): key.start_mark.line + 1 for key, _ in node.value}
    except Exception:  # only used to place messages
        return {}


def _date_text(value: Any) -> str | None:
    if isinstance(value, _dt.datetime):
        return None
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value).isoformat() if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) else None
        except ValueError:
            return None
    return None


def _scale(value: Any, err) -> dict[int, str] | None:
    if not isinstance(value, dict) or not value:
        err("scale", f"expected a mapping grade -> label, e.g. {{0: not relevant, 1: relevant}}, found {value!r}")
        return None
    scale: dict[int, str] = {}
    ok = True
    for grade, label in value.items():
        number = grade
        if isinstance(grade, str) and re.fullmatch(r"\d+", grade.strip()):
            number = int(grade)  # JSON keys are strings
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            err("scale", f"grades are integers >= 0, found {grade!r}")
            ok = False
            continue
        if not isinstance(label, str) or not label.strip():
            err("scale", f"grade {number} needs a label, found {label!r}")
            ok = False
            continue
        if number in scale:
            err("scale", f"grade {number} appears twice")
            ok = False
        scale[number] = label
    return scale if ok else None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- loading a version


def validate_version(
    directory: str | os.PathLike,
    *,
    query_ids: Iterable[str] | None = None,
    doc_lengths: Mapping[str, int] | None = None,
    doc_texts: Mapping[str, str] | None = None,
) -> tuple[JudgmentSet | None, list[InputError]]:
    """Check a judgment-set directory; return (the set, or None when unusable, every problem).

    ``query_ids`` and ``doc_lengths`` (doc_id -> text length), when given, catch judgments naming
    unknown queries or documents and spans past a document's end; ``doc_texts`` (doc_id -> text,
    :func:`doc_texts`) places every evidence span, so that an anchor a corpus edit removed is a
    problem naming the pair (:func:`releval.inputs.schemas.check_references`).
    """
    directory = Path(directory)
    if not directory.is_dir():
        return None, [
            InputError(
                "no such directory (expected a judgment set: manifest.yaml + judgments.jsonl)",
                file=str(directory),
                field="path",
            )
        ]
    manifest_path = directory / MANIFEST_NAME
    judgments_path = directory / JUDGMENTS_NAME
    manifest, errors = read_manifest(manifest_path, expected_version=directory.name)
    scale = manifest.scale if manifest else None
    annotators = manifest.annotators if manifest else None
    if _holds_no_records(judgments_path):
        frame, judgment_errors = pl.DataFrame(schema=JUDGMENTS.schema_with_line), []
        if manifest is not None and manifest.parent is not None:
            judgment_errors.append(
                InputError(
                    f"empty: a revision of {manifest.parent!r} holds no judgments "
                    "(only a first version, parent: null, may be empty)",
                    file=str(judgments_path),
                    line=1,
                    field="query_id",
                )
            )
    else:
        frame, judgment_errors = validate_judgments(judgments_path, scale, annotators)
    errors += judgment_errors
    if manifest is not None and judgments_path.is_file():
        actual = io.sha256_file(judgments_path)
        if actual != manifest.judgments_sha256:
            errors.append(
                InputError(
                    f"hash mismatch: judgments.jsonl has sha256 {actual}, "
                    f"the manifest says {manifest.judgments_sha256} "
                    "(judgments edited without writing a new manifest?)",
                    file=str(manifest_path),
                    line=manifest_lines(manifest_path).get("judgments_sha256", 1),
                    field="judgments_sha256",
                )
            )
    errors += check_references(
        frame, str(judgments_path), query_ids=query_ids, doc_lengths=doc_lengths, doc_texts=doc_texts
    )
    if manifest is None:
        return None, errors
    rubric = directory / manifest.rubric
    rubric_sha = io.sha256_file(rubric) if rubric.is_file() else ""
    return JudgmentSet(directory, manifest, frame, rubric_sha), errors


def _holds_no_records(path: Path) -> bool:
    """An existing judgments.jsonl of nothing but blank lines (a BOM allowed): an empty set."""
    if not path.is_file():
        return False
    data = path.read_bytes()
    return not data.removeprefix(b"\xef\xbb\xbf").strip()


def load_version(
    directory: str | os.PathLike,
    *,
    query_ids: Iterable[str] | None = None,
    doc_lengths: Mapping[str, int] | None = None,
    doc_texts: Mapping[str, str] | None = None,
) -> JudgmentSet:
    """A validated judgment set; :class:`InputErrors` listing every problem otherwise."""
    judgment_set, errors = validate_version(
        directory, query_ids=query_ids, doc_lengths=doc_lengths, doc_texts=doc_texts
    )
    raise_all(errors)
    assert judgment_set is not None
    return judgment_set


def read_judgments_file(path: str | os.PathLike, scale: Mapping[int, str] | None = None) -> pl.DataFrame:
    """A judgments.jsonl outside a set (no manifest): checked, grades integers >= 0 unless ``scale``."""
    frame, errors = validate_judgments(path, scale)
    raise_all(errors)
    return frame


# --------------------------------------------------------------------------- qrels


def aggregate(judgments: pl.DataFrame) -> pl.DataFrame:
    """qrels ``query_id, doc_id, grade`` from per-annotator judgments: the lower median per pair.

    See the module docstring for the rule; rows come sorted by query_id, doc_id.
    """
    if judgments.height == 0:
        return QRELS.empty()
    grouped = (
        judgments.group_by("query_id", "doc_id")
        .agg(pl.col("grade").sort().alias("grades"))
        .with_columns(pl.col("grades").list.get((pl.col("grades").list.len() - 1) // 2).alias("grade"))
    )
    return grouped.select("query_id", "doc_id", pl.col("grade").cast(pl.Int64)).sort("query_id", "doc_id")


def _check_gain(gain: str) -> None:
    if gain not in GAINS:
        raise InputError(f"unknown gain {gain!r}; expected one of {', '.join(GAINS)}", field="gain")


def gain_value(grade: int, gain: str) -> float:
    """The metric engine's gain of one grade (:func:`releval.measurement.metrics.grade_gains`)."""
    _check_gain(gain)
    return float(grade_gains(np.array([grade]), gain)[0])


def ideal_dcg(qrels: pl.DataFrame, k_values: Sequence[int], gain: str = "exponential") -> pl.DataFrame:
    """IDCG@k per query and k: the DCG of the query's judged grades sorted best first.

    Same definition as the metric engine: its gain (:func:`releval.measurement.metrics.grade_gains`),
    discount 1 / log2(rank + 1). Columns: query_id, k, idcg.
    """
    ks = _check_k(k_values)
    _check_gain(gain)
    ordered = qrels.sort(["query_id", "grade", "doc_id"], descending=[False, True, False])
    # Divided by ln(rank + 1) / ln 2 and summed per query here, not by the engine's
    # multiply-by-1/log2 and bincount: the two can differ in the last bit, and the change
    # reports (reports/idcg_changes.*) record these exact values.
    ranked = ordered.with_columns(
        pl.int_range(1, pl.len() + 1).over("query_id").alias("rank"),
        pl.Series("gain", grade_gains(ordered["grade"].to_numpy(), gain)),
    ).with_columns((pl.col("gain") / (pl.col("rank").cast(pl.Float64) + 1.0).log(2)).alias("dcg_term"))
    frames = [
        ranked.filter(pl.col("rank") <= k)
        .group_by("query_id")
        .agg(pl.col("dcg_term").sum().alias("idcg"))
        .with_columns(pl.lit(k, dtype=pl.Int64).alias("k"))
        for k in ks
    ]
    queries = qrels.select("query_id").unique()
    out = [
        queries.with_columns(pl.lit(k, dtype=pl.Int64).alias("k"))
        .join(f.select("query_id", "idcg"), on="query_id", how="left")
        .with_columns(pl.col("idcg").fill_null(0.0))
        for k, f in zip(ks, frames)
    ]
    return pl.concat(out).select("query_id", "k", "idcg").sort("query_id", "k")


def _check_k(k_values: Sequence[int]) -> list[int]:
    ks = sorted(set(k_values))
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise InputError(f"k values must be integers >= 1, got {list(k_values)!r}", field="k")
    return ks


CHANGE_REPORT_SCHEMA = pl.Schema(
    {
        "query_id": pl.Utf8,
        "k": pl.Int64,
        "old_idcg": pl.Float64,
        "new_idcg": pl.Float64,
        "change": pl.Float64,
        "docs_added": pl.List(pl.Utf8),
        "docs_removed": pl.List(pl.Utf8),
        "grades_changed": pl.List(pl.Utf8),
        "reason": pl.Utf8,
    }
)


def idcg_change_report(
    old_qrels: pl.DataFrame,
    new_qrels: pl.DataFrame,
    k_values: Sequence[int] = (10,),
    gain: str = "exponential",
    *,
    tolerance: float = 1e-12,
) -> pl.DataFrame:
    """Each (query, k) whose IDCG@k moved between two qrels tables, with the old and new IDCG and why.

    Columns (:data:`CHANGE_REPORT_SCHEMA`): query_id, k, old_idcg, new_idcg, change (new - old),
    docs_added (judged in new only), docs_removed (judged in old only), grades_changed
    (``"doc_id: old->new"``), reason (one line). The three lists hold only the judgments whose gain
    changed -- a document added with grade 0 cannot move an IDCG and is not a reason. A query
    judged in only one of the two has IDCG 0 in the other. Rows sorted by query_id, k.
    """
    ks = _check_k(k_values)
    _check_gain(gain)
    old_idcg = ideal_dcg(old_qrels, ks, gain).rename({"idcg": "old_idcg"})
    new_idcg = ideal_dcg(new_qrels, ks, gain).rename({"idcg": "new_idcg"})
    both = old_idcg.join(new_idcg, on=["query_id", "k"], how="full", coalesce=True).with_columns(
        pl.col("old_idcg").fill_null(0.0), pl.col("new_idcg").fill_null(0.0)
    )
    moved = both.filter(
        (pl.col("new_idcg") - pl.col("old_idcg")).abs()
        > tolerance * pl.max_horizontal(pl.lit(1.0), pl.col("old_idcg").abs())
    )
    old_by_query = _grades_by_query(old_qrels)
    new_by_query = _grades_by_query(new_qrels)
    rows = []
    for row in moved.sort("query_id", "k").iter_rows(named=True):
        old = old_by_query.get(row["query_id"], {})
        new = new_by_query.get(row["query_id"], {})
        added = sorted(d for d in new if d not in old and gain_value(new[d], gain) != 0.0)
        removed = sorted(d for d in old if d not in new and gain_value(old[d], gain) != 0.0)
        changed = sorted(d for d in old if d in new and old[d] != new[d])
        reasons = (
            [f"added {d} (grade {new[d]})" for d in added]
            + [f"removed {d} (grade {old[d]})" for d in removed]
            + [f"regraded {d} {old[d]}->{new[d]}" for d in changed]
        )
        if not old:
            reasons.insert(0, "query newly judged")
        elif not new:
            reasons.insert(0, "query no longer judged")
        rows.append(
            {
                **row,
                "change": row["new_idcg"] - row["old_idcg"],
                "docs_added": added,
                "docs_removed": removed,
                "grades_changed": [f"{d}: {old[d]}->{new[d]}" for d in changed],
                "reason": "; ".join(reasons),
            }
        )
    return pl.DataFrame(rows, schema=CHANGE_REPORT_SCHEMA)


def _grades_by_query(qrels: pl.DataFrame) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for query_id, doc_id, grade in qrels.select("query_id", "doc_id", "grade").iter_rows():
        out.setdefault(query_id, {})[doc_id] = int(grade)
    return out


def compare_versions(
    old_dir: str | os.PathLike, new_dir: str | os.PathLike, k_values: Sequence[int] = (10,), gain: str = "exponential"
) -> pl.DataFrame:
    """:func:`idcg_change_report` between two judgment-set directories (each validated)."""
    return idcg_change_report(load_version(old_dir).qrels(), load_version(new_dir).qrels(), k_values, gain)


# --------------------------------------------------------------------------- writing versions


def judgment_line(row: Mapping[str, Any]) -> str:
    """One judgments.jsonl line, keys in a fixed order, optional fields only when set."""
    obj: dict[str, Any] = {
        "query_id": row["query_id"],
        "doc_id": row["doc_id"],
        "grade": int(row["grade"]),
        "annotator": row["annotator"],
    }
    if row.get("span_start") is not None:
        obj["span_start"] = int(row["span_start"])
        obj["span_end"] = int(row["span_end"])
    if row.get("evidence") is not None:  # [] too: the judge looked and no passage carries it
        obj["evidence"] = evidence_json(row["evidence"])
    if row.get("notes"):
        obj["notes"] = row["notes"]
    return json.dumps(obj, ensure_ascii=False)


def write_version(
    directory: str | os.PathLike, manifest: Manifest, judgments_bytes: bytes, files: Mapping[str, bytes] | None = None
) -> Manifest:
    """Write a whole judgment set atomically: ``judgments.jsonl``, a sealed manifest, other ``files``.

    The directory appears complete or not at all (an existing one is replaced only once the new
    one is fully written). The manifest's hash is set from ``judgments_bytes``. Returns it.
    """
    directory = Path(directory)
    sealed = replace(manifest, version=directory.name, judgments_sha256=sha256_bytes(judgments_bytes))
    with io.atomic_path(directory, directory=True) as tmp:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700
        for name, data in (files or {}).items():
            target = tmp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (tmp / JUDGMENTS_NAME).write_bytes(judgments_bytes)
        (tmp / MANIFEST_NAME).write_text(sealed.to_yaml(), encoding="utf-8")
    return sealed


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def set_files(directory: Path) -> dict[str, bytes]:
    """Every file of a set directory except judgments.jsonl and manifest.yaml (rubric, notes...)."""
    out = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        if path.is_file() and relative not in (JUDGMENTS_NAME, MANIFEST_NAME) and not relative.startswith("."):
            out[relative] = path.read_bytes()
    return out


def add_judgments(
    records: list[Record],
    source: str,
    into: str | os.PathLike,
    *,
    parent: str | os.PathLike | None = None,
    date: str | None = None,
    query_ids: Iterable[str] | None = None,
    doc_lengths: Mapping[str, int] | None = None,
    doc_texts: Mapping[str, str] | None = None,
    errors: list[InputError] | None = None,
    rubric: str | os.PathLike | None = None,
    scale: Mapping[int, str] | None = None,
    dataset: str | None = None,
    completeness: Completeness | None = None,
    imported_from: Mapping[str, str] | None = None,
    description: str | None = None,
    extra_files: Mapping[str, bytes] | None = None,
) -> tuple[JudgmentSet, int]:
    """Add judgment records to the set ``into``; nothing is written unless every record is valid.

    ``into`` exists: the records are appended to its judgments (they must not repeat an
    annotator's judgment of a pair) and the manifest is re-sealed, with new annotators added; an
    empty first version (:func:`validate_version`) takes its first judgments this way.
    ``into`` does not exist: with ``parent``, it becomes a new version of it: the parent's
    judgments, scale, rubric and other files, plus the records. Without ``parent`` it becomes a
    first version (``parent: null``) holding only the records, on ``scale`` (default
    :data:`DEFAULT_SCALE`), with the rubric ``rubric`` (default: :data:`RUBRIC_NAME` beside
    ``into``, the dataset's rubric; neither is an error): a rubric inside ``into``'s parent
    folder is referred to by its relative path (``../RUBRIC.md``), any other is copied into the
    set. ``rubric`` and ``scale`` are refused for an existing set or with ``parent`` (those
    versions keep their own). Records are checked by the same code as judgments.jsonl, against
    the set's scale; problems name ``source`` and its lines. ``errors``: problems already found
    while reading the records, raised together with these. ``dataset``: the name of the dataset the
    ids were checked against, recorded in a manifest that does not name one yet. ``completeness``:
    what the written set declares (None: the base set's, a first version's default ``pooled``);
    ``imported_from``: a first version made from a qrels file records its path, format and sha256.
    ``description``: a new set's (default: none for a first version, what a revision added for one).
    ``extra_files``: files to write into the set beside the judgments (a sampled import's
    ``sample.json``); one the set already holds is refused (a second sample would break the first's design).
    Returns the written set and the number of judgments added.
    """
    into = Path(into)
    files: dict[str, bytes] = {}
    if (into.exists() or parent is not None) and (rubric is not None or scale is not None):
        given = "rubric" if rubric is not None else "scale"
        raise InputError(
            f"only a first version (a new set without a parent) takes a {given}; "
            + ("this set has its own" if into.exists() else "a new version keeps its parent's"),
            file=str(into),
            field=given,
        )
    if into.exists():
        base = load_version(into)
        base_dir = into
        new_manifest = base.manifest
        files = set_files(base_dir)
    elif parent is not None:
        base = load_version(parent)
        base_dir = Path(parent)
        files = set_files(base_dir)
        reference, files = _rubric_reference(into, base_dir, base.manifest.rubric, files)
        new_manifest = replace(
            base.manifest,
            version=into.name,
            parent=base.manifest.version,
            date=date or _dt.date.today().isoformat(),
            rubric=reference,
            description="",
        )
    else:
        new_manifest, files = first_manifest(into, rubric, scale, date)
        base, base_dir = None, into
    if imported_from and (parent is not None or (base is not None and base.judgments.height)):
        raise InputError(
            "a qrels file makes a first version, or fills an empty one; add judgments of your own on top of it "
            "as a revision (--into a new version --parent it)",
            file=imported_from.get("file"),
            field="into",
        )
    prior = base.judgments if base is not None else None
    frame, problems = validate_judgment_records(
        records, source, new_manifest.scale, None, prior=prior, prior_source=str(base_dir / JUDGMENTS_NAME)
    )
    problems += check_references(frame, source, query_ids=query_ids, doc_lengths=doc_lengths, doc_texts=doc_texts)
    raise_all(sorted([*(errors or []), *problems], key=lambda e: (e.file or "", e.line or 0)))
    if frame.height == 0:
        raise InputError("nothing to add: no graded rows", file=source, field="grade")
    annotators = list(new_manifest.annotators)
    for name in frame["annotator"].to_list():
        if name not in annotators:
            annotators.append(name)
    description = description if description is not None and not into.exists() else new_manifest.description
    if base is not None and base.judgments.height == 0 and EMPTY_SET_NOTE in description:
        description = description.split(EMPTY_SET_NOTE, 1)[0]  # the scaffold's "empty until ..." is no longer true
    elif not description and parent is not None and not into.exists():
        names = sorted(set(frame["annotator"].to_list()))
        description = f"revision of {base.manifest.version}: {frame.height} judgments added by {', '.join(names)}"
    new_manifest = replace(
        new_manifest,
        annotators=tuple(annotators),
        dataset=new_manifest.dataset or dataset or "",
        description=description,
        completeness=completeness if completeness is not None else new_manifest.completeness,
        imported_from=dict(imported_from) if imported_from else (new_manifest.imported_from if into.exists() else None),
    )
    for name, data in (extra_files or {}).items():
        if name in files:
            raise InputError(
                f"the set already holds a {name} (it was judged from a sample); a second sample would break the "
                "first's design: judge the rest of that sample, or start from a set without one",
                file=str(base_dir / name),
                field="into",
            )
        files[name] = data
    if new_manifest.rubric not in files and (problem := rubric_problem(into, new_manifest.rubric)):
        raise InputError(problem, file=str(into / MANIFEST_NAME), field="rubric")
    old_bytes = (base_dir / JUDGMENTS_NAME).read_bytes() if base is not None else b""
    if not old_bytes.strip():
        old_bytes = b""  # an empty first version's blank lines are not kept before its first judgment
    elif not old_bytes.endswith(b"\n"):
        old_bytes += b"\n"
    added = "".join(judgment_line(row) + "\n" for row in frame.iter_rows(named=True)).encode("utf-8")
    write_version(into, new_manifest, old_bytes + added, files)
    return load_version(into), frame.height


def _rubric_reference(into: Path, base_dir: Path, rubric: str, files: dict[str, bytes]) -> tuple[str, dict[str, bytes]]:
    """How a new version ``into`` refers to the rubric ``rubric`` of the version in ``base_dir`` it
    revises: the same file inside the set (``files`` copies it), else by its path relative to
    ``into`` when it lies in ``into``'s dataset folder, else copied into the new set."""
    source = (base_dir / rubric).resolve()
    if source.is_relative_to(base_dir.resolve()):
        return source.relative_to(base_dir.resolve()).as_posix(), files
    if source.is_relative_to(into.resolve().parent):
        return Path(os.path.relpath(source, into.resolve())).as_posix(), files
    return source.name, {**files, source.name: source.read_bytes()}


def checked_scale(scale: Mapping[int, str] | None, source: str = "<command line>") -> dict[int, str]:
    """``scale`` (default :data:`DEFAULT_SCALE`) checked as a manifest's ``scale`` is; InputErrors otherwise."""
    problems: list[InputError] = []
    checked = _scale(
        dict(DEFAULT_SCALE if scale is None else scale),
        lambda key, message: problems.append(InputError(message, file=source, field=key)),
    )
    raise_all(problems)
    assert checked is not None
    return checked


def first_manifest(
    into: str | os.PathLike,
    rubric: str | os.PathLike | None = None,
    scale: Mapping[int, str] | None = None,
    date: str | None = None,
    annotators: Sequence[str] = (),
) -> tuple[Manifest, dict[str, bytes]]:
    """The manifest of a first version ``into`` (``parent: null``) and the files to write with it.

    ``rubric``: the rubric file (default :data:`RUBRIC_NAME` beside ``into``; missing: an error
    naming both ways to give one). One inside ``into``'s parent folder is referred to by its path
    relative to ``into``; any other is copied into the set under its own name. ``scale``: default
    :data:`DEFAULT_SCALE`, checked as a manifest's is. The hash is sealed by :func:`write_version`.
    """
    into = Path(into)
    if not _VERSION_ID.fullmatch(into.name):
        raise InputError(
            f"a set's directory name is its version id (letters, digits, '.', '_', '-'), found {into.name!r}",
            file=str(into),
            field="version",
        )
    rubric_path = Path(rubric) if rubric is not None else into.parent / RUBRIC_NAME
    if not rubric_path.is_file():
        raise InputError(
            f"no such judgment set, and no rubric for a first version: {rubric_path} is not a file. To start a "
            "first version give its rubric (--rubric FILE, or a RUBRIC.md beside the new set: `releval "
            "init-dataset` writes one); to start a new version of an existing set, name it (--parent SET_DIR)",
            file=str(into),
            field="rubric" if rubric is not None else "parent",
        )
    files: dict[str, bytes] = {}
    if rubric_path.resolve().is_relative_to(into.resolve().parent):
        reference = Path(os.path.relpath(rubric_path.resolve(), into.resolve())).as_posix()
    else:
        reference = rubric_path.name
        files[reference] = rubric_path.read_bytes()
    checked = checked_scale(scale)
    if date is not None and _date_text(date) is None:
        raise InputError(f"expected YYYY-MM-DD, got {date!r}", file="<command line>", field="date")
    manifest = Manifest(
        version=into.name,
        parent=None,
        date=date or _dt.date.today().isoformat(),
        scale=checked,
        rubric=reference,
        annotators=tuple(annotators),
        judgments_sha256="0" * 64,
    )
    return manifest, files


# --------------------------------------------------------------------------- corpus and queries


def doc_lengths(docs: pl.DataFrame) -> dict[str, int]:
    return dict(zip(docs["doc_id"].to_list(), docs["text"].str.len_chars().to_list()))


class DocTexts(Mapping):
    """doc_id -> the document's text as ingested (without its title), read from ``docs`` only for
    the documents asked for: evidence is checked on few of them, and a corpus's texts are large."""

    def __init__(self, docs: pl.DataFrame):
        self._texts = docs["text"]
        self._rows = {doc_id: row for row, doc_id in enumerate(docs["doc_id"].to_list())}

    def __getitem__(self, doc_id: str) -> str:
        return self._texts[self._rows[doc_id]]

    def __iter__(self):
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def doc_texts(docs: pl.DataFrame) -> DocTexts:
    """The texts evidence spans lie in (:mod:`releval.inputs.schemas`), by doc_id."""
    return DocTexts(docs)


@dataclass(frozen=True)
class ActiveJudgments:
    """The qrels of the configured judgment source, restricted to what the corpus and query set hold."""

    qrels: pl.DataFrame  # judgments of documents and queries in the corpus and query set
    provenance: dict[str, Any]
    dropped_outside_corpus_subset: int
    dropped_outside_query_subset: int
    judgments: pl.DataFrame | None = None  # a releval set's rows (annotators, evidence); None for a qrels file


def set_provenance(judgment_set: JudgmentSet) -> dict[str, Any]:
    """What judgments.json records about a releval judgment set."""
    manifest = judgment_set.manifest
    return {
        "source_sha256": manifest.judgments_sha256,
        "scale": {str(k): v for k, v in manifest.scale.items()},
        "parent": manifest.parent,
        "date": manifest.date,
        "annotators": list(manifest.annotators),
        "rubric": manifest.rubric,
        "rubric_sha256": judgment_set.rubric_sha256,
        "description": manifest.description,
        "completeness": manifest.completeness.to_dict(),
        **({"imported_from": dict(manifest.imported_from)} if manifest.imported_from else {}),
        "aggregation": "lower median of the annotators' grades",
        **model_judged(judgment_set.judgments),
    }


def model_judged(judgments: pl.DataFrame) -> dict[str, Any]:
    """``model_judged_queries``: the queries a model judge labelled (reports keep the rest as the
    human-only slice); nothing when every label is human."""
    by_model = judgments.filter(pl.col("annotator").str.starts_with(MODEL_PREFIX))
    return {"model_judged_queries": sorted(by_model["query_id"].unique().to_list())} if by_model.height else {}


def config_completeness(judgments: Mapping[str, Any]) -> Completeness:
    """The completeness a judgments config declares for the qrels file it names (``completeness:``),
    else its format's convention (:func:`releval.judging.completeness.default_for_format`)."""
    if "completeness" not in judgments:
        return default_for_format(str(judgments.get("format")))
    problems: list[str] = []
    found = parse_completeness(judgments["completeness"], problems.append)
    if found is None:
        raise InputError(problems[0], file="params.yaml", field="judgments.completeness")
    return found


def active_set_path(params: Mapping[str, Any]) -> Path:
    """The releval judgment set params.yaml names as active: the default parent of a new version."""
    judgments = params.get("judgments") or {}
    if judgments.get("format") != "releval" or not judgments.get("path"):
        raise InputError(
            f"no releval judgment set is active in params.yaml (judgments: {judgments or 'none'}); "
            "name the version it revises with --parent SET_DIR",
            file="params.yaml",
            field="judgments",
        )
    return Path(judgments["path"])


def active_judgments(
    judgments: Mapping[str, Any], subset: Mapping[str, Any], docs: pl.DataFrame, query_ids: pl.Series
) -> ActiveJudgments:
    """Read the configured judgments (params ``judgments``) against the corpus ``docs`` and ``query_ids``.

    Judged documents or queries outside the corpus or query set are an error, unless the dataset
    is a declared ``subset``: then they are dropped and counted (IDCG must only count documents a
    system could retrieve).
    """
    if judgments["format"] == "releval":
        # A declared subset leaves judged documents/queries outside it: those are dropped and
        # counted below, so only a full dataset checks references (and spans) here.
        full = subset.get("docs") is None and subset.get("queries") is None
        judgment_set = load_version(
            judgments["path"],
            query_ids=query_ids.to_list() if full else None,
            doc_lengths=doc_lengths(docs) if full else None,
            doc_texts=doc_texts(docs) if full else None,
        )
        if judgment_set.version != str(judgments["version"]):
            raise InputError(
                f"the set in {judgments['path']} is version {judgment_set.version!r}",
                file="params.yaml",
                field="judgments.version",
            )
        qrels = judgment_set.qrels()
        provenance = set_provenance(judgment_set)
        rows = judgment_set.judgments
    else:
        rows = None
        qrels = read_judgments(judgments["path"], judgments["format"])
        provenance = {
            # A BEIR dataset directory is hashed by the qrels file read from it.
            "source_sha256": io.sha256_file(judgments_file(judgments["path"], judgments["format"])),
            "scale": {str(k): v for k, v in judgments.get("scale", {}).items()},
            "completeness": config_completeness(judgments).to_dict(),
        }
    doc_ids = docs["doc_id"]
    unknown_docs = qrels.filter(~pl.col("doc_id").is_in(doc_ids.implode()))
    if unknown_docs.height and subset.get("docs") is None:
        first = unknown_docs.row(0, named=True)
        raise InputError(
            f"{unknown_docs.height} judgment(s) name documents not in the corpus "
            f"(first: query {first['query_id']}, doc {first['doc_id']})",
            file=judgments["path"],
            field="doc_id",
        )
    outside_queries = qrels.filter(~pl.col("query_id").is_in(query_ids.implode()))
    if outside_queries.height and subset.get("queries") is None:
        first = outside_queries.row(0, named=True)
        raise InputError(
            f"{outside_queries.height} judgment(s) name queries not in the query set "
            f"(first: query {first['query_id']})",
            file=judgments["path"],
            field="query_id",
        )
    known = qrels.filter(pl.col("doc_id").is_in(doc_ids.implode()) & pl.col("query_id").is_in(query_ids.implode()))
    return ActiveJudgments(known, provenance, unknown_docs.height, outside_queries.height, rows)
