"""Human-readable reports rendered from scored results (pure: data in, text out)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from releval.measurement import evidence, scoring

# Cost figures only: throughput, latency and memory depend on the machine (reports/ops.md).
GRID_OPS = [
    ("dimension", "dim", "{:d}"),
    ("index_bytes", "index MB", None),
    ("doc_nonzeros_mean", "nnz/chunk", "{:.0f}"),  # sparse models: terms per chunk and per query
    ("query_nonzeros_mean", "nnz/query", "{:.0f}"),
    ("truncation_rate", "chunks cut", "{:.1%}"),
    ("truncated_token_share", "tokens lost", "{:.1%}"),
]


def table_quality_metrics(metrics: Sequence[str]) -> list[str]:
    """The quality metrics a table shows: the first four, coverage (judged@k) and ceiling@k left out."""
    return [m for m in metrics if not m.startswith(("judged@", "ceiling@"))][:4]


SATURATED = "(sat.)"  # beside a value whose cutoff reaches too far into the corpus to tell systems apart


def metric_cell(metric: str, value: Any, saturated: Collection[str] = (), fmt: str = "{:.4f}") -> str:
    """A metric's table cell; a saturated metric's value is marked ``1.0000 (sat.)``."""
    cell = format_cell(value, fmt)
    return f"{cell} {SATURATED}" if metric in saturated and value is not None else cell


def saturation_note(saturation: Mapping[str, Any] | None, shown: Sequence[str] = ()) -> str | None:
    """The sentence under a table about saturated cutoffs (metrics.json's ``saturation`` block,
    :func:`releval.measurement.scoring.saturation`): those among the ``shown`` columns carry the
    mark, the others are named as saturated where they are stored; None when nothing is saturated."""
    if not saturation or not saturation.get("saturated"):
        return None
    saturated = list(saturation["saturated"])
    marked = [m for m in saturated if m in shown]
    elsewhere = [m for m in saturated if m not in shown]
    why = (
        f"at least {saturation['share']:.0%} of the corpus's {saturation['documents']} documents, so almost any "
        "system finds almost every relevant document there: the value tells systems apart little; a recall cutoff "
        f"below {saturation['share'] * saturation['documents']:g} does."
    )
    parts = []
    if marked:
        parts.append(f"{SATURATED}: saturated ({', '.join(marked)}).")
    if elsewhere:
        parts.append(
            f"Saturated and not shown here (metrics.json marks {'it' if len(elsewhere) == 1 else 'them'}): "
            f"{', '.join(elsewhere)}."
        )
    return " ".join(parts) + f" A saturated cutoff reaches {why}"


def coverage_note(means: Mapping[str, Mapping[str, Any]], contract: Mapping[str, Any]) -> str | None:
    """The sentence under a table naming the configurations below the contract's coverage
    (``min_judged`` at the primary's judged@k); None when none is, or no judged@k was scored."""
    judged = scoring.coverage_metric(contract)
    if judged is None:
        return None
    terms = scoring.coverage_terms(contract, source="metrics.json contract")
    low = [
        (cid, row[judged])
        for cid, row in means.items()
        if isinstance(row.get(judged), (int, float)) and scoring.coverage_verdict(row[judged], row[judged], terms)
    ]
    if not low:
        return None
    listed = ", ".join(f"`{cid}` {value:.2f}" for cid, value in low)
    return (
        f"{judged} below the contract's {terms.min_judged:g} (metric.coverage.min_judged): {listed}. Unjudged "
        f"documents count as non-relevant, so these scores are lower bounds and every comparison with them is "
        f"coverage-confounded; `{scoring.POOL_MISSING}` lists the documents to judge."
    )


def grid_markdown(
    results: dict[str, dict[str, Any]],
    contract: dict[str, Any],
    quality: list[str],
    primary: str,
    *,
    saturation: Mapping[str, Any] | None = None,
) -> str:
    """The configurations side by side, best primary metric first, with the primary's judged@k
    (:func:`releval.measurement.scoring.coverage_metric`) as a column when it was scored.

    ``saturation`` (metrics.json's block) marks saturated values ``1.0000 (sat.)``."""
    order = sorted(results, key=lambda cid: (-_num(results[cid]["mean"].get(primary)), cid))
    judged = scoring.coverage_metric(contract)
    judged = judged if judged is not None and any(judged in r["mean"] for r in results.values()) else None
    saturated = list((saturation or {}).get("saturated") or [])
    passages = evidence_columns(contract)
    header = [
        "configuration",
        *quality,
        *([judged] if judged else []),
        *[label for _, label in passages],
        *[label for _, label, _ in GRID_OPS],
    ]
    lines = [
        "# Retrieval grid",
        "",
        _contract_line(contract),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    for cid in order:
        row = results[cid]
        cells = [f"`{cid}`"] + [metric_cell(m, row["mean"].get(m), saturated) for m in quality]
        if judged:
            cells.append(format_cell(row["mean"].get(judged), "{:.2f}"))
        found = (row.get(scoring.EVIDENCE_KEY) or {}).get("mean") or {}
        cells += [format_cell(found.get(name)) for name, _ in passages]
        for key, _, fmt in GRID_OPS:
            value = row["ops"].get(key)
            cells.append(
                format_cell(value / 1e6, "{:.2f}" if key == "index_bytes" else "{:.0f}")
                if key.endswith("_bytes") and value is not None
                else format_cell(value, fmt)
            )
        lines.append("| " + " | ".join(cells) + " |")
    notes = [
        saturation_note(saturation, quality),
        coverage_note({cid: results[cid]["mean"] for cid in order}, contract),
        evidence_note(contract, results),
    ]
    lines += [line for note in notes if note for line in ("", note)]
    warnings = [w for cid in order for w in results[cid].get("warnings", [])]
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    return "\n".join(lines) + "\n"


def evidence_columns(contract: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(metric, column label) of the passage-level figures the contract records terms for."""
    terms = contract.get(scoring.EVIDENCE_KEY)
    if not isinstance(terms, Mapping):
        return []
    names = [(f"evidence_recall@{k}", f"evidence recall@{k}") for k in terms.get("k") or []]
    return names + [(f"evidence_recall@{b}tok", f"evidence @{b} tok") for b in terms.get("budgets") or []]


def evidence_note(contract: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]]) -> str | None:
    """What the passage-level columns are, and which configurations have none."""
    terms = contract.get(scoring.EVIDENCE_KEY)
    if not isinstance(terms, Mapping):
        return None
    none = sorted(cid for cid, r in results.items() if "mean" not in (r.get(scoring.EVIDENCE_KEY) or {}))
    without = f"; none for {', '.join(f'`{c}`' for c in none)} (no chunk offsets)" if none else ""
    return (
        f"Evidence: the share of the judged evidence spans a configuration's top chunks cover (a chunk bears a "
        f"span when it holds at least {terms.get('tau')} of its characters), in its top k chunks and within "
        f"prompts of a token budget (the top chunks in rank order while they fit){without}. Only queries "
        f"with spans count. Compare by name, e.g. `releval compare A B --metric "
        f"{evidence.budget_name(terms['budgets'][0]) if terms.get('budgets') else evidence.recall_name(10)}`."
    )


def _contract_line(contract: dict[str, Any]) -> str:
    parts = [f"{key}: {value}" for key, value in contract.items() if not isinstance(value, (dict, list))]
    return "Contract — " + "; ".join(parts)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else float("-inf")


def format_cell(value: Any, fmt: str | None = "{:.4f}") -> str:
    """A table cell: ``value`` under ``fmt`` ("–" for no value; as it is when it will not format)."""
    if value is None:
        return "–"
    if fmt is None:
        return str(value)
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)
