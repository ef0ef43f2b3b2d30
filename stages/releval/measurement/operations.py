"""Machine-dependent figures kept apart from quality figures.

A run's ``ops`` (its run.json) mixes two kinds of figures. Cost figures follow from the
configuration alone and are the same on every machine (embedding dimension, index bytes,
truncation, ANN recall): they stay with the quality metrics in reports/metrics.json. Machine
figures (throughput, build time, latency, memory) depend on the CPU, its load and the thread
count: they go to reports/ops.json, a DVC metrics file of their own, beside a description of
the machine and the latency protocol, so `git status` and `dvc metrics diff` across machines
show no quality change.

Money figures (endpoint models with a declared price, :mod:`releval.retrieval.endpoint`): the cost
to index the corpus and per 1,000 queries follow from the configuration and the tokens the endpoint
counted, so they stay with the cost figures, and ops.md shows them beside latency. A configuration
without a price has none (not 0).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from releval.retrieval.runs import LATENCY_PROTOCOL

MACHINE_FIGURES = frozenset(
    {
        "chunks_per_s",
        "tokens_per_s",
        "index_build_s",
        "latency_ms_p50",
        "latency_ms_p95",
        "peak_rss_bytes",
        "rerank_s",
    }
)

# In money, at the model's declared price_per_million_tokens: the cost to index the corpus, per 1,000 queries.
MONEY_FIGURES = ("index_cost", "query_cost_per_1k")
MONEY_COLUMNS = (("index_cost", "index cost"), ("query_cost_per_1k", "cost / 1k queries"))


def cost_figures(ops: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of ``ops`` that do not depend on the machine."""
    return {key: value for key, value in ops.items() if key not in MACHINE_FIGURES}


def machine_figures(ops: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of ``ops`` measured in time or memory on this machine, and the money figures
    where there are any (shown beside them in ops.md)."""
    return {key: value for key, value in ops.items() if key in MACHINE_FIGURES or key in MONEY_FIGURES}


# A fused run's figures taken from its first member that has them (encoding) and, for sparse members, their sizes.
FUSED_ENCODING_FIGURES = ("dimension", "chunks_per_s", "tokens_per_s", "truncation_rate", "truncated_token_share")
FUSED_SPARSE_FIGURES = ("doc_nonzeros_mean", "query_nonzeros_mean")  # only where a member is a sparse model


def _first_figure(metas: Sequence[Mapping[str, Any]], key: str) -> Any:
    return next((m["ops"][key] for m in metas if m["ops"].get(key) is not None), None)


def fused_figures(metas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``ops`` of a fused run from its members' run.json ``metas``. Serving every member: index bytes,
    peak memory and latency add up (the sum of medians approximates the fused median); encoding figures
    are those of the first member that has them."""
    ops = {key: _first_figure(metas, key) for key in FUSED_ENCODING_FIGURES}
    ops |= {key: value for key in FUSED_SPARSE_FIGURES if (value := _first_figure(metas, key)) is not None}
    for key in ("index_bytes", "peak_rss_bytes", "latency_ms_p50", "latency_ms_p95"):
        values = [m["ops"].get(key) for m in metas]  # an external run has no cost figures: the sum is unknown
        ops[key] = None if any(v is None for v in values) else sum(values)
    for key in MONEY_FIGURES:  # serving every member: what the priced ones cost
        priced = [m["ops"][key] for m in metas if m["ops"].get(key) is not None]
        if priced:
            ops[key] = round(sum(priced), 6)
    return ops


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_machine() -> dict[str, Any]:
    """What the machine figures were measured on: CPU, cores, threads, device and load."""
    torch = sys.modules.get("torch")
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    return {
        "cpu": cpu_model(),
        "architecture": platform.machine(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "device": "cpu",
        "load_1min": load,
        "python": platform.python_version(),
    }


def ops_document(machine_ops: Mapping[str, Mapping[str, Any]], machine: Mapping[str, Any]) -> dict[str, Any]:
    """reports/ops.json: each configuration's machine figures, the machine and the protocol."""
    return {
        "machine": dict(machine),
        "latency_protocol": dict(LATENCY_PROTOCOL),
        "configs": {cid: dict(figures) for cid, figures in machine_ops.items()},
    }


def ops_markdown(document: Mapping[str, Any]) -> str:
    """reports/ops.md: the machine figures as a table, with what they were measured on."""
    machine, protocol = document["machine"], document["latency_protocol"]
    columns = [
        ("chunks_per_s", "chunks/s", 1, 1),
        ("index_build_s", "index build s", 1, 2),
        ("latency_ms_p50", "p50 ms", 1, 1),
        ("latency_ms_p95", "p95 ms", 1, 1),
        ("peak_rss_bytes", "peak MB", 1e6, 0),
    ]
    lines = [
        "# Machine figures",
        "",
        "Measured on this machine; they differ from machine to machine and run to run, which is why",
        "they are kept apart from the quality figures (reports/metrics.json, grid.md, report.md).",
        "",
        f"Machine: {machine['cpu']} ({machine['architecture']}), {machine['usable_cores']} usable of "
        f"{machine['logical_cores']} logical cores, encoding on "
        f"{machine['torch_threads'] or 'torch’s default number of'} torch thread(s), "
        f"device {machine['device']}, 1-minute load {machine['load_1min']} when scored.",
        f"Latency: {protocol['queries']} queries one at a time after {protocol['warmup']} warm-up queries, "
        f"{protocol['threads']} torch thread(s); p50 and p95 of the per-query time (encode + search).",
    ]
    # money columns only where some configuration has a price: the tables of unpriced grids stay as they were
    money = [(key, label) for key, label in MONEY_COLUMNS if any(key in f for f in document["configs"].values())]
    if money:
        lines.append(
            "Cost: the tokens the endpoint counted at the model's declared price per million input tokens "
            "(to index the corpus once; per 1,000 queries like the dev queries); blank where no price is declared."
        )
    labels = [label for _, label, _, _ in columns] + [label for _, label in money]
    lines += ["", "| configuration | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for cid, figures in sorted(document["configs"].items()):
        cells = []
        for key, _, scale, digits in columns:
            value = figures.get(key)
            cells.append("–" if value is None else f"{value / scale:.{digits}f}")
        cells += ["" if figures.get(key) is None else f"{figures[key]:.4g}" for key, _ in money]
        lines.append(f"| `{cid}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
