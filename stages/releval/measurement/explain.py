"""Why one configuration beats another, query by query: what diffir shows for two TREC runs.

For two configurations A and B, :func:`explain_pairs` finds the scored queries where their metric
(the contract's primary) differs most, and for each gives the two top-k lists side by side: every
document at its rank, with its grade (None: unjudged, which the metric counts as grade 0), its
title, and the passage that ranked it, its best chunk in the run. Runs are chunk-level
(:mod:`releval.retrieval.runs`); the metric engine collapses them to documents, each at its best
chunk's rank, and the lists here are ordered as it orders them (score, then the contract's tie
rule). A chunk's passage is its body, ``doc.text[start:end]`` of the chunking's chunk file
(:data:`releval.tables.CHUNKS`; the chunk's own text, the title dropped, when the document is not
at hand); a run at document level (an external run) shows the document's opening.

Only scored queries take part: the per-query scores hold none of the sealed holdout, and a query
asked for outside them is refused. :func:`configuration_run` finds a configuration's run and its
chunk file from what the pipeline recorded (a run folder's run.json: its config_id and chunking),
never from a folder name. The texts are :mod:`releval.reporting.explain_text` (the command line)
and the report page's (:mod:`releval.reporting.report_md`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.measurement import stats
from releval.retrieval import runs

DEPTH = 10  # documents shown per list
QUERIES = 5  # queries shown per pair
PASSAGE_CHARS = 300  # a passage is cut to about this many characters, at a word


@dataclass(frozen=True)
class Configuration:
    """One side: its per-query scores on the metric (scored queries only), its run (chunk level, or
    document level without chunk_id) and the chunk file its passages come from (None: none)."""

    name: str
    scores: Mapping[str, float]
    run: pl.DataFrame
    chunks: Path | None


@dataclass(frozen=True)
class ShownDocument:
    rank: int  # in this configuration's document ranking
    doc_id: str
    title: str
    grade: int | None  # None: unjudged (the metric counts it as grade 0)
    chunk_id: str | None  # the best chunk that ranked it; None: a run at document level
    passage: str  # the chunk's body (or the document's opening), whitespace folded, cut
    other_rank: int | None  # its rank in the other configuration's list; None: not in its top k


@dataclass(frozen=True)
class QueryContrast:
    query_id: str
    text: str
    a: float  # the metric's value for A on this query
    b: float
    relevant: int  # judged documents at the relevance threshold
    top_a: tuple[ShownDocument, ...]
    top_b: tuple[ShownDocument, ...]

    @property
    def difference(self) -> float:
        return self.b - self.a


@dataclass(frozen=True)
class Explanation:
    """A against B on ``metric``: the per-query record over the scored queries both have, and the
    queries where they differ most (or the one asked for), each with both top-``depth`` lists."""

    a: str
    b: str
    metric: str
    queries: int  # scored queries both sides have
    mean_a: float
    mean_b: float
    wins: int  # queries where B scores higher than A
    losses: int
    ties: int
    depth: int
    asked: str | None  # the query asked for; None: the largest differences
    contrasts: tuple[QueryContrast, ...]


def differing_queries(
    scores_a: Mapping[str, float], scores_b: Mapping[str, float], n: int, query: str | None = None
) -> list[str]:
    """The ``n`` queries both sides scored with the largest ``|b − a|`` (ties by query id), queries
    without a difference left out; ``query`` alone when given (refused when either side lacks it)."""
    if query is not None:
        missing = [name for name, scores in (("A", scores_a), ("B", scores_b)) if query not in scores]
        if missing:
            raise InputError(
                f"query {query!r} is not among the scored queries of {' and '.join(missing)} "
                "(the sealed holdout is never shown)",
                field="--query",
            )
        return [query]
    if n < 1:
        raise InputError(f"must be >= 1, got {n}", field="--n")
    shared = sorted(set(scores_a) & set(scores_b))
    gaps = [(abs(scores_b[q] - scores_a[q]), q) for q in shared]
    return [q for gap, q in sorted(gaps, key=lambda item: (-item[0], item[1])) if gap > 0][:n]


def ranked_documents(run: pl.DataFrame, query_id: str, depth: int, ties: str = "docid-asc") -> pl.DataFrame:
    """The query's top ``depth`` documents as the metric engine ranks them: each document at its
    best chunk (chunk_id kept when the run has it), by score, ties by doc_id (descending under
    trec_eval's rule, ascending otherwise)."""
    rows = run.filter(pl.col("query_id") == query_id)
    if "chunk_id" in rows.columns:  # as runs.collapse_to_documents collapses, keeping the chunk
        rows = rows.sort("rank").unique(subset=["doc_id"], keep="first", maintain_order=True)
    else:
        rows = rows.with_columns(pl.lit(None, dtype=pl.Utf8).alias("chunk_id"))
    return (
        rows.sort(["score", "doc_id"], descending=[True, ties == "trec_eval"])
        .head(depth)
        .select("doc_id", "chunk_id", "score")
    )


def explain_pairs(
    pairs: Sequence[tuple[Configuration, Configuration]],
    qrels: pl.DataFrame,
    queries: pl.DataFrame | None,
    docs: pl.DataFrame | None,
    metric: str,
    *,
    n: int = QUERIES,
    depth: int = DEPTH,
    query: str | None = None,
    ties: str = "docid-asc",
    rel_threshold: int = 1,
    passage_chars: int = PASSAGE_CHARS,
) -> list[Explanation]:
    """Each pair (A, B) explained (:class:`Explanation`); every chunk file is read once, for the
    chunks shown. ``qrels``: the scored queries' judgments (query_id, doc_id, grade);
    ``queries``: their texts (None: none shown); ``docs``: doc_id, title, text (None or a missing
    document: the id stands for the title)."""
    if depth < 1:
        raise InputError(f"must be >= 1, got {depth}", field="--depth")
    grades = _grades(qrels)
    texts = {} if queries is None else dict(queries.select(pl.col("query_id").cast(pl.Utf8), "text").iter_rows())
    explained = [_explain(a, b, grades, texts, metric, n, depth, query, ties, rel_threshold) for a, b in pairs]
    wanted: dict[Path | None, set[str]] = {}
    for (a, b), explanation in zip(pairs, explained):
        for side, contrast_side in ((a, "top_a"), (b, "top_b")):
            for contrast in explanation.contrasts:
                wanted.setdefault(side.chunks, set()).update(
                    d.chunk_id for d in getattr(contrast, contrast_side) if d.chunk_id
                )
    doc_ids = {d.doc_id for e in explained for c in e.contrasts for d in (*c.top_a, *c.top_b)}
    documents = _documents(docs, doc_ids)
    bodies = {path: _chunk_bodies(path, ids, documents) for path, ids in wanted.items() if path is not None}
    return [
        replace(
            explanation,
            contrasts=tuple(
                replace(
                    contrast,
                    top_a=_with_passages(contrast.top_a, bodies.get(a.chunks, {}), documents, passage_chars),
                    top_b=_with_passages(contrast.top_b, bodies.get(b.chunks, {}), documents, passage_chars),
                )
                for contrast in explanation.contrasts
            ),
        )
        for (a, b), explanation in zip(pairs, explained)
    ]


def _explain(
    a: Configuration,
    b: Configuration,
    grades: Mapping[str, Mapping[str, int]],
    texts: Mapping[str, str],
    metric: str,
    n: int,
    depth: int,
    query: str | None,
    ties: str,
    rel_threshold: int,
) -> Explanation:
    shared = sorted(set(a.scores) & set(b.scores))
    if not shared:
        raise InputError(f"{a.name} and {b.name} share no scored query", field=metric)
    values_a = np.array([a.scores[q] for q in shared], dtype=np.float64)
    values_b = np.array([b.scores[q] for q in shared], dtype=np.float64)
    wins, losses, tied = stats.win_loss_tie(values_a, values_b)
    contrasts = []
    for query_id in differing_queries(a.scores, b.scores, n, query):
        judged = grades.get(query_id, {})
        top_a = ranked_documents(a.run, query_id, depth, ties)
        top_b = ranked_documents(b.run, query_id, depth, ties)
        contrasts.append(
            QueryContrast(
                query_id=query_id,
                text=str(texts.get(query_id) or ""),
                a=float(a.scores[query_id]),
                b=float(b.scores[query_id]),
                relevant=sum(1 for grade in judged.values() if grade >= rel_threshold),
                top_a=_shown(top_a, top_b, judged),
                top_b=_shown(top_b, top_a, judged),
            )
        )
    return Explanation(
        a=a.name,
        b=b.name,
        metric=metric,
        queries=len(shared),
        mean_a=float(values_a.mean()),
        mean_b=float(values_b.mean()),
        wins=wins,
        losses=losses,
        ties=tied,
        depth=depth,
        asked=query,
        contrasts=tuple(contrasts),
    )


def _shown(top: pl.DataFrame, other: pl.DataFrame, judged: Mapping[str, int]) -> tuple[ShownDocument, ...]:
    other_ranks = {doc_id: rank for rank, doc_id in enumerate(other["doc_id"].to_list(), start=1)}
    return tuple(
        ShownDocument(
            rank=rank,
            doc_id=doc_id,
            title="",
            grade=judged.get(doc_id),
            chunk_id=chunk_id,
            passage="",
            other_rank=other_ranks.get(doc_id),
        )
        for rank, (doc_id, chunk_id) in enumerate(top.select("doc_id", "chunk_id").iter_rows(), start=1)
    )


def _grades(qrels: pl.DataFrame) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for query_id, doc_id, grade in qrels.select(
        pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8), "grade"
    ).iter_rows():
        found.setdefault(query_id, {})[doc_id] = int(grade)
    return found


