"""releval from Python: read runs and judgments, score a run, compare two runs.

Thin wrappers over the code the pipeline and the CLI use; nothing here computes a number of its own.

    from releval import api

    qrels = api.read_judgments("data/judgments/v3")            # a set directory, or a qrels file
    a = api.read_run("data/work/trec/minilm-c256.trec")         # TREC, JSONL or parquet (or a run folder)
    b = api.read_run("data/work/trec/bm25-c256.trec")
    scores = api.evaluate(a, qrels, ["ndcg@10", "recall@20"])   # releval's default contract
    scores.mean["ndcg@10"], scores.per_query                    # mean; query_id + one column per metric
    result = api.compare(a, b, qrels, metric="ndcg@10")         # b (candidate) against a (baseline)
    result.mean_difference, result.interval, result.p_value, result.verdict
    print(result.text)                                          # the report `releval compare` prints

Tables (polars): a run is ``query_id, doc_id, score`` (document level; a chunk-level releval run
is collapsed to documents, a document taking its best chunk's score, as the score stage does);
qrels are ``query_id, doc_id, grade`` (integer grades >= 0; several annotators of a releval set
give the lower median of their grades).

A project's own terms (what `releval compare` and `gate` apply): :func:`project_terms` reads params.yaml's
``metric`` section as a :class:`Contract` and the coverage terms (:class:`CoverageTerms`), so a notebook
reaches the command line's verdict on the same runs and judgments::

    terms = api.project_terms()                                 # params.yaml
    api.compare(a, b, qrels, contract=terms.contract, coverage=terms.coverage)

The contract (:class:`releval.measurement.metrics.Contract`) fixes the conventions behind every
number: gain (``exponential`` 2^g - 1, or ``linear``), ties (``docid-asc``, or ``trec_eval``),
rel_threshold (lowest relevant grade for binary metrics, default 1), no_relevant (queries
without a relevant document: ``exclude`` from the mean, or ``zero``), missing_in_run (judged
queries the run lacks: ``zero``, or ``exclude``). ``Contract.trec_eval()`` gives trec_eval's
numbers. Metric names: ``ndcg@10``, ``dcg@10``, ``recall@100``, ``p@10``, ``rprec``, ``mrr@10``,
``mrr``, ``map``, ``map@100``, ``hit@5``, ``bpref``, ``judged@10``, ``ceiling@10``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import polars as pl

from releval.config import load_params, section
from releval.errors import InputError
from releval.inputs import trec
from releval.judging.completeness import CONTRACT_KEY as COMPLETENESS
from releval.judging.completeness import KINDS, POOLED, Completeness, metrics_for
from releval.judging.judgments import load_version
from releval.measurement import scoring
from releval.measurement.metrics import Contract, Evaluation, contract_from_params
from releval.measurement.pair import PairReport, Side, compare_sides
from releval.measurement.scoring import CoverageTerms, coverage_terms
from releval.measurement.sides import read_run_file
from releval.measurement.stats import Comparison, QueryChange
from releval.reporting.pair_text import render_pair

__all__ = [
    "Contract",
    "CoverageTerms",
    "Evaluation",
    "PairedComparison",
    "ProjectTerms",
    "compare",
    "evaluate",
    "project_terms",
    "read_judgments",
    "read_run",
]

DEFAULT_METRICS = ("ndcg@10", "recall@20", "mrr@10", "judged@10")
RunLike = pl.DataFrame | str | os.PathLike
QrelsLike = pl.DataFrame | str | os.PathLike


def read_run(path: str | os.PathLike, format: str | None = None) -> pl.DataFrame:
    """A run at document level: ``query_id, doc_id, score``.

    ``path``: a TREC run file, JSONL (``query_id, doc_id, score`` per line), parquet, or a releval
    run folder (``run.json`` + ``run.parquet``, e.g. ``data/work/runs/model/minilm/c256``), whose
    chunks are collapsed to documents as the score stage does. ``format``: ``trec``, ``jsonl`` or
    ``parquet`` (default: from the extension). Bad input is an InputError naming file and line.
    """
    return read_run_file(path, format)


def read_judgments(path: str | os.PathLike, format: str | None = None) -> pl.DataFrame:
    """qrels ``query_id, doc_id, grade`` of a judgment-set directory or a qrels file.

    A directory is a releval judgment set (``manifest.yaml`` + ``judgments.jsonl``), validated as
    the pipeline validates it; several annotators of a pair give the lower median of their grades.
    A file is TREC qrels, JSONL, parquet or a BEIR qrels .tsv (``format``: default from its header
    or extension; :func:`releval.inputs.trec.read_qrels`).
    """
    path = Path(path)
    if path.is_dir():
        return load_version(path).qrels()
    return trec.read_qrels(path, format)


@dataclass(frozen=True)
class ProjectTerms:
    """What a project's params.yaml declares for its numbers."""

    contract: Contract
    coverage: CoverageTerms
    metrics: tuple[str, ...]
    primary: str


def project_terms(params: str | os.PathLike = "params.yaml") -> ProjectTerms:
    """The contract, coverage terms, metrics and primary metric of params.yaml's ``metric`` section:
    the terms `releval compare` and `gate` decide under."""
    metric_cfg = section(load_params(params), "metric", file=str(params))
    return ProjectTerms(
        contract_from_params(metric_cfg),
        coverage_terms(metric_cfg, source=str(params)),
        tuple(metric_cfg.get("metrics") or ()),
        str(metric_cfg.get("primary", "ndcg@10")),
    )


def _run_table(run: RunLike) -> pl.DataFrame:
    return run if isinstance(run, pl.DataFrame) else read_run(run)


