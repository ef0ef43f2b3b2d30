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

Evidence spans (:func:`span_agreement`), beside kappa, on the shared pairs: a pair's characters for
one annotator are the union of his spans (each placed in the document's text: anchors located, offsets
as given); on a pair both gave spans for, with A and B those sets of characters,

* the pair's character-overlap F1  2 |A ∩ B| / (|A| + |B|)  (precision and recall of B's characters
  against A's; symmetric), 0 when they share no character;
* micro-averaged F1  2 Σ|A ∩ B| / Σ(|A| + |B|) over those pairs (long passages weigh more), and the
  mean of the pairs' F1 (each pair one vote).

Shared pairs only one annotator gave spans for are counted (``only_a``, ``only_b``), not scored: the
rubric's question there is whether the pair takes a span at all, which F1 cannot say.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.inputs.schemas import SpanError, evidence_field, locate_span
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


# --------------------------------------------------------------------------- evidence spans


@dataclass(frozen=True)
class PairSpans:
    """One shared pair both annotators gave spans for: how many characters each marked, how many both."""

    query_id: str
    doc_id: str
    chars_a: int
    chars_b: int
    overlap: int

    @property
    def f1(self) -> float:
        return 2 * self.overlap / (self.chars_a + self.chars_b)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "doc_id": self.doc_id,
            "chars_a": self.chars_a,
            "chars_b": self.chars_b,
            "overlap": self.overlap,
            "f1": self.f1,
        }


@dataclass(frozen=True)
class SpanAgreement:
    """Character-overlap agreement of two annotators' evidence spans on their shared pairs."""

    pairs: tuple[PairSpans, ...]  # the shared pairs both gave spans for, by query and doc
    only_a: int  # shared pairs only A gave spans for
    only_b: int
    neither: int  # shared pairs without spans

    @property
    def micro_f1(self) -> float | None:
        marked = sum(p.chars_a + p.chars_b for p in self.pairs)
        return 2 * sum(p.overlap for p in self.pairs) / marked if marked else None

    @property
    def mean_f1(self) -> float | None:
        return sum(p.f1 for p in self.pairs) / len(self.pairs) if self.pairs else None

    @property
    def disjoint(self) -> list[PairSpans]:
        """The pairs whose spans share no character (the rubric has them adjudicated)."""
        return [p for p in self.pairs if p.overlap == 0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs_both": len(self.pairs),
            "only_a": self.only_a,
            "only_b": self.only_b,
            "neither": self.neither,
            "micro_f1": self.micro_f1,
            "mean_f1": self.mean_f1,
            "overlap_chars": sum(p.overlap for p in self.pairs),
            "chars_a": sum(p.chars_a for p in self.pairs),
            "chars_b": sum(p.chars_b for p in self.pairs),
            "no_shared_character": len(self.disjoint),
            "pairs": [p.to_dict() for p in self.pairs],
        }


