"""The chunk-size comparison at equal budgets (measurement.chunk_budget) and its report section.

Hand-built per-query tables: which pairs are formed (chunkings of one cell, each against the cell's
smallest by tokens), which queries count (those both sides score: a query without spans is null), the
numbers against scipy-free hand computation and stats.compare_paired, and Holm over the budget rows.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from releval.measurement import stats
from releval.measurement.chunk_budget import chunk_size_pairs, chunking_sizes, split_config
from releval.reporting.document import markdown
from releval.reporting.report_md import _chunk_size_section
from releval.reporting.document import ReportDocument

TOKENS = {"c256": 256, "c512": 512, "c1024": 1024}
QUERIES = [f"q{i}" for i in range(8)]


def table(values: dict[str, dict[str, list]]) -> pl.DataFrame:
    """config id -> metric -> per-query values (None: the query has no evidence)."""
    frames = []
    for config_id, metrics in values.items():
        frames.append(
            pl.DataFrame(
                {"config_id": config_id, "query_id": QUERIES, **metrics},
                schema_overrides={name: pl.Float64 for name in metrics},
            )
        )
    return pl.concat(frames, how="diagonal")


def test_pairs_within_a_cell_against_its_smallest_chunking():
    small = [0.1, 0.2, 0.0, 0.5, 0.3, None, 0.4, 0.2]
    large = [0.3, 0.2, 0.1, 0.9, 0.5, None, 0.6, 0.1]
    ndcg = [0.5] * 8
    per_query = table(
        {
            "minilm/c512": {"evidence_recall@512tok": large, "ndcg@10": ndcg},
            "minilm/c256": {"evidence_recall@512tok": small, "ndcg@10": ndcg},
            "bm25/c256": {"evidence_recall@512tok": small, "ndcg@10": ndcg},  # alone in its cell: no pair
            "external/prod": {"ndcg@10": ndcg},  # no chunking
        }
    )
    pairs = chunk_size_pairs(
        per_query,
        ["minilm/c512", "minilm/c256", "bm25/c256", "external/prod"],
        TOKENS,
        [512, 2048],  # 2048 was not scored: no row
        "ndcg@10",
        resamples=2000,
        seed=0,
    )
    assert [(p.cell, p.smaller, p.larger, p.metric, p.budget) for p in pairs] == [
        ("minilm", "minilm/c256", "minilm/c512", "evidence_recall@512tok", 512),
        ("minilm", "minilm/c256", "minilm/c512", "ndcg@10", None),
    ]
    budget = pairs[0].comparison
    kept = [i for i, v in enumerate(small) if v is not None]
    differences = [large[i] - small[i] for i in kept]
    assert budget.n_queries == 7
    assert np.isclose(budget.mean_difference, sum(differences) / 7)
    assert (budget.wins, budget.losses, budget.ties) == (5, 1, 1)
    reference = stats.compare_paired(
        [small[i] for i in kept], [large[i] for i in kept], [QUERIES[i] for i in kept], n_resamples=2000, seed=0
    )
    assert budget.bootstrap_ci == reference.bootstrap_ci and budget.verdict == reference.verdict
    assert pairs[1].comparison.n_queries == 8 and pairs[1].comparison.verdict == "inconclusive"


def test_budget_rows_are_one_holm_family():
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 0.5, 8).round(3).tolist()
    per_query = table(
        {
            "a/c256": {f"evidence_recall@{b}tok": base for b in (512, 1024)},
            "a/c1024": {f"evidence_recall@{b}tok": [v + 0.3 for v in base] for b in (512, 1024)},
            "a/c512": {
                f"evidence_recall@{b}tok": [v + 0.01 * (i % 3 - 1) for i, v in enumerate(base)] for b in (512, 1024)
            },
        }
    )
    pairs = chunk_size_pairs(
        per_query, ["a/c256", "a/c512", "a/c1024"], TOKENS, [512, 1024], "ndcg@10", resamples=2000, seed=0
    )
    assert [(p.larger, p.budget) for p in pairs] == [
        ("a/c512", 512),
        ("a/c512", 1024),
        ("a/c1024", 512),
        ("a/c1024", 1024),
    ]
    assert {p.comparison.family_size for p in pairs} == {4}
    adjusted = stats.holm([p.comparison.bootstrap_p_value for p in pairs])
    assert [p.comparison.adjusted_p_value for p in pairs] == adjusted.tolist()
    assert {p.comparison.verdict for p in pairs if p.larger == "a/c1024"} == {"improvement"}


def test_the_report_section_says_the_rows_and_the_terms():
    per_query = table(
        {
            "m/c256": {"evidence_recall@1024tok": [0.1] * 4 + [0.2] * 4, "ndcg@10": [0.5] * 8},
            "m/c512": {"evidence_recall@1024tok": [0.4] * 8, "ndcg@10": [0.6] * 8},
        }
    )
    pairs = chunk_size_pairs(per_query, ["m/c256", "m/c512"], TOKENS, [1024], "ndcg@10", resamples=1000, seed=0)
    section = _chunk_size_section(pairs, {"evidence": {"tau": 0.5}}, "ndcg@10")
    text = markdown(ReportDocument("t", (section,)))
    assert "## Chunk size at equal budgets" in text
    assert "| `m` | 1,024 tokens | c256 0.1500 | c512 0.4000 | +0.2500 |" in text
    assert "| `m` | document level (ndcg@10) | c256 0.5000 | c512 0.6000 | +0.1000 |" in text
    assert "covers at least 0.5 of its characters" in text and "Holm-adjusted over the 1 budget rows" in text
    assert _chunk_size_section([], {}, "ndcg@10") is None


def test_sizes_and_ids():
    assert chunking_sizes({"chunkings": {"c256": {"tokens": 256, "overlap": 32}}}) == {"c256": 256}
    assert chunking_sizes(None) == {}
    assert split_config("rrf(splade,minilm)/c256") == ("rrf(splade,minilm)", "c256")
    assert split_config("external/prod") == ("external", "prod")
