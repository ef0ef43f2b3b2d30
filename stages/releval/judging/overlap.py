"""How much a query's words give its answer away: word overlap with the judged documents.

A query that copies a sentence of its answer measures string matching, not retrieval; a
"paraphrase" slice whose queries share most words with their answers is not one. For each query
with a relevant judgment:

``overlap``  the share of its distinct words found in its best judged document (the highest
             aggregated grade; among equals, the highest overlap);
``run``      the longest run of consecutive query words found verbatim in any document judged
             at or above ``answer_grade`` (default 2): 6 or more is a copied sentence fragment.

Words are lower-cased runs of letters, digits and underscores; a document's words include its
title.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

WORD = re.compile(r"[a-z0-9_]+")
COPIED_RUN = 6  # consecutive shared words that make a copied fragment


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def longest_run(query: Sequence[str], document: Sequence[str]) -> int:
    """The longest run of consecutive ``query`` words that occurs contiguously in ``document``."""
    text = " " + " ".join(document) + " "
    best = 0
    for start in range(len(query)):
        end = start + best + 1
        while end <= len(query) and " " + " ".join(query[start:end]) + " " in text:
            best = end - start
            end += 1
    return best


@dataclass(frozen=True)
class QueryOverlap:
    query_id: str
    slice: str
    overlap: float
    run: int


def query_overlaps(
    queries: pl.DataFrame,
    qrels: pl.DataFrame,
    documents: Mapping[str, str],
    slices: Iterable[str],
    answer_grade: int = 2,
) -> list[QueryOverlap]:
    """One row per query with a relevant (grade >= 1) judgment; ``slice`` is its first slice in ``slices``."""
    order = list(slices)
    doc_words = {doc_id: words(text) for doc_id, text in documents.items()}
    grades: dict[str, dict[str, int]] = {}
    for query_id, doc_id, grade in qrels.select("query_id", "doc_id", "grade").iter_rows():
        grades.setdefault(query_id, {})[doc_id] = grade
    found = []
    for query_id, text, tags in queries.select("query_id", "text", "slices").iter_rows():
        judged = grades.get(query_id, {})
        top = max(judged.values(), default=0)
        query_words = words(text)
        if top < 1 or not query_words:
            continue
        distinct = set(query_words)
        overlap = max(len(distinct & set(doc_words[d])) / len(distinct) for d, g in judged.items() if g == top)
        run = max((longest_run(query_words, doc_words[d]) for d, g in judged.items() if g >= answer_grade), default=0)
        kind = next((s for s in order if s in (tags or [])), "other")
        found.append(QueryOverlap(query_id, kind, overlap, run))
    return found


def overlap_markdown(rows: Sequence[QueryOverlap], slices: Iterable[str]) -> str:
    """The per-slice table: queries, mean and median overlap, longest verbatim run."""
    lines = [
        "| slice | queries | mean overlap | median overlap | longest verbatim run |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in slices:
        part = [r for r in rows if r.slice == kind]
        if part:
            values = [r.overlap for r in part]
            mean, median, run = statistics.mean(values), statistics.median(values), max(r.run for r in part)
            lines.append(f"| {kind} | {len(part)} | {mean:.2f} | {median:.2f} | {run} |")
    return "\n".join(lines) + "\n"