def _qrels_table(qrels: QrelsLike) -> pl.DataFrame:
    return qrels if isinstance(qrels, pl.DataFrame) else read_judgments(qrels)


def evaluate(
    run: RunLike,
    qrels: QrelsLike,
    metrics: Sequence[str] = DEFAULT_METRICS,
    contract: Contract | None = None,
) -> Evaluation:
    """Score ``run`` against ``qrels`` under ``contract`` (default: releval's, :class:`Contract`).

    ``run``/``qrels``: tables or paths (:func:`read_run`, :func:`read_judgments`). Returns the
    metric engine's :class:`~releval.measurement.metrics.Evaluation`: ``mean`` (metric -> mean over
    the evaluated queries), ``per_query`` (``query_id`` + one column per metric), ``counts``
    (queries evaluated, without relevant documents, missing from the run, tied...) and
    ``contract``. A run and judgments that share no query with a relevant document are an
    InputError ("no query left to evaluate").
    """
    return scoring.score_table(_run_table(run), _qrels_table(qrels), list(metrics), contract or Contract())


@dataclass(frozen=True)
class PairedComparison:
    """A paired comparison of a candidate run against a baseline on one metric, per query.

    Differences are candidate - baseline. ``interval``: the paired bootstrap's confidence interval
    of the mean difference; ``p_value``: its two-sided bootstrap p; ``verdict``: releval's one
    decision rule (:func:`releval.measurement.stats.decide`): ``improvement``, ``regression``,
    ``inconclusive``, or ``coverage-confounded`` when judged@k of either side is too low or the two
    too far apart (judged@k is scored for the verdict when the metric has a cutoff). ``text``: the
    report `releval compare` prints; ``comparison``/``report``: everything behind it.
    """

    metric: str
    n_queries: int
    baseline_mean: float
    candidate_mean: float
    mean_difference: float
    interval: tuple[float, float]
    p_value: float
    wins: int
    losses: int
    ties: int
    worst_query: QueryChange | None  # the candidate's largest loss; None when no query lost
    verdict: str
    text: str
    comparison: Comparison
    report: PairReport


def compare(
    baseline: RunLike,
    candidate: RunLike,
    qrels: QrelsLike,
    metric: str = "ndcg@10",
    secondary: Sequence[str] = (),
    contract: Contract | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    queries: pl.DataFrame | None = None,
    coverage: CoverageTerms | None = None,
    completeness: str = POOLED,
) -> PairedComparison:
    """Compare ``candidate`` with ``baseline`` on ``metric``, paired by query, as `releval compare`
    does for two run files (:func:`releval.measurement.pair.compare_sides`).

    Both runs are scored against ``qrels`` under ``contract`` (default :class:`Contract`) with
    ``metric``, the ``secondary`` metrics (compared too, Holm-adjusted together) and ``judged@k`` at
    the metric's cutoff for the coverage check under ``coverage`` (default: releval's terms, each
    side >= 0.9, at most 0.05 apart; a project's own: :func:`project_terms`). ``completeness``:
    ``pooled`` (releval's sets) or ``positives-only`` (BEIR/MTEB qrels: no coverage check, a caveat
    instead; :mod:`releval.judging.completeness`). ``queries``
    (``query_id``, ``text``, optional ``slices``): texts for the worst query and per-slice results.
    Bootstrap: ``n_resamples`` query resamples, ``seed``.
    """
    contract = contract or Contract()
    declared = Completeness(completeness)  # validated below
    if completeness not in KINDS:
        raise InputError(f"must be one of {', '.join(KINDS)}, got {completeness!r}", field="completeness")
    k = metric.partition("@")[2]
    judged = [f"judged@{k}"] if k and not declared.positives_only else []
    names, _ = metrics_for(list(dict.fromkeys([metric, *secondary, *judged])), declared)
    coverage = coverage or CoverageTerms()
    terms = {**contract.to_dict(), "metrics": names, "primary": metric, "coverage": coverage.to_dict()}
    terms[COMPLETENESS] = completeness
    qrels_table = _qrels_table(qrels)

    def side(run: RunLike, label: str) -> Side:
        doc_run = _run_table(run)
        evaluation = scoring.score_recorded(doc_run, qrels_table, terms)
        per_query = evaluation.per_query
        if not declared.positives_only:  # condensed lists need judged non-relevant documents
            per_query = scoring.with_condensed(evaluation, doc_run, qrels_table)
        ref = str(run) if not isinstance(run, pl.DataFrame) else label
        return Side(ref, f"run {ref}", terms, per_query.with_columns(pl.col("query_id").cast(pl.Utf8)), doc_run)

    report = compare_sides(
        side(baseline, "baseline"),
        side(candidate, "candidate"),
        metric,
        secondary=[m for m in secondary if m != metric and m in names],
        queries=queries,
        n_resamples=n_resamples,
        seed=seed,
        coverage_terms=coverage,
    )
    p = report.primary
    if p.n_queries == 0:  # pragma: no cover - compare_sides refuses an empty selection
        raise InputError("no query to compare", field="queries")
    return PairedComparison(
        metric=metric,
        n_queries=p.n_queries,
        baseline_mean=p.baseline_mean,
        candidate_mean=p.candidate_mean,
        mean_difference=p.mean_difference,
        interval=p.bootstrap_ci,
        p_value=p.bootstrap_p_value,
        wins=p.wins,
        losses=p.losses,
        ties=p.ties,
        worst_query=p.worst_regression,
        verdict=str(p.verdict),
        text=render_pair(report),
        comparison=p,
        report=report,
    )