def merged_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open character ranges as their union: sorted, disjoint, overlapping or touching ones joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def common_chars(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> int:
    """How many characters two unions of ranges (:func:`merged_ranges`) share."""
    i = j = shared = 0
    while i < len(a) and j < len(b):
        shared += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return shared


TextOf = Callable[[str], str]  # doc_id -> the document's text (without its title), for anchors


def pair_ranges(row: Mapping[str, Any], text_of: TextOf | None) -> list[tuple[int, int]]:
    """One judgment's spans as character ranges: its ``evidence`` (anchors located in the text
    ``text_of`` gives; offsets as given, checked against it when there is one), or the older
    ``span_start``/``span_end`` pair; [] when it has none. A span that cannot be placed is an
    InputError naming the pair and the span's field."""
    spans = list(row.get("evidence") or [])
    if not spans and row.get("span_start") is not None and row.get("span_end") is not None:
        spans = [{"start": row["span_start"], "end": row["span_end"]}]
    if not spans:
        return []
    quoted = any(span.get("quote") is not None for span in spans)
    text = text_of(row["doc_id"]) if text_of is not None else None
    if quoted and text is None:
        raise InputError(
            "evidence anchors are placed in the documents' texts: name the corpus with --corpus FILE",
            field=evidence_field(0),
        )
    ranges = []
    for index, span in enumerate(spans):
        if text is None:
            ranges.append((int(span["start"]), int(span["end"])))
            continue
        try:
            ranges.append(locate_span(text, span))
        except SpanError as exc:
            raise InputError(
                f"query {row['query_id']!r}, doc {row['doc_id']!r}: {exc.message}", field=evidence_field(index, exc.key)
            ) from None
    return ranges


def span_agreement(a: pl.DataFrame, b: pl.DataFrame, text_of: TextOf | None = None) -> SpanAgreement:
    """Span agreement of two annotators' judgments (query_id, doc_id and ``evidence``, optionally the
    older ``span_start``/``span_end``; one row per pair) on the pairs both judged. ``text_of``:
    doc_id -> text, needed where a span is an anchor (asked only for the documents that have one)."""
    sides = []
    for table in (a, b):
        columns = [c for c in ("evidence", "span_start", "span_end") if c in table.columns]
        sides.append(
            {
                (r["query_id"], r["doc_id"]): r
                for r in table.select("query_id", "doc_id", *columns).iter_rows(named=True)
            }
        )
    pairs, only_a, only_b, neither = [], 0, 0, 0
    for key in sorted(set(sides[0]) & set(sides[1])):
        ranges_a = merged_ranges(pair_ranges(sides[0][key], text_of))
        ranges_b = merged_ranges(pair_ranges(sides[1][key], text_of))
        if ranges_a and ranges_b:
            count = lambda ranges: sum(end - start for start, end in ranges)  # noqa: E731
            pairs.append(PairSpans(*key, count(ranges_a), count(ranges_b), common_chars(ranges_a, ranges_b)))
        elif ranges_a:
            only_a += 1
        elif ranges_b:
            only_b += 1
        else:
            neither += 1
    return SpanAgreement(tuple(pairs), only_a, only_b, neither)


def render_spans(result: SpanAgreement) -> str:
    """The span agreement as text: counts, the two averages, then every pair."""

    def number(value: float | None) -> str:
        return "undefined (no pair has spans from both)" if value is None else f"{value:.4f}"

    shared = len(result.pairs) + result.only_a + result.only_b + result.neither
    lines = [
        f"evidence spans: {len(result.pairs)} of the {shared} shared pairs have spans from both "
        f"(from A only: {result.only_a}, from B only: {result.only_b}, from neither: {result.neither})",
        f"character-overlap F1, micro-averaged: {number(result.micro_f1)} ("
        f"{sum(p.overlap for p in result.pairs)} characters in common; A {sum(p.chars_a for p in result.pairs)}, "
        f"B {sum(p.chars_b for p in result.pairs)})",
        f"character-overlap F1, mean of pairs:  {number(result.mean_f1)}",
        f"pairs sharing no character: {len(result.disjoint)}",
    ]
    if result.pairs:
        rows = [("query", "doc", "A chars", "B chars", "common", "F1")]
        rows += [
            (p.query_id, p.doc_id, str(p.chars_a), str(p.chars_b), str(p.overlap), f"{p.f1:.4f}") for p in result.pairs
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(6)]
        lines.append("per pair:")
        for row in rows:
            cells = [cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))]
            lines.append("  " + "  ".join(cells))
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
    """The agreement of two annotators and how each is labelled: ``name (path)``; ``spans``: their
    evidence spans' agreement, when either gave a span on a shared pair (else None)."""

    result: Agreement
    label_a: str
    label_b: str
    spans: SpanAgreement | None = None


def annotator_agreement(
    paths: Sequence[Path],
    names: Sequence[str | None] = (None, None),
    corpus: str | Path | None = None,
    corpus_format: str | None = None,
) -> AnnotatorAgreement:
    """Agreement between annotators ``names`` (A, B) of one path, or of two paths (one annotator each).

    With one path and no names, its two annotators; with two paths, a name left out is that
    side's only annotator. The categories are the declared scale's when a set is given. Their
    evidence spans are compared too (:func:`span_agreement`); anchors are placed in the texts of
    ``corpus``, else of the corpus of the first set's dataset (read only when there is an anchor).
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
        spans_a, spans_b = (judgments.filter(pl.col("annotator") == n) for n in (label_a, label_b))
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
        spans_a = judgments_a.filter(pl.col("annotator") == label_a)
        spans_b = judgments_b.filter(pl.col("annotator") == label_b)
        scale_used = scale_a if scale_a is not None else scale_b
        sources = (paths[0], paths[1])
    result = agreement(side_a, side_b, sorted(scale_used) if scale_used is not None else None)
    spans = span_agreement(spans_a, spans_b, corpus_texts(paths, corpus, corpus_format))
    given = spans.pairs or spans.only_a or spans.only_b
    return AnnotatorAgreement(
        result, f"{label_a} ({sources[0]})", f"{label_b} ({sources[1]})", spans if given else None
    )


def corpus_texts(paths: Sequence[Path], corpus: str | Path | None, corpus_format: str | None) -> TextOf:
    """doc_id -> text of ``corpus`` (else of the corpus of the first set's dataset), read at the first
    call: only judgments with anchors need it."""
    texts: dict[str, Mapping[str, str]] = {}
    sets = [
        folder for folder in (p if p.is_dir() else p.parent for p in paths) if (folder / jmod.MANIFEST_NAME).exists()
    ]

    def text_of(doc_id: str) -> str:
        if not texts:
            from releval.inputs.corpus import corpus_format_of, read_docs
            from releval.inputs.datasets import dataset_of_set

            if corpus is not None:
                path, fmt = Path(corpus), corpus_format or corpus_format_of(Path(corpus))
            else:
                found = dataset_of_set(sets[0]).dataset if sets else None
                if found is None:
                    raise InputError(
                        "evidence anchors are placed in the documents' texts, and no dataset of these judgments "
                        "names a corpus: name it with --corpus FILE",
                        file="<command line>",
                        field="corpus",
                    )
                path, fmt = found.corpus, found.corpus_format
            texts["docs"] = jmod.doc_texts(read_docs(path, fmt))
        try:
            return texts["docs"][doc_id]
        except KeyError:
            raise InputError(
                f"document {doc_id!r} is not in the corpus {corpus or 'of the set'}", field="doc_id"
            ) from None

    return text_of
