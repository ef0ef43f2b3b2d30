"""What the judgments stage makes of the active judgments: one function, for the stage and the audit.

:func:`judgments_outputs` reads the configured judgments against the ingested corpus and the query
table (:func:`releval.judging.judgments.active_judgments`) and gives the three files the stage
writes: the qrels of the scored split (data/work/qrels.parquet), judgments.json (what was read and
how much of it), and the resolved evidence spans of the scored split (data/work/evidence.parquet:
:func:`releval.measurement.evidence.evidence_spans`, empty when the judgments carry none). The
audit rebuilds the same files with the same function, so that it checks the stage's work without
a copy of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import polars as pl

from releval.judging.judgments import active_judgments, doc_texts
from releval.measurement import holdout
from releval.measurement.evidence import SPANS_SCHEMA, evidence_spans


@dataclass(frozen=True)
class JudgmentsOutputs:
    qrels: pl.DataFrame  # the scored split's judgments (QRELS)
    meta: dict[str, Any]  # judgments.json
    spans: pl.DataFrame  # the scored split's evidence spans (measurement.evidence.SPANS_SCHEMA)


def judgments_outputs(
    judgments: Mapping[str, Any],
    subset: Mapping[str, Any],
    docs: pl.DataFrame,
    queries: pl.DataFrame,
    *,
    split: str,
    rel_threshold: int,
    queries_source: str,
) -> JudgmentsOutputs:
    """The judgments stage's files for params ``judgments`` over ``docs`` (doc_id, text) and the query
    table ``queries``, restricted to ``split``'s queries (the holdout stays sealed)."""
    selected = holdout.select_queries(queries, split, source=queries_source)["query_id"]
    active = active_judgments(judgments, subset, docs, queries["query_id"])
    kept = active.qrels.filter(pl.col("query_id").is_in(selected.implode()))
    spans = (
        evidence_spans(active.judgments, doc_texts(docs), rel_threshold=rel_threshold, qrels=active.qrels)
        if active.judgments is not None
        else pl.DataFrame(schema=SPANS_SCHEMA)
    ).filter(pl.col("query_id").is_in(selected.implode()))
    evidence = {"evidence_spans": spans.height, "queries_with_evidence": spans["query_id"].n_unique()}
    meta = {
        "version": str(judgments["version"]),
        "source": judgments["path"],
        "split": holdout.contract_split(queries, split),
        **active.provenance,
        "counts": {
            "judgments": kept.height,
            "queries_judged": kept["query_id"].n_unique(),
            "dropped_outside_corpus_subset": active.dropped_outside_corpus_subset,
            "dropped_outside_query_subset": active.dropped_outside_query_subset,
            "sealed_outside_split": active.qrels.height - kept.height,
            "grades": {str(g): n for g, n in kept.group_by("grade").len().sort("grade").iter_rows()},
            **(evidence if spans.height else {}),
        },
    }
    return JudgmentsOutputs(kept, meta, spans)
