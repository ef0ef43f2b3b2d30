"""The renderers write figures down and compute none: no bootstrap, no scoring, no comparison is run
in reporting/'s text, markdown and plot modules (the report stage and the audit compute the figures
first: releval.measurement.report_figures). Read with `ast`, so nothing is executed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support import ROOT

REPORTING = ROOT / "stages" / "releval" / "reporting"
# The orchestrators: they compute first (measurement's functions), then hand the figures to the renderers.
ORCHESTRATORS = {"evaluation_report.py", "archive_reports.py", "card_inputs.py", "__init__.py"}
RENDERERS = sorted(p.name for p in REPORTING.glob("*.py") if p.name not in ORCHESTRATORS)
STATS = ROOT / "stages" / "releval" / "measurement" / "stats.py"
# What computes a figure: every function of the statistics, the metric engine, the comparisons, the plots'
# tables, the per-query view's choice of queries and documents.
COMPUTING_CALLS = {
    *(node.name for node in ast.parse(STATS.read_text(encoding="utf-8")).body if isinstance(node, ast.FunctionDef)),
    "adopt_grid_verdicts",
    "compare_grid",
    "difference_interval_table",
    "difference_table",
    "differing_queries",
    "explain_pairs",
    "quality_cost_table",
    "ranked_documents",
    "recall_curve_table",
    "compare_paired",
    "compare_sides",
    "evaluate",
    "interval_table",
    "power_figure",
    "report_figures",
    "score",
    "score_grid",
    "score_recorded",
    "score_run",
    "score_table",
    "threshold_means",
}


def calls(path: Path) -> set[str]:
    """The names ``path`` calls (``f(...)`` and ``module.f(...)`` alike)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            found.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
    return found


def test_there_are_renderers_and_computations_to_check():
    assert {"pair_text.py", "grid_text.py", "gate_text.py", "report_md.py", "plots.py"} <= set(RENDERERS)
    # report.md and report.html are one document's renderers; explain's text is the per-query view's
    assert {"document.py", "report_html.py", "explain_text.py"} <= set(RENDERERS)
    assert {"bootstrap_means", "bootstrap_many", "decide", "holm", "compare_paired"} <= COMPUTING_CALLS
    assert {"explain_pairs", "differing_queries", "difference_interval_table", "win_loss_tie"} <= COMPUTING_CALLS


@pytest.mark.parametrize("name", RENDERERS)
def test_a_renderer_computes_nothing(name):
    computing = calls(REPORTING / name) & COMPUTING_CALLS
    assert not computing, f"reporting/{name} calls {sorted(computing)}"
