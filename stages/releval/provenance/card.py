"""Evaluation cards and observations: what a set of numbers was measured on, and what was measured.

An **evaluation card** describes one evaluation and is derived entirely from configuration and
data (stages/report.py builds it; nothing in it is typed by hand): the corpus, the query set and
the judgments with their content hashes, the relevance definition, the metric contract, the
representation-protocol policy, the declared slices, the state of the sealed holdout and the
code commit. An **observation** is one configuration's result under a card: the models with
their revisions and the protocol each was actually used under, overall and per-slice scores, and
operational figures.

Cards decide comparability. Two observations may be ranked only when they sit under the same
card -- same corpus, same query set, same judgments, same relevance threshold, same contract
terms; :func:`rank_observations` refuses otherwise and names every field that differs. What a
card does *not* pin is how each model is used: a model with an instruction prompt and one
without are legitimately compared under one card, each through its own declared protocol.

Both documents are checked by a strict hand-written validator (:func:`validate_card`,
:func:`validate_observation`): every required key, no unknown key, every type; all problems are
reported at once as :class:`~releval.errors.InputErrors` naming the JSON path. (pandera checks
tables; these are nested documents, so a small structural validator fits them better.)

Pure: dicts and polars tables in, dicts out. The stage does the reading and hashing.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from releval.measurement import pair, scoring
from releval.errors import InputError, InputErrors
from releval.measurement.metrics import parse_metric
from releval import paths

CARD_SCHEMA = "releval.card/1"
OBSERVATION_SCHEMA = "releval.observation/1"

PROTOCOL_POLICY = (
    "Each model is used through its own declared protocol: its query_prompt is prepended to every "
    "query and its document_prompt to every document chunk, embeddings are normalised as its "
    "`normalize` says, and inputs longer than its max_seq_length are truncated (the truncation rate "
    "is recorded per observation). An asymmetric model without both prompts is refused, never run "
    "without them. Models in one card may therefore use different prompts; each observation states "
    "the protocol it was run under."
)

# Fields of a card that decide whether numbers are comparable (dotted paths into the card).
# The contract's terms are compared separately with releval.measurement.pair.contract_differences.
IDENTITY_FIELDS = (
    "corpus.id",
    "corpus.content_sha256",
    "corpus.documents",
    "queries.id",
    "queries.content_sha256",
    "queries.count",
    "queries.split",
    "judgments.version",
    "judgments.sha256",
    "judgments.qrels_sha256",
    "judgments.relevance.threshold",
)

OPS_FIELDS = (
    "chunks_per_s",
    "tokens_per_s",
    "latency_ms_p50",
    "latency_ms_p95",
    "memory_bytes",
    "index_bytes",
    "index_build_s",
    "dimension",
    "max_seq_length",
    "truncation_rate",
    "truncated_token_share",
)
MEMORY_KEYS = ("memory_bytes", "peak_memory_bytes", "peak_rss_bytes", "max_rss_bytes")


class CardMismatch(InputError):
    """Observations under different cards were about to be ranked together."""

    def __init__(self, differences: list[str]):
        self.differences = list(differences)
        InputError.__init__(
            self,
            "observations from different evaluation cards cannot be ranked together: " + "; ".join(self.differences),
            field="card_id",
        )


# --------------------------------------------------------------------------- content hashes


def table_sha256(frame: pl.DataFrame, columns: Sequence[str], sort_by: str) -> str:
    """sha256 of a table's rows (chosen columns, sorted by ``sort_by``) as canonical JSON lines.

    Unlike a hash of the parquet file, it does not change when a different writer encodes the
    same rows.
    """
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", field=missing[0])
    digest = hashlib.sha256()
    for row in frame.select(list(columns)).sort(sort_by).iter_rows():
        digest.update(json.dumps([_plain(v) for v in row], ensure_ascii=False, separators=(",", ":")).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _plain(value: Any) -> Any:
    if isinstance(value, pl.Series):
        return value.to_list()
    return value


def corpus_content_sha256(docs: pl.DataFrame) -> str:
    """Hash of the corpus as scored: each document's id and text (its sha256 when present)."""
    columns = ["doc_id", "sha256"] if "sha256" in docs.columns else ["doc_id", "title", "text"]
    columns = [c for c in columns if c in docs.columns]
    return table_sha256(docs.with_columns(pl.col("doc_id").cast(pl.Utf8)), columns, "doc_id")


