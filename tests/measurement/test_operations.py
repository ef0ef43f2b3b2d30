"""Machine figures apart from quality figures, and the latency protocol."""

from __future__ import annotations

import torch

from releval.measurement import operations
from releval.retrieval import runs

OPS = {
    "dimension": 384,
    "index_bytes": 1_000_000,
    "truncation_rate": 0.1,
    "ann_recall@10": 1.0,
    "chunks_per_s": 80.5,
    "tokens_per_s": 9000.0,
    "index_build_s": 0.2,
    "latency_ms_p50": 12.0,
    "latency_ms_p95": 20.0,
    "peak_rss_bytes": 600_000_000,
}


def test_cost_and_machine_figures_split_the_ops_exactly():
    cost, machine = operations.cost_figures(OPS), operations.machine_figures(OPS)
    assert set(cost) == {"dimension", "index_bytes", "truncation_rate", "ann_recall@10"}
    assert set(machine) | set(cost) == set(OPS) and not set(machine) & set(cost)


def test_the_ops_document_names_the_machine_and_the_protocol():
    document = operations.ops_document({"m/c": operations.machine_figures(OPS)}, operations.describe_machine())
    assert document["latency_protocol"] == runs.LATENCY_PROTOCOL
    assert document["machine"]["logical_cores"] >= 1 and document["machine"]["cpu"]
    text = operations.ops_markdown(document)
    assert "| `m/c` | 80.5 | 0.20 | 12.0 | 20.0 | 600 |" in text
    assert f"after {runs.LATENCY_PROTOCOL['warmup']} warm-up queries" in text


def test_latency_is_timed_on_the_declared_threads_after_warm_up_and_threads_are_restored():
    before = torch.get_num_threads()
    seen: list[tuple[str, int]] = []
    texts = [f"q{i}" for i in range(200)]
    summary = runs.per_query_latency(lambda text: seen.append((text, torch.get_num_threads())), texts)
    warmup, timed = runs.LATENCY_PROTOCOL["warmup"], runs.LATENCY_PROTOCOL["queries"]
    assert len(seen) == warmup + timed
    assert [text for text, _ in seen] == texts[:warmup] + texts[:timed]
    assert {threads for _, threads in seen} == {runs.LATENCY_PROTOCOL["threads"]}
    assert torch.get_num_threads() == before
    assert set(summary) == {"latency_ms_p50", "latency_ms_p95"}
