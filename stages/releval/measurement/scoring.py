"""The one scoring path: a stored run → documents → the scored queries → metrics under a contract.

The score stage, rescore (the archive), audit, compare, the report and pool all go through
these functions; nothing else collapses chunks to documents, restricts a run to a split or
rebuilds a :class:`~releval.measurement.metrics.Contract` from its recorded form. The score
stage's records (metrics.json, lineage.json, per_query.parquet) are assembled here too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from releval import io
from releval.measurement import holdout
from releval.retrieval import runs
from releval.measurement import operations
from releval.measurement.metrics import FIXED_TERMS, Contract, Evaluation, evaluate

JUDGED_WARNING = 0.5  # judged@k below this: the number leans on unjudged documents counted as 0


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


@dataclass(frozen=True)
class ScoredRun:
    """One stored run scored by the score stage."""

    config_id: str
    result: dict[str, Any]  # see config_result
    per_query: pl.DataFrame  # the evaluation's per-query table, config_id added
    document_run: pl.DataFrame  # the run at document level over the scored queries (its TREC file)


def score_run(run_dir: Path, scored: ScoredQueries, metrics: Sequence[str], contract: Contract) -> ScoredRun:
    """Read the run in ``run_dir``, collapse it to documents and score it over ``scored``."""
    chunk_run, meta = runs.read_run(run_dir)
    doc_run = document_run(chunk_run, scored.ids)
    evaluation = score(doc_run, scored, metrics, contract)
    cid = meta["config_id"]
    return ScoredRun(
        config_id=cid,
        result=config_result(run_dir, meta, evaluation, metrics),
        per_query=evaluation.per_query.with_columns(pl.lit(cid).alias("config_id")),
        document_run=doc_run,
    )


def config_result(
    run_dir: Path, meta: Mapping[str, Any], evaluation: Evaluation, metrics: Sequence[str]
) -> dict[str, Any]:
    """One scored configuration: its means, counts, cost and machine figures, slices, lineage and warnings."""
    return {
        "mean": evaluation.mean,
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


def metrics_document(
    results: Mapping[str, Mapping[str, Any]],
    contract: Contract,
    metric_cfg: Mapping[str, Any],
    dataset: Any,
    judgments: Mapping[str, Any],
    split_terms: Mapping[str, Any],
    *,
    titles: str | None = None,
) -> dict[str, Any]:
    """metrics.json: the full contract (engine terms and recorded context) and each configuration's figures.

    ``titles``: the titles term every run's chunks were built under (``retriever.titles``), a
    contract term: numbers with and without titles prepended are not comparable. None records none.
    """
    full_contract = {
        **contract.to_dict(),
        "metrics": list(metric_cfg["metrics"]),
        "primary": metric_cfg["primary"],
        "collapse": metric_cfg["collapse"],
        **({"titles": titles} if titles is not None else {}),
        "dataset": dataset,
        "judgments_version": judgments["version"],
        "judgments_sha256": judgments["source_sha256"],
        "pooling": judgments.get("description") or "not recorded",
        **split_terms,
    }
    return {
        "contract": full_contract,
        "configs": {
            cid: {**r["mean"], "ops": r["ops"], "counts": r["counts"], "slices": r["slices"]}
            for cid, r in results.items()
        },
    }


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