def queries_content_sha256(queries: pl.DataFrame) -> str:
    """Hash of the query set: id, text and split (the split decides what is scored)."""
    columns = [c for c in ("query_id", "text", "split") if c in queries.columns]
    return table_sha256(queries.with_columns(pl.col("query_id").cast(pl.Utf8)), columns, "query_id")


def qrels_content_sha256(qrels: pl.DataFrame) -> str:
    frame = qrels.select(
        pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8), pl.col("grade").cast(pl.Int64)
    )
    return table_sha256(frame.sort(["query_id", "doc_id"]), ["query_id", "doc_id", "grade"], "query_id")


# --------------------------------------------------------------------------- the card


def relevance_definition(
    threshold: int, scale: Mapping[Any, str] | None, rubric: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The relevance definition: threshold, the scale's words for it, and the rubric if any."""
    scale = {int(k): str(v) for k, v in (scale or {}).items()}
    relevant = [f"{g} ({scale[g]})" for g in sorted(scale) if g >= threshold]
    not_relevant = [f"{g} ({scale[g]})" for g in sorted(scale) if g < threshold]
    if scale:
        text = (
            f"A document is relevant to a query when its grade is >= {threshold}: "
            f"{', '.join(relevant) or 'no grade on the scale'} count as relevant for binary metrics "
            f"(recall, precision, MAP, MRR, hit); {', '.join(not_relevant) or 'none'} do not. "
            "Graded metrics (nDCG) use every grade; unjudged documents count as grade 0."
        )
    else:
        text = (
            f"A document is relevant to a query when its grade is >= {threshold}; the judgments "
            "declare no scale. Unjudged documents count as grade 0."
        )
    if rubric and rubric.get("summary"):
        text += f" Rubric ({rubric.get('path')}): {rubric['summary']}"
    return {
        "threshold": int(threshold),
        "definition": text,
        "scale": {str(g): scale[g] for g in sorted(scale)},
        "rubric": dict(rubric) if rubric else None,
    }


def label_source(judgments_meta: Mapping[str, Any], judgments_params: Mapping[str, Any]) -> str:
    annotators = judgments_meta.get("annotators")
    if annotators:
        how = judgments_meta.get("aggregation") or "one grade per (query, document)"
        return (
            f"releval judgment set {judgments_meta.get('version')} by annotators {', '.join(annotators)}; "
            f"several grades of one pair are combined as the {how}"
        )
    fmt = judgments_params.get("format", "unknown")
    return (
        f"imported from a {fmt} qrels file ({judgments_meta.get('source') or judgments_params.get('path')}); "
        "grades as the collection's assessors gave them"
    )


def metric_cutoffs(metrics: Iterable[str]) -> list[int]:
    return sorted({m.k for m in (parse_metric(name) for name in metrics) if m.k is not None})


def contract_summary(contract: Mapping[str, Any]) -> dict[str, Any]:
    """The card's contract block: a readable summary beside the full terms (the coverage terms,
    when recorded, among the policies as a sentence; in ``terms`` as recorded)."""
    metrics = list(contract.get("metrics") or [])
    policies = {
        key: contract.get(key) for key in ("ties", "no_relevant", "missing_in_run", "unjudged", "collapse", "idcg")
    }
    if contract.get(scoring.COVERAGE_KEY) is not None:
        policies[scoring.COVERAGE_KEY] = coverage_policy(contract)
    return {
        "metrics": metrics,
        "primary": contract.get("primary"),
        "k": metric_cutoffs(metrics),
        "gain": contract.get("gain"),
        "discount": contract.get("discount"),
        "aggregation": contract.get("aggregation"),
        "policies": policies,
        "terms": dict(contract),
    }


def coverage_policy(contract: Mapping[str, Any]) -> str:
    """The contract's coverage terms as one sentence."""
    terms = scoring.coverage_terms(contract, source="metrics.json contract")
    judged = scoring.coverage_metric(contract) or "judged@k"
    return (
        f"a comparison is coverage-confounded, no verdict, when either side's {judged} is below "
        f"{terms.min_judged:g} or the two differ by more than {terms.max_judged_gap:g}"
    )


def build_card(
    *,
    contract: Mapping[str, Any],
    dataset: Mapping[str, Any],
    judgments_params: Mapping[str, Any],
    judgments_meta: Mapping[str, Any],
    corpus: Mapping[str, Any],
    queries: Mapping[str, Any],
    qrels_sha256: str,
    models: Mapping[str, Mapping[str, Any]],
    slices: Mapping[str, int],
    holdout: Mapping[str, Any],
    code: Mapping[str, Any],
    rubric: Mapping[str, Any] | None = None,
    external: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The evaluation card.

    ``corpus``: id, source, format, content_sha256, file_sha256, source_sha256, documents, subset.
    ``queries``: id, version, source, format, content_sha256, file_sha256, source_sha256, total,
    splits. ``models``: name -> declared protocol (from params). ``holdout``: the summary of
    :func:`releval.measurement.holdout.summary` plus ``sealed_queries``. ``code``: the commit whose
    inputs (code, params, data, judgments) made the results -- the last commit that changed one, so
    a commit that only adds results does not move it -- whether the inputs differed from HEAD
    (``dirty``) and which (``dirty_paths``); the outputs being written never count
    (:func:`releval.reporting.card_inputs.code_state`). ``external``: the run files produced
    elsewhere that were scored (:func:`external_runs`); recorded, not part of the card's identity.
    """
    threshold = int(contract.get("rel_threshold", 1))
    card = {
        "schema": CARD_SCHEMA,
        "card_id": "",
        "dataset": str(dataset.get("name", "unknown")),
        "corpus": {
            "id": str(corpus.get("id") or dataset.get("name", "unknown")),
            "source": corpus.get("source"),
            "format": corpus.get("format"),
            "content_sha256": corpus["content_sha256"],
            "file_sha256": corpus.get("file_sha256"),
            "source_sha256": corpus.get("source_sha256"),
            "documents": int(corpus["documents"]),
            "subset": corpus.get("subset"),
        },
        "queries": {
            "id": str(queries.get("id") or dataset.get("name", "unknown")),
            "version": str(queries.get("version") or f"sha256:{queries['content_sha256'][:12]}"),
            "source": queries.get("source"),
            "format": queries.get("format"),
            "content_sha256": queries["content_sha256"],
            "file_sha256": queries.get("file_sha256"),
            "source_sha256": queries.get("source_sha256"),
            "count": int(contract.get("queries", queries.get("total", 0))),
            "total": int(queries.get("total", 0)),
            "split": str(contract.get("split", "all")),
            "splits": {str(k): int(v) for k, v in (queries.get("splits") or {}).items()},
        },
        "judgments": {
            "version": str(judgments_meta.get("version", contract.get("judgments_version"))),
            "sha256": str(judgments_meta.get("source_sha256", contract.get("judgments_sha256"))),
            "qrels_sha256": qrels_sha256,
            "source": judgments_meta.get("source"),
            "format": judgments_params.get("format"),
            "parent": judgments_meta.get("parent"),
            "date": judgments_meta.get("date"),
            "label_source": label_source(judgments_meta, judgments_params),
            "relevance": relevance_definition(
                threshold, judgments_meta.get("scale") or judgments_params.get("scale"), rubric
            ),
            "counts": dict(judgments_meta.get("counts") or {}),
        },
        "contract": contract_summary(contract),
        "representation_protocol": {
            "policy": PROTOCOL_POLICY,
            "declared": {name: declared_protocol(cfg) for name, cfg in sorted(models.items())},
        },
        "slices": {str(k): int(v) for k, v in sorted(slices.items())},
        "holdout": {
            "scored": str(contract.get("split", "all")) in ("holdout", "all") and bool(holdout.get("holdout_queries")),
            "holdout_queries": int(holdout.get("holdout_queries", 0)),
            "sealed_queries": int(holdout.get("sealed_queries", 0)),
            "openings": int(holdout.get("openings", 0)),
            "last_opening": holdout.get("last_opening"),
            "log": holdout.get("log"),
        },
        "code": {
            "commit": code.get("commit"),
            "dirty": bool(code.get("dirty")),
            "dirty_paths": list(code.get("dirty_paths") or []),
        },
    }
    if external:
        card["external_runs"] = {str(cid): dict(record) for cid, record in sorted(external.items())}
    card["card_id"] = card_id(card)
    return card


EXTERNAL_RECORD = ("path", "format", "sha256", "description", "unit")
# A live search endpoint's snapshot (run.json's external.endpoint): where, what was asked, when, how much.
EXTERNAL_ENDPOINT_RECORD = ("url", "method", "body", "params", "taken_at", "queries_sent", "responses_sha256")


def external_record(run_meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the card says of an external run (its run.json's ``external``): file, format, sha256,
    the declared description and unit; None for a run the pipeline made."""
    record = run_meta.get("external")
    if not record:
        return None
    carded = {key: record.get(key) for key in EXTERNAL_RECORD}
    if record.get("endpoint"):  # a snapshot of a live system: the card says which, and when
        carded["endpoint"] = {key: record["endpoint"].get(key) for key in EXTERNAL_ENDPOINT_RECORD}
    return carded


def external_runs(run_metas: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Configuration id -> :func:`external_record`, for the external runs among ``run_metas``."""
    return {cid: rec for cid, meta in sorted(run_metas.items()) if (rec := external_record(meta or {})) is not None}


def declared_protocol(model_cfg: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("query_prompt", "document_prompt", "asymmetric", "normalize", "max_seq_length", "dtype")
    declared = {key: model_cfg.get(key) for key in keys if key in model_cfg}
    # Running a model's own code is a trust decision: the card always says which way it went.
    declared["trust_remote_code"] = bool(model_cfg.get("trust_remote_code", False))
    return declared


def identity(card: Mapping[str, Any]) -> dict[str, Any]:
    """The card fields that decide comparability, plus the contract terms that change a number."""
    found = {path: _get(card, path) for path in IDENTITY_FIELDS}
    terms = card.get("contract", {}).get("terms", {})
    found.update({f"contract.{k}": v for k, v in sorted(terms.items()) if k not in pair.IGNORED_CONTRACT_FIELDS})
    return found


def card_id(card: Mapping[str, Any]) -> str:
    """A short content id over :func:`identity`: equal ids, comparable numbers."""
    blob = json.dumps(identity(card), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def card_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Every comparability field on which two cards differ, as ``"field: A x, B y"``."""
    found = []
    ida, idb = identity(a), identity(b)
    for path in IDENTITY_FIELDS:
        if ida.get(path) != idb.get(path):
            found.append(f"{path}: {_show(ida.get(path))} vs {_show(idb.get(path))}")
    terms_a = a.get("contract", {}).get("terms", {})
    terms_b = b.get("contract", {}).get("terms", {})
    found += [f"contract.{d}" for d in pair.contract_differences(terms_a, terms_b)]
    return found


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "…'"


def _get(node: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


# --------------------------------------------------------------------------- observations


def build_observation(
    card: Mapping[str, Any],
    config_id: str,
    scores: Mapping[str, Any],
    lineage: Mapping[str, Any],
    run_meta: Mapping[str, Any] | None = None,
    slices: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """One configuration's observation under ``card``.

    ``scores`` is the configuration's block of reports/metrics.json (metric means, ``ops``,
    ``counts``, optionally ``slices``); ``lineage`` its reports/lineage.json entry; ``run_meta``
    its run.json (kind, chunking, model); ``slices`` per-slice means when metrics.json has none.
    """
    run_meta = dict(run_meta or {})
    ops = dict(scores.get("ops") or {})
    metrics = list(card["contract"]["metrics"])
    overall = {m: float(scores[m]) for m in metrics if m in scores}
    models = {
        name: dict(info) for name, info in sorted((lineage.get("models") or run_meta.get("models") or {}).items())
    }
    first_stage = run_meta.get("model")
    applied = {}
    for name, info in models.items():
        protocol = dict(info.get("protocol") or {})
        applied[name] = {
            "query_prompt": protocol.get("query_prompt"),
            "document_prompt": protocol.get("document_prompt"),
            "normalize": protocol.get("normalize"),
            "max_seq_length": protocol.get("max_seq_length", protocol.get("max_length")),
            "role": _role(name, first_stage, run_meta),
            "truncation_rate": ops.get("truncation_rate") if name == first_stage else None,
            "truncated_token_share": ops.get("truncated_token_share") if name == first_stage else None,
        }
    first_protocol = (models.get(first_stage) or {}).get("protocol") or {}
    memory = next((ops[k] for k in MEMORY_KEYS if ops.get(k) is not None), None)
    observed_ops = {
        "chunks_per_s": ops.get("chunks_per_s"),
        "tokens_per_s": ops.get("tokens_per_s"),
        "latency_ms_p50": ops.get("latency_ms_p50"),
        "latency_ms_p95": ops.get("latency_ms_p95"),
        "memory_bytes": memory,
        "index_bytes": ops.get("index_bytes"),
        "index_build_s": ops.get("index_build_s"),
        "dimension": ops.get("dimension"),
        "max_seq_length": first_protocol.get("max_seq_length"),
        "truncation_rate": ops.get("truncation_rate"),
        "truncated_token_share": ops.get("truncated_token_share"),
    }
    slice_scores = scores.get("slices") if scores.get("slices") is not None else (slices or {})
    counts = scores.get("counts") or {}
    external = external_record(run_meta)
    observation = {
        "schema": OBSERVATION_SCHEMA,
        "card_id": card["card_id"],
        "config_id": config_id,
        "kind": run_meta.get("kind"),
        "chunking": run_meta.get("chunking"),
        "inputs": list(lineage.get("inputs") or run_meta.get("inputs") or []),
        "models": {
            name: {
                "revision": info.get("revision"),
                "weights_sha256": info.get("weights_sha256"),
                "protocol": dict(info.get("protocol") or {}),
            }
            for name, info in models.items()
        },
        "protocol_applied": applied,
        "scores": {
            "overall": overall,
            "slices": {
                str(name): {
                    "queries": int(s.get("queries", 0)),
                    "mean": {m: float(v) for m, v in (s.get("mean") or {}).items() if v is not None},
                }
                for name, s in sorted(slice_scores.items())
            },
            "queries_evaluated": int(counts.get("queries_evaluated", 0)),
        },
        "ops": observed_ops,
        "run": {"dir": lineage.get("run_dir"), "sha256": lineage.get("run_sha256")},
        "warnings": list(warnings),
    }
    if external is not None:
        observation["external"] = external
    return observation


def _role(name: str, first_stage: str | None, run_meta: Mapping[str, Any]) -> str:
    reranker = run_meta.get("reranker") or {}
    if reranker and reranker.get("model") == name and name != first_stage:
        return "reranker"
    return "first-stage" if name == first_stage else "input"


def slice_means(
    per_query: pl.DataFrame, slices: Mapping[str, Sequence[str]], metrics: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per-slice means of one configuration's per-query scores (``query_id`` + metric columns)."""
    out = {}
    for name, ids in sorted(slices.items()):
        rows = per_query.filter(pl.col("query_id").cast(pl.Utf8).is_in(pl.Series(list(ids), dtype=pl.Utf8).implode()))
        out[name] = {
            "queries": rows.height,
            "mean": {m: float(rows[m].mean()) for m in metrics if m in rows.columns and rows.height},
        }
    return out


# --------------------------------------------------------------------------- ranking


@dataclass(frozen=True)
class Ranked:
    config_id: str
    value: float
    observation: dict[str, Any]


def rank_observations(
    observations: Sequence[Mapping[str, Any]], cards: Sequence[Mapping[str, Any]], metric: str
) -> list[Ranked]:
    """Observations best first by ``metric``; refused unless they all sit under one card.

    Cards are matched by ``card_id``; the refusal names every differing comparability field
    (judgment version, query-set hash, contract terms, ...). Models using different prompts
    under one card are ranked normally.
    """
    if not observations:
        return []
    by_id: dict[str, Mapping[str, Any]] = {}
    for card in cards:
        recomputed = card_id(card)
        if card.get("card_id") != recomputed:
            raise InputError(
                f"card_id {card.get('card_id')!r} does not match its content ({recomputed}); "
                "the card was edited by hand",
                field="card_id",
            )
        by_id[recomputed] = card
    used = list(dict.fromkeys(str(o.get("card_id")) for o in observations))
    unknown = [u for u in used if u not in by_id]
    if unknown:
        raise InputError(
            f"observation(s) under unknown card(s) {', '.join(unknown)}; pass their cards", field="card_id"
        )
    if len(used) > 1:
        base = by_id[used[0]]
        differences = []
        for other in used[1:]:
            found = card_differences(base, by_id[other])
            differences += found or [f"card_id {used[0]} vs {other}"]
        raise CardMismatch(list(dict.fromkeys(differences)))
    ranked = []
    for obs in observations:
        value = (obs.get("scores") or {}).get("overall", {}).get(metric)
        if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"{obs.get('config_id')} has no {metric} score", field=metric)
        ranked.append(Ranked(str(obs["config_id"]), float(value), dict(obs)))
    return sorted(ranked, key=lambda r: (-r.value, r.config_id))


# --------------------------------------------------------------------------- validation


class _Opt:
    def __init__(self, spec):
        self.spec = spec


class _List:
    def __init__(self, spec):
        self.spec = spec


class _Map:
    """A mapping with free keys (strings) and values of one spec."""

    def __init__(self, spec):
        self.spec = spec


class _Enum:
    def __init__(self, *values):
        self.values = values


class _Absent:
    """A key that may be left out (when present, its value must match ``spec``)."""

    def __init__(self, spec):
        self.spec = spec


_NUM = (int, float)
_STR = str
_ANY = object

_PROTOCOL = _Map(_ANY)
_HOLDOUT_ENTRY = {"when": _STR, "who": _STR, "split": _STR, "configs": _List(_STR), "command": _STR}
_EXTERNAL = {
    "path": _STR,
    "format": _STR,
    "sha256": _STR,
    "description": {"system": _STR, "produced": _STR, "by": _STR},
    "unit": _STR,
    "endpoint": _Absent(
        {
            "url": _STR,
            "method": _STR,
            "body": _Opt(_ANY),
            "params": _Opt(_ANY),
            "taken_at": _STR,
            "queries_sent": int,
            "responses_sha256": _STR,
        }
    ),
}

CARD_SPEC = {
    "schema": _Enum(CARD_SCHEMA),
    "card_id": _STR,
    "dataset": _STR,
    "corpus": {
        "id": _STR,
        "source": _Opt(_STR),
        "format": _Opt(_STR),
        "content_sha256": _STR,
        "file_sha256": _Opt(_STR),
        "source_sha256": _Opt(_STR),
        "documents": int,
        "subset": _Opt(_ANY),
    },
    "queries": {
        "id": _STR,
        "version": _STR,
        "source": _Opt(_STR),
        "format": _Opt(_STR),
        "content_sha256": _STR,
        "file_sha256": _Opt(_STR),
        "source_sha256": _Opt(_STR),
        "count": int,
        "total": int,
        "split": _Enum("dev", "holdout", "all"),
        "splits": _Map(int),
    },
    "judgments": {
        "version": _STR,
        "sha256": _STR,
        "qrels_sha256": _STR,
        "source": _Opt(_STR),
        "format": _Opt(_STR),
        "parent": _Opt(_STR),
        "date": _Opt(_STR),
        "label_source": _STR,
        "relevance": {
            "threshold": int,
            "definition": _STR,
            "scale": _Map(_STR),
            "rubric": _Opt({"path": _Opt(_STR), "sha256": _Opt(_STR), "summary": _Opt(_STR)}),
        },
        "counts": _Map(_ANY),
    },
    "contract": {
        "metrics": _List(_STR),
        "primary": _STR,
        "k": _List(int),
        "gain": _STR,
        "discount": _Opt(_STR),
        "aggregation": _Opt(_STR),
        "policies": _Map(_Opt(_STR)),
        "terms": _Map(_ANY),
    },
    "representation_protocol": {"policy": _STR, "declared": _Map(_PROTOCOL)},
    "slices": _Map(int),
    "holdout": {
        "scored": bool,
        "holdout_queries": int,
        "sealed_queries": int,
        "openings": int,
        "last_opening": _Opt(_HOLDOUT_ENTRY),
        "log": _Opt(_STR),
    },
    "code": {"commit": _Opt(_STR), "dirty": bool, "dirty_paths": _List(_STR)},
    "external_runs": _Absent(_Map(_EXTERNAL)),
}

OBSERVATION_SPEC = {
    "schema": _Enum(OBSERVATION_SCHEMA),
    "card_id": _STR,
    "config_id": _STR,
    "kind": _Opt(_STR),
    "chunking": _Opt(_STR),
    "inputs": _List(_STR),
    "models": _Map({"revision": _Opt(_STR), "weights_sha256": _Opt(_STR), "protocol": _PROTOCOL}),
    "protocol_applied": _Map(
        {
            "query_prompt": _Opt(_STR),
            "document_prompt": _Opt(_STR),
            "normalize": _Opt(bool),
            "max_seq_length": _Opt(int),
            "role": _Enum("first-stage", "reranker", "input"),
            "truncation_rate": _Opt(_NUM),
            "truncated_token_share": _Opt(_NUM),
        }
    ),
    "scores": {"overall": _Map(_NUM), "slices": _Map({"queries": int, "mean": _Map(_NUM)}), "queries_evaluated": int},
    "ops": {name: _Opt(_NUM) for name in OPS_FIELDS},
    "run": {"dir": _Opt(_STR), "sha256": _Opt(_STR)},
    "warnings": _List(_STR),
    "external": _Absent(_EXTERNAL),
}


def _check(value: Any, spec: Any, path: str, errors: list[InputError], source: str) -> None:
    if isinstance(spec, _Absent):
        _check(value, spec.spec, path, errors, source)
        return
    if isinstance(spec, _Opt):
        if value is not None:
            _check(value, spec.spec, path, errors, source)
        return
    if spec is _ANY:
        if value is None:
            errors.append(InputError("missing value", file=source, field=path))
        return
    if isinstance(spec, _Enum):
        if value not in spec.values:
            errors.append(
                InputError(
                    f"must be one of {', '.join(map(repr, spec.values))}, got {value!r}", file=source, field=path
                )
            )
        return
    if isinstance(spec, dict):
        if not isinstance(value, Mapping):
            errors.append(InputError(f"must be an object, got {_type(value)}", file=source, field=path))
            return
        for key in spec:
            if key not in value and not isinstance(spec[key], _Absent):
                errors.append(InputError("missing", file=source, field=_join(path, key)))
        for key in value:
            if key not in spec:
                errors.append(InputError("unknown key", file=source, field=_join(path, key)))
        for key, sub in spec.items():
            if key in value:
                _check(value[key], sub, _join(path, key), errors, source)
        return
    if isinstance(spec, _List):
        if not isinstance(value, list):
            errors.append(InputError(f"must be a list, got {_type(value)}", file=source, field=path))
            return
        for i, item in enumerate(value):
            _check(item, spec.spec, f"{path}[{i}]", errors, source)
        return
    if isinstance(spec, _Map):
        if not isinstance(value, Mapping):
            errors.append(InputError(f"must be an object, got {_type(value)}", file=source, field=path))
            return
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(InputError(f"key {key!r} must be a string", file=source, field=path))
            _check(item, spec.spec, _join(path, str(key)), errors, source)
        return
    expected = spec if isinstance(spec, tuple) else (spec,)
    ok = isinstance(value, expected) and not (isinstance(value, bool) and bool not in expected)
    if ok and isinstance(value, float) and not math.isfinite(value):
        errors.append(InputError(f"must be finite, got {value}", file=source, field=path))
    elif not ok:
        names = " or ".join(t.__name__ for t in expected)
        errors.append(InputError(f"must be {names}, got {_type(value)}", file=source, field=path))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _validate(document: Any, spec: dict, source: str) -> None:
    errors: list[InputError] = []
    _check(document, spec, "", errors, source)
    if errors:
        raise InputErrors(errors)


def validate_card(card: Any, source: str = paths.CARD) -> None:
    """Raise :class:`InputErrors` naming every problem; also checks that card_id matches the content."""
    _validate(card, CARD_SPEC, source)
    if card["card_id"] != card_id(card):
        raise InputError(
            f"card_id {card['card_id']!r} does not match the card's content ({card_id(card)})",
            file=source,
            field="card_id",
        )


def validate_observation(observation: Any, source: str = paths.OBSERVATIONS) -> None:
    _validate(observation, OBSERVATION_SPEC, source)


def validate_observations(
    document: Any, card: Mapping[str, Any] | None = None, source: str = paths.OBSERVATIONS
) -> None:
    """reports/observations.json: ``{"card_id": ..., "observations": [...]}``, each under ``card``."""
    if not isinstance(document, Mapping) or set(document) != {"card_id", "observations"}:
        raise InputError("expected an object with exactly card_id and observations", file=source)
    errors: list[InputError] = []
    for i, obs in enumerate(document["observations"]):
        try:
            validate_observation(obs, f"{source} observations[{i}]")
        except InputErrors as exc:
            errors += exc.errors
        if isinstance(obs, Mapping) and obs.get("card_id") != document["card_id"]:
            errors.append(
                InputError(
                    f"card_id {obs.get('card_id')!r} differs from the file's {document['card_id']!r}",
                    file=source,
                    field=f"observations[{i}].card_id",
                )
            )
    if card is not None and document["card_id"] != card.get("card_id"):
        errors.append(
            InputError(
                f"card_id {document['card_id']!r} is not the card's {card.get('card_id')!r}",
                file=source,
                field="card_id",
            )
        )
    if errors:
        raise InputErrors(errors)


# --------------------------------------------------------------------------- text


def card_markdown(card: Mapping[str, Any]) -> str:
    """The card as a short Markdown section (for reports/report.md)."""
    c, q, j, k = card["corpus"], card["queries"], card["judgments"], card["contract"]
    h, code = card["holdout"], card["code"]
    policies = "; ".join(f"{key} {value}" for key, value in k["policies"].items() if value is not None)
    last = h.get("last_opening")
    opened = (
        f"opened {h['openings']} time(s); last {last['when']} by {last['who']} "
        f"({', '.join(last['configs']) or 'no configuration'}; `{last['command']}`)"
        if last
        else "never opened"
    )
    lines = [
        f"- **card** `{card['card_id']}` (numbers are comparable only under the same card)",
        f"- **corpus** {c['id']}: {c['documents']} documents, content sha256 `{c['content_sha256'][:16]}…`"
        + (f", source `{c['source']}`" if c.get("source") else "")
        + (f" (sha256 `{c['source_sha256'][:16]}…`)" if c.get("source_sha256") else ""),
        f"- **queries** {q['id']} version {q['version']}: {q['count']} scored (split {q['split']}) of {q['total']}"
        + (f" (dev {q['splits'].get('dev', 0)}, holdout {q['splits'].get('holdout', 0)})" if q.get("splits") else "")
        + f", content sha256 `{q['content_sha256'][:16]}…`",
        f"- **judgments** {j['version']} (sha256 `{j['sha256'][:16]}…`): {j['label_source']}",
        f"- **relevance** {j['relevance']['definition']}",
        f"- **contract** {', '.join(k['metrics'])} (primary {k['primary']}; k = {', '.join(map(str, k['k']))}); "
        f"gain {k['gain']}, discount {k.get('discount')}, aggregation {k.get('aggregation')}; {policies}",
        f"- **representation protocol** {card['representation_protocol']['policy']}",
        "- **slices** " + (", ".join(f"{name} ({n})" for name, n in card["slices"].items()) or "none declared"),
        f"- **holdout** {h['holdout_queries']} holdout queries, {'scored' if h['scored'] else 'sealed (not scored)'}; "
        f"{opened}",
        f"- **code** inputs (code, params, data, judgments) of commit `{code['commit'] or 'none'}`"
        + (
            f", dirty ({', '.join(code['dirty_paths'][:6])}{', …' if len(code['dirty_paths']) > 6 else ''})"
            if code["dirty"]
            else ", clean"
        ),
    ]
    return "\n".join(lines)
