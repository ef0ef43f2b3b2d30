"""The one scoring path: a stored run → documents → the scored queries → metrics under a contract.

The score stage, rescore (the archive), audit, compare, the report and pool all go through
these functions; nothing else collapses chunks to documents, restricts a run to a split or
rebuilds a :class:`~releval.measurement.metrics.Contract` from its recorded form. The score
stage's records (metrics.json, lineage.json, per_query.parquet) are assembled here too.

Incomplete judgments (unjudged documents count as grade 0) are recorded three ways beside each
number: judged@k, read against the contract's coverage terms (:func:`coverage_terms`); the
condensed-list value of every metric (:func:`condensed_scores`: the metric on the run with its
unjudged documents removed, Sakai, "Alternatives to Bpref", SIGIR 2007), per query as the
column ``<metric>'`` of per_query.parquet and per configuration in metrics.json's ``condensed``
block; and the recall cutoffs too deep for the corpus to separate systems (:func:`saturation`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from releval import io
from releval.config import section
from releval.errors import InputError
from releval.judging.completeness import CONTRACT_KEY as CONTRACT_COMPLETENESS
from releval.judging.completeness import POOLED, POSITIVES_ONLY, POSITIVES_ONLY_CAVEAT, SAMPLE_CONTRACT_KEY, SAMPLED
from releval.judging.completeness import Completeness, metrics_for
from releval.judging.sample import read_set_design
from releval.measurement import evidence, holdout, operations
from releval.measurement.inferred import infer_scored, inferred_metrics
from releval.measurement.metrics import (
    FIXED_TERMS,
    SATURATION_SHARE,
    Contract,
    Evaluation,
    condense,
    contract_from_params,
    evaluate,
    parse_metric,
    saturated_cutoff,
)
from releval.retrieval import runs
from releval.stage import warn

JUDGED_WARNING = 0.5  # judged@k below this: the number leans on unjudged documents counted as 0
CONDENSED_MARK = "'"  # ndcg@10' is nDCG@10 on the condensed list (Sakai's notation)
COVERAGE_KEY = "coverage"  # params.yaml metric.coverage, metrics.json contract.coverage
POOL_MISSING = "releval pool --missing"  # the command that lists the judging debt (unjudged top documents)

# metrics.json under a sampled set: the contract's inferred metrics (beside the engine's ``metrics``), and each
# configuration's inferred figures (means with their intervals, the unjudged share).
INFERRED_KEY = "inferred"


def contract_from_record(record: Mapping[str, Any], **overrides: Any) -> Contract:
    """The engine's contract from a recorded one (metrics.json's ``contract``, a card's).

    Recorded context (dataset, judgments, split, metrics, ...) is not an engine term and is
    ignored; fixed terms are checked; ``overrides`` replace terms (e.g. ``rel_threshold``).
    """
    names = {field.name for field in dataclasses.fields(Contract)} | set(FIXED_TERMS)
    return Contract.from_dict({**{k: v for k, v in record.items() if k in names}, **overrides})


def document_run(chunk_run: pl.DataFrame, query_ids: Iterable[str] | None = None) -> pl.DataFrame:
    """A chunk-level run at the judged unit: each document at its best chunk's rank and score,
    restricted to ``query_ids`` when given. Columns: query_id, doc_id, score, rank."""
    doc_run = runs.collapse_to_documents(chunk_run)
    return doc_run if query_ids is None else holdout.restrict(doc_run, query_ids)


@dataclass(frozen=True)
class ScoredQueries:
    """What a scoring run evaluates against: the scored queries, their judgments, their slices."""

    ids: list[str]
    qrels: pl.DataFrame
    slices: dict[str, list[str]] | None


def scored_queries(queries: pl.DataFrame, qrels: pl.DataFrame, query_ids: Iterable[str] | None = None) -> ScoredQueries:
    """The scored queries (all of ``queries``, or those of ``query_ids``), their qrels and slices."""
    if query_ids is not None:
        queries = holdout.restrict(queries, query_ids)
    ids = queries["query_id"].cast(pl.Utf8).to_list()
    slices = None
    if "slices" in queries.columns:
        slices = {
            q: list(s)
            for q, s in queries.select(pl.col("query_id").cast(pl.Utf8), "slices").iter_rows()
            if s is not None and len(s)
        }
    return ScoredQueries(ids=ids, qrels=holdout.restrict(qrels, ids), slices=slices)


def score(
    doc_run: pl.DataFrame,
    scored: ScoredQueries,
    metrics: Sequence[str],
    contract: Contract,
    *,
    run_source: str = "run table",
    with_slices: bool = True,
) -> Evaluation:
    """Evaluate a document-level run over the scored queries (per slice too, when they have slices)."""
    return score_table(
        holdout.restrict(doc_run, scored.ids),
        scored.qrels,
        metrics,
        contract,
        slices=scored.slices if with_slices else None,
        run_source=run_source,
    )


def score_table(
    doc_run: pl.DataFrame,
    qrels: pl.DataFrame,
    metrics: Sequence[str],
    contract: Contract,
    *,
    slices: Mapping[str, Sequence[str]] | None = None,
    run_source: str = "run table",
) -> Evaluation:
    """Evaluate a document-level run against ``qrels`` as they are (no query restriction)."""
    return evaluate(
        qrels, doc_run.select("query_id", "doc_id", "score"), metrics, contract, slices=slices, run_source=run_source
    )


def score_recorded(
    doc_run: pl.DataFrame,
    qrels: pl.DataFrame,
    contract: Mapping[str, Any],
    metrics: Sequence[str] | None = None,
    **overrides: Any,
) -> Evaluation:
    """Evaluate a document-level run under a recorded ``contract`` (metrics.json's; fields in
    ``overrides`` replaced), on ``metrics`` (default: the metrics the contract lists)."""
    metrics = list(metrics if metrics is not None else contract.get("metrics") or [])
    if not metrics:
        raise InputError("the contract lists no metrics", field="metrics")
    return score_table(doc_run, qrels, metrics, contract_from_record(contract, **overrides))


def document_ranks(run: pl.DataFrame, ties: str = "docid-asc") -> pl.DataFrame:
    """query_id, doc_id, doc_rank (1 = best) from a run, ordered as the metric engine orders it.

    A document scores its best row (its best chunk, as after collapsing); documents are ordered
    by score descending, then doc_id ascending (``ties="trec_eval"``: descending, scores
    compared in single precision), so ranks count documents, not chunks.
    """
    docs = (
        run.select(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8), pl.col("score").cast(pl.Float64))
        .group_by("query_id", "doc_id")
        .agg(pl.col("score").max())
    )
    if ties == "trec_eval":
        docs = docs.with_columns(pl.col("score").cast(pl.Float32))
    docs = docs.sort(["query_id", "score", "doc_id"], descending=[False, True, ties == "trec_eval"])
    return docs.select(
        "query_id", "doc_id", pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("doc_rank")
    )


# --------------------------------------------------------------------------- incomplete judgments

# Coverage terms (metric.coverage in params.yaml, recorded in the contract): both sides'
# judged@k at least MIN_JUDGED, and at most MAX_JUDGED_GAP apart.
MIN_JUDGED = 0.9
MAX_JUDGED_GAP = 0.05
# Mean judged fractions are sums of ratios: a side at exactly the threshold may land a rounding
# error beside it. Differences within this are not differences.
_COVERAGE_ROUNDING = 1e-9


@dataclass(frozen=True)
class CoverageTerms:
    """When a comparison's sides are judged deeply and evenly enough for a verdict.

    Contract terms (``metric.coverage`` in params.yaml, recorded in metrics.json's contract and
    the card): both sides' mean judged@k at least ``min_judged`` and at most ``max_judged_gap``
    apart, k being the cutoff of the primary metric.
    """

    min_judged: float = MIN_JUDGED
    max_judged_gap: float = MAX_JUDGED_GAP

    def __post_init__(self) -> None:
        for name in ("min_judged", "max_judged_gap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise InputError(f"must be a number in [0, 1], got {value!r}", field=f"metric.coverage.{name}")
            object.__setattr__(self, name, float(value))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def coverage_verdict(
    judged_a: float,
    judged_b: float,
    terms: CoverageTerms = CoverageTerms(),
    *,
    metric: str = "judged@k",
    names: tuple[str, str] = ("baseline", "candidate"),
) -> str | None:
    """Why a comparison of two sides judged ``judged_a`` and ``judged_b`` (mean judged@k, in
    [0, 1]) is coverage-confounded, or None when it is not.

    Confounded when either side is below ``terms.min_judged`` or the two differ by more than
    ``terms.max_judged_gap`` (both up to rounding, 1e-9). Unjudged documents count as grade 0,
    so such a difference in a metric may be a difference in judging, not in retrieval.
    """
    judged = (float(judged_a), float(judged_b))
    for value, name in zip(judged, names):
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise InputError(f"must be a judged fraction in [0, 1], got {value}", field=f"{name} {metric}")
    reasons = []
    low = [f"{name} {value:.2f}" for value, name in zip(judged, names) if value < terms.min_judged - _COVERAGE_ROUNDING]
    if low:
        reasons.append(f"{metric} below {terms.min_judged:g} ({', '.join(low)})")
    gap = abs(judged[0] - judged[1])
    if gap > terms.max_judged_gap + _COVERAGE_ROUNDING:
        reasons.append(
            f"{metric} differs by {gap:.2f} > {terms.max_judged_gap:g} "
            f"({names[0]} {judged[0]:.2f}, {names[1]} {judged[1]:.2f})"
        )
    return "; ".join(reasons) or None


def coverage_terms(record: Mapping[str, Any], *, source: str = "params.yaml") -> CoverageTerms:
    """The coverage terms of params.yaml's ``metric`` section or a recorded contract (its
    ``coverage``: ``min_judged``, ``max_judged_gap``); each term absent takes releval's default
    (:data:`MIN_JUDGED`, :data:`MAX_JUDGED_GAP`),
    and a contract recorded before the terms existed gets both."""
    given = record.get(COVERAGE_KEY)
    if given is None:
        return CoverageTerms()
    if not isinstance(given, Mapping):
        raise InputError(
            f"must be a mapping of min_judged and max_judged_gap, got {given!r}", file=source, field="metric.coverage"
        )
    fields = set(CoverageTerms().to_dict())
    unknown = sorted(set(given) - fields)
    if unknown:
        raise InputError(
            f"unknown coverage term; terms: {', '.join(sorted(fields))}",
            file=source,
            field=f"metric.coverage.{unknown[0]}",
        )
    try:
        return CoverageTerms(**{key: given[key] for key in fields if key in given})
    except InputError as exc:
        raise InputError(exc.detail, file=source, field=exc.field) from None


def coverage_metric(contract: Mapping[str, Any]) -> str | None:
    """The judged@k a comparison's coverage is read from: k is the primary metric's cutoff
    (judged@10 for ndcg@10); without such a judged@k in the contract's metrics, the first
    judged@k it lists; None when it lists none."""
    metrics = [str(m) for m in contract.get("metrics") or []]
    primary = str(contract.get("primary") or (metrics[0] if metrics else ""))
    k = primary.partition("@")[2]
    if k and f"judged@{k}" in metrics:
        return f"judged@{k}"
    return next((m for m in metrics if m.startswith("judged@")), None)


def condensed_name(metric: str) -> str:
    """The name of ``metric``'s condensed-list value: ``ndcg@10'``."""
    return f"{metric}{CONDENSED_MARK}"


def condensable(metrics: Iterable[str]) -> list[str]:
    """The metrics whose condensed-list value differs from their value: all but judged@k (1 on a
    condensed list) and bpref (which ignores unjudged documents already)."""
    return [m for m in metrics if parse_metric(m).kind not in ("judged", "bpref")]


def condensed_scores(
    doc_run: pl.DataFrame,
    qrels: pl.DataFrame,
    metrics: Sequence[str],
    contract: Contract,
    query_ids: Sequence[str] | pl.Series,
) -> pl.DataFrame:
    """Condensed-list values per query: ``query_id`` (those of ``query_ids``, in that order) and a
    column ``<metric>'`` per :func:`condensable` metric.

    The condensed list of a query is its ranking with every document that has no judgment
    removed, the others keeping their relative order (Sakai, "Alternatives to Bpref", SIGIR 2007;
    :func:`releval.measurement.metrics.condense`); the metric is computed on it under the same
    contract. A query whose retrieved documents are all unjudged has an empty condensed list and
    scores 0.
    """
    names = condensable(metrics)
    ids = pl.DataFrame({"query_id": pl.Series(list(query_ids), dtype=pl.Utf8)})
    columns = {condensed_name(m): pl.lit(0.0, dtype=pl.Float64) for m in names}
    if not names:
        return ids
    run = doc_run.select(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8), "score")
    condensed = condense(run, qrels) if run.height else run
    if condensed.height == 0:
        return ids.with_columns(**columns)
    try:
        evaluation = score_table(condensed, qrels, names, contract)
    except InputError as exc:
        if "no query left to evaluate" not in str(exc):
            raise
        return ids.with_columns(**columns)
    values = evaluation.per_query.select(
        pl.col("query_id").cast(pl.Utf8), *[pl.col(m).alias(condensed_name(m)) for m in names]
    )
    return ids.join(values, on="query_id", how="left", maintain_order="left").with_columns(
        pl.col(condensed_name(m)).fill_null(0.0) for m in names
    )


def with_condensed(evaluation: Evaluation, doc_run: pl.DataFrame, qrels: pl.DataFrame) -> pl.DataFrame:
    """``evaluation``'s per-query table with its metrics' condensed-list columns added
    (:func:`condensed_scores` of ``doc_run`` against ``qrels``, the run and judgments it was
    evaluated on, under its contract)."""
    names = [metric.name for metric in evaluation.metrics]
    condensed = condensed_scores(doc_run, qrels, names, evaluation.contract, evaluation.per_query["query_id"])
    return evaluation.per_query.join(condensed, on="query_id", how="left", maintain_order="left")


def saturation(metrics: Iterable[str], documents: int, share: float = SATURATION_SHARE) -> dict[str, Any]:
    """metrics.json's ``saturation`` block: the corpus's document count, the share, and the
    metrics whose cutoff reaches that share of the corpus
    (:func:`releval.measurement.metrics.saturated_cutoff`: recall@k with k >= share x documents),
    whose values say little about the ranking (recall@100 of a 143-document corpus is 1 for
    almost any system)."""
    return {
        "documents": int(documents),
        "share": float(share),
        "saturated": [m for m in metrics if saturated_cutoff(m, documents, share)],
    }


def low_judged(mean: Mapping[str, Any], metrics: Iterable[str]) -> list[tuple[str, float]]:
    """The (judged@k, value) pairs of ``mean`` below :data:`JUDGED_WARNING`: scores that are lower bounds."""
    return [(m, mean[m]) for m in metrics if m.startswith("judged@") and mean.get(m, 1.0) < JUDGED_WARNING]


# --------------------------------------------------------------------------- the score stage's records


def run_warnings(config_id: str, evaluation: Evaluation, metrics: Sequence[str], meta: Mapping[str, Any]) -> list[str]:
    """What the score stage warns about one configuration: unjudged top documents.

    (Truncation is the encode stage's warning; grid.md shows it as columns.)
    """
    return [
        f"{config_id}: {metric} = {value:.2f}; most top documents are unjudged and count as non-relevant"
        for metric, value in low_judged(evaluation.mean, metrics)
    ]


EVIDENCE_KEY = "evidence"  # params metric.evidence, the contract's record of it, each configuration's figures
EVIDENCE_BASIS = "document text without its title; chunk ids' offsets; tokens of the chunking's tokenizer"


@dataclass
class EvidenceInputs:
    """What passage-level scoring needs besides a run: the resolved spans of the scored queries
    (data/work/evidence.parquet, the judgments stage's), each chunking's chunk table for token
    counts, and params ``metric.evidence`` (tau, k, budgets)."""

    spans: pl.DataFrame
    chunks_root: Path
    tau: float
    k: tuple[int, ...]
    budgets: tuple[int, ...]
    _tokens: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)

    def tokens(self, chunking: str) -> dict[str, int]:
        if chunking not in self._tokens:
            table = pl.read_parquet(self.chunks_root / f"{chunking}.parquet", columns=["chunk_id", "n_tokens"])
            self._tokens[chunking] = evidence.chunk_tokens(table)
        return self._tokens[chunking]

    def terms(self) -> dict[str, Any]:
        """The contract's record: the terms every evidence figure was computed under."""
        return {"tau": self.tau, "k": list(self.k), "budgets": list(self.budgets), "basis": EVIDENCE_BASIS}


def evidence_inputs(
    metric_cfg: Mapping[str, Any], spans: pl.DataFrame | str | Path | None, chunks_root: str | Path
) -> EvidenceInputs | None:
    """The passage-level inputs when ``metric_cfg`` (params ``metric`` or a contract) has ``evidence``
    terms and the judgments mark spans (``spans``: the table or its file); else None."""
    cfg = metric_cfg.get(EVIDENCE_KEY)
    if not cfg or spans is None:
        return None
    if not isinstance(spans, pl.DataFrame):
        if not Path(spans).is_file():
            return None
        spans = pl.read_parquet(spans)
    if spans.height == 0:
        return None
    return EvidenceInputs(
        spans,
        Path(chunks_root),
        float(cfg.get("tau", evidence.DEFAULT_TAU)),
        tuple(int(k) for k in cfg.get("k") or evidence.DEFAULT_K),
        tuple(int(b) for b in cfg.get("budgets") or ()),
    )


def score_evidence(
    chunk_run: pl.DataFrame, meta: Mapping[str, Any], scored: ScoredQueries, inputs: EvidenceInputs, contract: Contract
) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    """A chunk-level run's passage-level figures over the scored queries (:mod:`releval.measurement.evidence`):
    (per query, figures); (None, why) for a run whose ids are not the pipeline's chunks (an external run,
    a fusion over documents)."""
    chunking = meta.get("chunking")
    if meta.get("kind") == runs.EXTERNAL or not chunking or not (inputs.chunks_root / f"{chunking}.parquet").is_file():
        return None, {"not_computed": "its ids are not the pipeline's chunks (no character offsets to cover spans)"}
    ids = list(scored.ids)
    run = chunk_run.filter(pl.col("query_id").is_in(ids))
    spans = inputs.spans.filter(pl.col("query_id").is_in(ids))
    try:
        found = evidence.evaluate_evidence(
            run,
            spans,
            k_values=inputs.k,
            budgets=inputs.budgets,
            tokens=inputs.tokens(chunking),
            tau=inputs.tau,
            gain=contract.gain,
            missing_in_run=contract.missing_in_run,
            judged_query_ids=ids,
        )
    except InputError as exc:
        return None, {"not_computed": exc.detail}
    return found.per_query, {"mean": dict(found.mean), "counts": dict(found.counts)}


@dataclass(frozen=True)
class ScoredRun:
    """One stored run scored by the score stage."""

    config_id: str
    result: dict[str, Any]  # see config_result
    per_query: pl.DataFrame  # the evaluation's per-query table, config_id added
    document_run: pl.DataFrame  # the run at document level over the scored queries (its TREC file)


def score_run(
    run_dir: Path,
    scored: ScoredQueries,
    metrics: Sequence[str],
    contract: Contract,
    *,
    condensed: bool = True,
    passages: EvidenceInputs | None = None,
) -> ScoredRun:
    """Read the run in ``run_dir``, collapse it to documents and score it over ``scored``; ``condensed``
    False (positives-only judgments: :mod:`releval.judging.completeness`) adds no condensed-list column;
    ``passages`` adds the passage-level figures (:func:`score_evidence`) to the per-query table and the result."""
    chunk_run, meta = runs.read_run(run_dir)
    doc_run = document_run(chunk_run, scored.ids)
    evaluation = score(doc_run, scored, metrics, contract)
    per_query = with_condensed(evaluation, doc_run, scored.qrels) if condensed else evaluation.per_query
    cid = meta["config_id"]
    result = config_result(run_dir, meta, evaluation, metrics, condensed=per_query)
    if passages is not None:
        by_query, result[EVIDENCE_KEY] = score_evidence(chunk_run, meta, scored, passages, contract)
        if by_query is not None:
            per_query = per_query.join(by_query, on="query_id", how="left", maintain_order="left")
    return ScoredRun(
        config_id=cid,
        result=result,
        per_query=per_query.with_columns(pl.lit(cid).alias("config_id")),
        document_run=doc_run,
    )


def config_result(
    run_dir: Path,
    meta: Mapping[str, Any],
    evaluation: Evaluation,
    metrics: Sequence[str],
    *,
    condensed: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """One scored configuration: its means, condensed-list means (of ``condensed``'s ``<metric>'``
    columns, :func:`with_condensed`), counts, cost and machine figures, slices, lineage and warnings."""
    return {
        "mean": evaluation.mean,
        "condensed": {} if condensed is None else condensed_means(condensed),
        "counts": evaluation.counts,
        "ops": operations.cost_figures(meta["ops"]),
        "machine_ops": operations.machine_figures(meta["ops"]),
        "slices": evaluation.slices or {},
        "models": meta["models"],
        "inputs": meta["inputs"],
        "run_dir": str(run_dir),
        "run_sha256": io.sha256_file(run_dir / "run.parquet"),
        "warnings": run_warnings(meta["config_id"], evaluation, metrics, meta),
    }


def condensed_means(per_query: pl.DataFrame) -> dict[str, float]:
    """Per metric (named without the prime), the mean of its condensed-list column ``<metric>'``."""
    return {
        name.removesuffix(CONDENSED_MARK): float(np.mean(per_query[name].to_numpy()))
        for name in per_query.columns
        if name.endswith(CONDENSED_MARK)
    }


def judged_completeness(judgments: Mapping[str, Any]) -> Completeness:
    """The completeness judgments.json records (the judgments stage's provenance); pooled when it
    records none (judgments scored before the term existed)."""
    recorded = judgments.get(CONTRACT_COMPLETENESS) or {}
    kind = recorded.get("kind")
    return Completeness(
        kind if kind in (POSITIVES_ONLY, SAMPLED) else POOLED,
        recorded.get("depth"),
        tuple(recorded.get("systems") or ()),
        dict(recorded["sample"]) if kind == SAMPLED and recorded.get("sample") else None,
    )


def metrics_document(
    results: Mapping[str, Mapping[str, Any]],
    contract: Contract,
    metric_cfg: Mapping[str, Any],
    dataset: Any,
    judgments: Mapping[str, Any],
    split_terms: Mapping[str, Any],
    *,
    titles: str | None = None,
    documents: int | None = None,
    passages: EvidenceInputs | None = None,
) -> dict[str, Any]:
    """metrics.json: the full contract (engine terms and recorded context) and each configuration's figures.

    ``titles``: the titles term every run's chunks were built under (``retriever.titles``), a
    contract term: numbers with and without titles prepended are not comparable. None records none.

    The contract records the coverage terms (``coverage``: :func:`coverage_terms`). Each
    configuration carries, beside its means, ``condensed``: each metric's condensed-list mean
    (:func:`condensed_scores`; none for judged@k and bpref), keyed by the metric's name.
    ``documents``, the corpus's document count, adds the ``saturation`` block (:func:`saturation`).
    """
    full_contract = {
        **contract.to_dict(),
        "metrics": list(metric_cfg["metrics"]),
        "primary": metric_cfg["primary"],
        "collapse": metric_cfg["collapse"],
        **({INFERRED_KEY: list(metric_cfg[INFERRED_KEY])} if INFERRED_KEY in metric_cfg else {}),
        COVERAGE_KEY: coverage_terms(metric_cfg).to_dict(),
        **({"titles": titles} if titles is not None else {}),
        "dataset": dataset,
        "judgments_version": judgments["version"],
        "judgments_sha256": judgments["source_sha256"],
        "pooling": judgments.get("description") or "not recorded",
        CONTRACT_COMPLETENESS: judged_completeness(judgments).kind,
        **_sample_term(judged_completeness(judgments)),
        **({EVIDENCE_KEY: passages.terms()} if passages is not None else {}),
        **split_terms,
    }
    document: dict[str, Any] = {
        "contract": full_contract,
        "configs": {
            cid: {
                **r["mean"],
                "condensed": dict(r.get("condensed") or {}),
                "ops": r["ops"],
                "counts": r["counts"],
                "slices": r["slices"],
                **({EVIDENCE_KEY: r[EVIDENCE_KEY]} if EVIDENCE_KEY in r else {}),
                **({INFERRED_KEY: r[INFERRED_KEY]} if INFERRED_KEY in r else {}),
            }
            for cid, r in results.items()
        },
    }
    if documents is not None:
        document["saturation"] = saturation(metric_cfg["metrics"], documents)
    return document


def _sample_term(completeness: Completeness) -> dict[str, Any]:
    """A sampled set's contract term ``sample``: its size, frame, rate, seed and the design's sha256."""
    if not completeness.sampled:
        return {}
    sample = completeness.sample or {}
    return {SAMPLE_CONTRACT_KEY: {k: sample.get(k) for k in ("pairs", "frame", "rate", "seed", "sha256")}}


def with_inferred(
    scored_runs: list[tuple[Path, ScoredRun]],
    judgments_dir: str | Path,
    completeness: Completeness,
    qrels: pl.DataFrame,
    metric_cfg: Mapping[str, Any],
    contract: Contract,
    query_ids: Sequence[str],
) -> tuple[list[tuple[Path, ScoredRun]], list[str]]:
    """Under a sampled set: each run with its inferred figures (:func:`releval.measurement.inferred.infer_scored`
    over the design in ``judgments_dir``): per-query columns and means beside the engine's, and
    ``inferred`` (means with interval (a), unjudged share) in its result. Returns the runs and the
    inferred metric names."""
    design = read_set_design(judgments_dir, completeness)
    names = list(inferred_metrics(metric_cfg["metrics"], metric_cfg.get("primary")))
    found = infer_scored(
        design, qrels, {s.config_id: s.document_run for _, s in scored_runs}, names, contract, query_ids
    )
    out = []
    for run_dir, scored in scored_runs:
        result = {
            **scored.result,
            "mean": {**scored.result["mean"], **{m: found.summary[scored.config_id][m]["mean"] for m in names}},
            INFERRED_KEY: found.summary[scored.config_id],
        }
        # A full join: a query the engine's no_relevant policy leaves out may still hold relevant documents
        # the sample did not reach; whether it has any is itself estimated.
        per_query = (
            scored.per_query.drop("config_id")
            .join(found.per_query[scored.config_id], on="query_id", how="full", coalesce=True)
            .sort("query_id")
            .with_columns(pl.lit(scored.config_id).alias("config_id"))
        )
        out.append((run_dir, dataclasses.replace(scored, result=result, per_query=per_query)))
    return out, names


HEADLINE_DIGITS = 4  # the DVC view is for reading and diffing; metrics.json keeps full precision


def headline_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """reports/quality.json, the DVC metrics file: the primary metric and its coverage per configuration.

    Only the few numbers people diff (`dvc metrics show/diff`, `dvc exp show`): the scored query
    count, the primary metric and judged@k at the primary's k (where scored), each rounded to
    HEADLINE_DIGITS decimals. Everything else stays in metrics.json, which is not a DVC metric.
    """
    contract, configs = document["contract"], document["configs"]
    primary = contract["primary"]
    k = primary.partition("@")[2]
    judged = f"judged@{k}" if k and f"judged@{k}" in contract["metrics"] else None
    counts = [c["counts"]["queries_evaluated"] for c in configs.values()]
    headline: dict[str, Any] = {"queries": max(counts) if counts else 0}
    for metric in [primary] + ([judged] if judged else []):
        headline[metric] = {cid: round(float(c[metric]), HEADLINE_DIGITS) for cid, c in configs.items()}
    return headline


def lineage_document(results: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """lineage.json: what each configuration's run was made from, and the run's digest."""
    return {cid: {k: r[k] for k in ("models", "inputs", "run_dir", "run_sha256")} for cid, r in results.items()}


def per_query_table(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """per_query.parquet: the configurations' per-query tables, config_id first, sorted."""
    if not frames:
        return pl.DataFrame()
    table = pl.concat(frames, how="diagonal").select("config_id", pl.exclude("config_id"))
    return table.sort(["config_id", "query_id"])


def trec_file_name(run_dir: Path, runs_root: str | Path) -> str:
    """The TREC run file of ``run_dir``: its path under ``runs_root``, ``/`` spelt ``__``."""
    return run_dir.relative_to(runs_root).as_posix().replace("/", "__") + ".trec"


# --------------------------------------------------------------------------- the score stage


@dataclass(frozen=True)
class ScoredGrid:
    """The score stage's records, computed: every run of the grid scored over the scored queries."""

    runs: list[tuple[Path, ScoredRun]]  # (run folder, its scores) in the grid's order
    document: dict[str, Any]  # metrics.json (:func:`metrics_document`)
    machine: dict[str, Any]  # ops.json (:func:`releval.measurement.operations.ops_document`)
    metrics: list[str]  # the metrics computed (positives-only judgments leave some out)
    judgments_version: str

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        """config id -> its figures (:func:`config_result`)."""
        return {scored.config_id: scored.result for _, scored in self.runs}

    @property
    def per_query(self) -> pl.DataFrame:
        """per_query.parquet (:func:`per_query_table`)."""
        return per_query_table([scored.per_query for _, scored in self.runs])


def score_grid(
    params: Mapping[str, Any],
    *,
    runs_root: str | Path,
    qrels: str | Path,
    judgments_meta: str | Path,
    queries: str | Path,
    docs: str | Path,
    split: str,
    holdout_log: str | Path,
    command: Sequence[str],
    titles: str | None,
    evidence_spans: str | Path | None = None,
    chunks_root: str | Path | None = None,
) -> ScoredGrid:
    """stages/score.py's work: the grid's runs (params ``grid``) below ``runs_root`` scored under params
    ``metric`` against ``qrels`` over the ``split``'s queries (opening the holdout is logged to
    ``holdout_log`` first, naming ``command``), with metrics.json's contract (``titles``: the chunks'
    titles term) and the saturated cutoffs of ``docs``' corpus; with ``evidence_spans`` (the judgments
    stage's resolved spans) and params ``metric.evidence``, the passage-level figures of every chunk-level
    run too, its chunks read from ``chunks_root``. Prints what positives-only judgments leave out and
    warns about stale run folders and thinly judged runs, as the stage reports them."""
    metric_cfg = section(params, "metric")
    contract = contract_from_params(metric_cfg)
    qrels_table = pl.read_parquet(qrels)
    judgments = json.loads(Path(judgments_meta).read_text())
    completeness = judged_completeness(judgments)
    metrics, left_out = metrics_for(list(metric_cfg["metrics"]), completeness)
    if left_out:
        why = (
            POSITIVES_ONLY_CAVEAT
            if completeness.positives_only
            else "most of a ranking is unjudged by a sample's design"
        )
        print(f"score: {', '.join(left_out)} not computed: {why}")
    query_table = pl.read_parquet(queries)
    run_dirs, stale = runs.grid_runs(section(params, "grid"), runs_root)
    if stale:
        names = ", ".join(f.as_posix() for f in stale)
        warn(f"score: ignored {len(stale)} run folder(s) of configurations no longer in the grid: {names}")
    # Opening the holdout is logged before anything is scored (an interrupted run stays on record).
    scored, split_terms = holdout.scoring_selection(
        query_table,
        split,
        configs=[runs.read_meta(d)["config_id"] for d in run_dirs],
        command=list(command),
        log_path=holdout_log,
        source=str(queries),
    )
    scored_set = scored_queries(scored, qrels_table)
    passages = (
        evidence_inputs(metric_cfg, evidence_spans, chunks_root)
        if evidence_spans is not None and chunks_root is not None
        else None
    )
    condensed = completeness.pooled
    scored_runs = [
        (run_dir, score_run(run_dir, scored_set, metrics, contract, condensed=condensed, passages=passages))
        for run_dir in run_dirs
    ]
    recorded_cfg = {**metric_cfg, "metrics": metrics}
    if completeness.sampled:
        scored_runs, inferred = with_inferred(
            scored_runs, section(params, "judgments")["path"], completeness, qrels_table, metric_cfg, contract,
            scored_set.ids,
        )  # fmt: skip
        recorded_cfg = {**recorded_cfg, INFERRED_KEY: inferred}
        print(
            f"score: sampled judgments: {', '.join(inferred)} inferred from the sample; comparisons decide on "
            f"{inferred[0]}"
        )
    results = {scored_run.config_id: scored_run.result for _, scored_run in scored_runs}
    for result in results.values():
        for message in result["warnings"]:
            warn(message)
    document = metrics_document(
        results,
        contract,
        recorded_cfg,
        section(params, "dataset.name"),
        judgments,
        split_terms,
        titles=titles,
        documents=pl.scan_parquet(docs).select(pl.len()).collect().item(),
        passages=passages,
    )
    machine = operations.ops_document(
        {cid: r["machine_ops"] for cid, r in results.items()}, operations.describe_machine()
    )
    return ScoredGrid(scored_runs, document, machine, metrics, judgments["version"])