def _documents(docs: pl.DataFrame | None, doc_ids: set[str]) -> dict[str, tuple[str, str]]:
    """doc_id -> (title, text) of the documents shown."""
    if docs is None or not doc_ids:
        return {}
    columns = [c for c in ("doc_id", "title", "text") if c in docs.columns]
    rows = docs.select(columns).filter(pl.col("doc_id").cast(pl.Utf8).is_in(sorted(doc_ids)))
    return {
        str(row["doc_id"]): (str(row.get("title") or ""), str(row.get("text") or ""))
        for row in rows.iter_rows(named=True)
    }


def _chunk_bodies(path: Path, chunk_ids: set[str], documents: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """chunk_id -> the chunk's body, for the ``chunk_ids`` in the chunk file at ``path``: the
    document's text at the chunk's offsets, else the chunk's text without its leading title."""
    if not chunk_ids:
        return {}
    if not path.exists():
        raise InputError("missing: the chunk file of a run's chunking; run `dvc repro` or `dvc pull`", file=str(path))
    rows = (
        pl.scan_parquet(path)
        .select("chunk_id", "doc_id", "start", "end", "text")
        .filter(pl.col("chunk_id").is_in(sorted(chunk_ids)))
        .collect()
    )
    bodies = {}
    for chunk_id, doc_id, start, end, text in rows.iter_rows():
        title, document = documents.get(doc_id, ("", ""))
        if document and 0 <= start <= end <= len(document):
            bodies[chunk_id] = document[start:end]
        else:
            bodies[chunk_id] = text[len(title) + 1 :] if title and text.startswith(title + " ") else text
    return bodies


def _cut(text: str, limit: int) -> str:
    """``text`` with its whitespace folded, cut at a word to about ``limit`` characters (… marks a cut)."""
    folded = " ".join(text.split())
    if len(folded) <= limit:
        return folded
    cut = folded[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + " …"


def _with_passages(
    shown: tuple[ShownDocument, ...],
    bodies: Mapping[str, str],
    documents: Mapping[str, tuple[str, str]],
    limit: int,
) -> tuple[ShownDocument, ...]:
    out = []
    for document in shown:
        title, text = documents.get(document.doc_id, ("", ""))
        body = bodies.get(document.chunk_id) if document.chunk_id else None
        out.append(replace(document, title=title, passage=_cut(text if body is None else body, limit)))
    return tuple(out)


# --------------------------------------------------------------------------- finding a configuration's run


def configuration_run(
    run_dirs: Sequence[Path], config_id: str, chunks_dir: str | Path
) -> tuple[pl.DataFrame, Path | None, Path]:
    """The run of ``config_id`` among ``run_dirs`` (the folder whose run.json names it), its chunk
    file, ``chunks_dir``/<run.json's chunking>.parquet (None for a run at document level, or a
    chunking without a chunk file: external runs are ranked documents), and the folder."""
    for run_dir in run_dirs:
        meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        if meta.get("config_id") == config_id:
            return (*run_from_folder(run_dir, chunks_dir), run_dir)
    raise InputError(f"no run with config_id {config_id!r} below the runs root; run `dvc pull` or `dvc repro`")


def run_from_folder(run_dir: str | Path, chunks_dir: str | Path) -> tuple[pl.DataFrame, Path | None]:
    """A run folder's run (ids as text) and the chunk file of its chunking (see :func:`configuration_run`)."""
    run, meta = runs.read_run(run_dir)
    run = run.with_columns(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8))
    chunking = meta.get("chunking")
    chunk_file = Path(chunks_dir) / f"{chunking}.parquet" if chunking else None
    if chunk_file is None or not chunk_file.exists() or "chunk_id" not in run.columns:
        return run, None
    return run, chunk_file
