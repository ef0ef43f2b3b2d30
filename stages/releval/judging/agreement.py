"""Agreement between two annotators on the (query, document) pairs both judged.

* raw agreement  p_o = (pairs with the same grade) / (shared pairs)
* Cohen's kappa  (p_o - p_e) / (1 - p_e), p_e = sum over grades of the two annotators' marginal
  proportions multiplied
* linearly weighted kappa  1 - sum(w * O) / sum(w * E), with O the observed and E the expected
  (outer product of the marginals) proportions and the disagreement weight
  w_ij = |g_i - g_j| / (g_max - g_min) over the categories' grades g.

The categories are the grades of the declared scale when one is given (so a grade nobody used
still counts in the distances), else the grades either annotator used. Weights use the grade
values; for a scale of consecutive integers (0, 1, 2, 3) that is the same as using category
positions, which is what scikit-learn's ``cohen_kappa_score(weights="linear")`` does, and what
statsmodels' ``cohens_kappa(table, wt="linear")`` does (statsmodels also accepts the grades as
scores: ``cohens_kappa(table, weights=grades, wt="linear")``; note that it computes the *weighted*
kappa whenever ``weights`` is given, even with ``wt=None``).

When the expected agreement is complete (both annotators used one and the same grade for every
pair), kappa is 0/0: it is reported as undefined (None), not as 0 or 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.judging import judgments as jmod


@dataclass(frozen=True)
class Agreement:
    shared_pairs: int
    categories: tuple[int, ...]
    confusion: np.ndarray  # rows: annotator A's grade, columns: annotator B's grade (categories order)
    raw: float
    kappa: float | None
    weighted_kappa: float | None
    only_a: int = 0  # pairs judged by A only
    only_b: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "shared_pairs": self.shared_pairs,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "categories": list(self.categories),
            "confusion": self.confusion.astype(int).tolist(),
            "raw_agreement": self.raw,
            "kappa": self.kappa,
            "linear_weighted_kappa": self.weighted_kappa,
        }


def confusion_matrix(grades_a: Sequence[int], grades_b: Sequence[int], categories: Sequence[int]) -> np.ndarray:
    index = {grade: i for i, grade in enumerate(categories)}
    matrix = np.zeros((len(categories), len(categories)), dtype=np.int64)
    for a, b in zip(grades_a, grades_b):
        matrix[index[a], index[b]] += 1
    return matrix


def kappas(confusion: np.ndarray, categories: Sequence[int]) -> tuple[float, float | None, float | None]:
    """(raw agreement, Cohen's kappa, linearly weighted kappa) of a confusion matrix."""
    table = np.asarray(confusion, dtype=np.float64)
    n = table.sum()
    if n <= 0:
        raise InputError("no shared pairs: kappa needs pairs judged by both annotators", field="pairs")
    observed = table / n
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    p_o, p_e = float(np.trace(observed)), float(np.trace(expected))
    kappa = None if np.isclose(p_e, 1.0, rtol=0, atol=1e-15) else (p_o - p_e) / (1.0 - p_e)
    grades = np.asarray(categories, dtype=np.float64)
    if len(grades) < 2:
        return p_o, kappa, None
    weights = np.abs(grades[:, None] - grades[None, :]) / (grades.max() - grades.min())
    expected_disagreement = float((weights * expected).sum())
    observed_disagreement = float((weights * observed).sum())
    weighted = None if expected_disagreement <= 1e-15 else 1.0 - observed_disagreement / expected_disagreement
    return p_o, kappa, weighted


def agreement(a: pl.DataFrame, b: pl.DataFrame, scale: Iterable[int] | None = None) -> Agreement:
    """Agreement of two judgment tables (query_id, doc_id, grade) on their shared pairs.

    Each table must hold one grade per (query_id, doc_id): one annotator's judgments. ``scale``:
    the declared grades (categories); without it, the grades used. A grade outside the scale is
    an error.
    """
    for name, table in (("A", a), ("B", b)):
        dup = table.group_by("query_id", "doc_id").len().filter(pl.col("len") > 1)
        if dup.height:
            first = dup.row(0, named=True)
            raise InputError(
                f"annotator {name} judged query {first['query_id']!r}, doc {first['doc_id']!r} "
                f"{first['len']} times; agreement compares one grade per pair",
                field="grade",
            )
    joined = a.select("query_id", "doc_id", pl.col("grade").alias("grade_a")).join(
        b.select("query_id", "doc_id", pl.col("grade").alias("grade_b")), on=["query_id", "doc_id"], how="inner"
    )
    if joined.height == 0:
        raise InputError(
            f"no shared pairs: the two sides judged no (query, document) pair in common "
            f"({a.height} and {b.height} judgments)",
            field="pairs",
        )
    grades_a = joined["grade_a"].to_list()
    grades_b = joined["grade_b"].to_list()
    if scale is not None:
        categories = tuple(sorted(set(int(g) for g in scale)))
        outside = sorted(set(grades_a + grades_b) - set(categories))
        if outside:
            raise InputError(f"grades {outside} are not on the scale {list(categories)}", field="grade")
    else:
        categories = tuple(sorted(set(grades_a) | set(grades_b)))
    matrix = confusion_matrix(grades_a, grades_b, categories)
    raw, kappa, weighted = kappas(matrix, categories)
    return Agreement(
        joined.height,
        categories,
        matrix,
        raw,
        kappa,
        weighted,
        only_a=a.height - joined.height,
        only_b=b.height - joined.height,
    )


def render(result: Agreement, label_a: str, label_b: str) -> str:
    """The report as text: counts, the three figures, the confusion matrix."""

    def number(value: float | None) -> str:
        return "undefined (all judgments in one grade)" if value is None else f"{value:.4f}"

    agree = int(np.trace(result.confusion))
    lines = [
        f"A: {label_a}",
        f"B: {label_b}",
        f"shared pairs: {result.shared_pairs} (judged by A only: {result.only_a}, by B only: {result.only_b})",
        f"linear weighted kappa: {number(result.weighted_kappa)}",
        f"unweighted kappa:      {number(result.kappa)}",
        f"raw agreement:         {result.raw:.4f} ({agree}/{result.shared_pairs})",
        "confusion matrix (rows: A's grade, columns: B's grade):",
    ]
    width = max(5, *(len(str(v)) + 1 for v in result.confusion.ravel()), *(len(str(c)) + 1 for c in result.categories))
    lines.append("A\\B".rjust(width) + "".join(str(c).rjust(width) for c in result.categories))
    for grade, row in zip(result.categories, result.confusion):
        lines.append(str(grade).rjust(width) + "".join(str(int(v)).rjust(width) for v in row))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- annotators from files


def load_annotated_judgments(path: Path) -> tuple[pl.DataFrame, dict[int, str] | None]:
    """(judgments, scale or None) of a set directory or a judgments file, validated."""
    if path.is_dir() or (path.name == jmod.JUDGMENTS_NAME and (path.parent / jmod.MANIFEST_NAME).exists()):
        judgment_set = jmod.load_version(path if path.is_dir() else path.parent)
        return judgment_set.judgments, judgment_set.manifest.scale
    return jmod.read_judgments_file(path), None


def annotator_judgments(judgments: pl.DataFrame, name: str | None, source: Path) -> tuple[pl.DataFrame, str]:
    """One annotator's ``query_id, doc_id, grade`` and name (``None``: the only annotator there is)."""
    present = sorted(set(judgments["annotator"].to_list()))
    if name is None:
        if len(present) != 1:
            raise InputError(
                f"holds {len(present)} annotators ({', '.join(present)}); name the one to compare with --annotators",
                file=str(source),
                field="annotator",
            )
        name = present[0]
    elif name not in present:
        raise InputError(
            f"no judgments by annotator {name!r} (present: {', '.join(present) or 'none'})",
            file=str(source),
            field="annotator",
        )
    return judgments.filter(pl.col("annotator") == name).select("query_id", "doc_id", "grade"), name


@dataclass(frozen=True)
class AnnotatorAgreement:
    """The agreement of two annotators and how each is labelled: ``name (path)``."""

    result: Agreement
    label_a: str
    label_b: str


def annotator_agreement(paths: Sequence[Path], names: Sequence[str | None] = (None, None)) -> AnnotatorAgreement:
    """Agreement between annotators ``names`` (A, B) of one path, or of two paths (one annotator each).

    With one path and no names, its two annotators; with two paths, a name left out is that
    side's only annotator. The categories are the declared scale's when a set is given.
    """
    names = list(names)
    if len(paths) == 1:
        judgments, scale = load_annotated_judgments(paths[0])
        if names == [None, None]:
            present = sorted(set(judgments["annotator"].to_list()))
            if len(present) != 2:
                raise InputError(
                    f"holds {len(present)} annotators ({', '.join(present)}); name two with --annotators NAME_A,NAME_B",
                    file=str(paths[0]),
                    field="annotator",
                )
            names = list(present)
        if names[0] == names[1]:
            raise InputError("compare two different annotators", file="<command line>", field="annotators")
        side_a, label_a = annotator_judgments(judgments, names[0], paths[0])
        side_b, label_b = annotator_judgments(judgments, names[1], paths[0])
        scale_used = scale
        sources = (paths[0], paths[0])
    else:
        judgments_a, scale_a = load_annotated_judgments(paths[0])
        judgments_b, scale_b = load_annotated_judgments(paths[1])
        if scale_a is not None and scale_b is not None and sorted(scale_a) != sorted(scale_b):
            raise InputError(
                f"the two sets declare different scales: {sorted(scale_a)} and {sorted(scale_b)}",
                file=str(paths[1]),
                field="scale",
            )
        side_a, label_a = annotator_judgments(judgments_a, names[0], paths[0])
        side_b, label_b = annotator_judgments(judgments_b, names[1], paths[1])
        scale_used = scale_a if scale_a is not None else scale_b
        sources = (paths[0], paths[1])
    result = agreement(side_a, side_b, sorted(scale_used) if scale_used is not None else None)
    return AnnotatorAgreement(result, f"{label_a} ({sources[0]})", f"{label_b} ({sources[1]})")
