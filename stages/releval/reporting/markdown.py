"""Human-readable reports rendered from scored results (pure: data in, text out)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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


def grid_markdown(
    results: dict[str, dict[str, Any]], contract: dict[str, Any], quality: list[str], primary: str
) -> str:
    """The configurations side by side, best primary metric first."""
    order = sorted(results, key=lambda cid: (-_num(results[cid]["mean"].get(primary)), cid))
    header = ["configuration", *quality, *[label for _, label, _ in GRID_OPS]]
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
        cells = [f"`{cid}`"] + [format_cell(row["mean"].get(m), "{:.4f}") for m in quality]
        for key, _, fmt in GRID_OPS:
            value = row["ops"].get(key)
            cells.append(
                format_cell(value / 1e6, "{:.2f}" if key == "index_bytes" else "{:.0f}")
                if key.endswith("_bytes") and value is not None
                else format_cell(value, fmt)
            )
        lines.append("| " + " | ".join(cells) + " |")
    warnings = [w for cid in order for w in results[cid].get("warnings", [])]
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    return "\n".join(lines) + "\n"


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
