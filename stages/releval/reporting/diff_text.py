"""`releval diff`'s screen (:func:`render_diff`) and its JSON form (:func:`diff_to_dict`).

Pure: a :class:`~releval.measurement.diff.RevisionDiff` in, text or a dict out; the figures are
computed by :func:`releval.measurement.diff.diff_revisions`.
"""

from __future__ import annotations

from typing import Any

from releval.measurement.diff import DiffRow, RevisionDiff
from releval.reporting.text import describe_contract, interval, signed, verdict_text

_DASH = "–"
_SAME_RUN = "same run"


def _side(revision) -> str:
    """``workspace``, or the revision as named with its commit."""
    return revision.label if revision.commit is None else f"{revision.label} ({revision.commit[:10]})"


def _number(value: float | None) -> str:
    return _DASH if value is None else f"{value:.4f}"


def _cells(row: DiffRow) -> list[str]:
    comparison = row.comparison
    if row.problem:
        return [row.config_id, _number(row.mean_a), _number(row.mean_b), _DASH, "", "", "not compared"]
    if comparison is None:
        return [row.config_id, _number(row.mean_a), _number(row.mean_b), _DASH, "", "", _SAME_RUN]
    return [
        row.config_id,
        _number(comparison.baseline_mean),
        _number(comparison.candidate_mean),
        signed(comparison.mean_difference),
        interval(comparison.bootstrap_ci),
        f"{comparison.wins}/{comparison.losses}/{comparison.ties}",
        verdict_text(comparison),
    ]


def render_diff(diff: RevisionDiff) -> str:
    """The diff in one screen: what both sides are scored under, one row per configuration in both,
    then the configurations only one side has and why a row was not compared."""
    judgments = diff.judgments
    sha = f" (sha256 {judgments.source_sha256[:12]})" if judgments.source_sha256 else ""
    confidence = f"{diff.confidence:.0%}"
    family = diff.family_size
    lines = [
        f"diff: {diff.metric}, A = {_side(diff.a)} vs B = {_side(diff.b)}: each configuration's two runs, from the "
        f"run archive, scored now ({diff.n_resamples} paired bootstrap resamples, seed {diff.seed}; verdicts "
        f"Holm-adjusted over the {family} configuration{'' if family == 1 else 's'} whose run changed)",
        f"evaluation set: judgments {judgments.version}{sha}, {len(judgments.query_ids)} dev queries "
        f"(the current {judgments.qrels_path}, for both sides)",
        f"metric contract: {describe_contract(judgments.engine_terms(), diff.metric)} (the current params.yaml)",
        "",
    ]
    header = ["configuration", "A", "B", "Δ", f"{confidence} CI", "W/L/T", "verdict"]
    table = [header] + [_cells(row) for row in diff.rows]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header))]
    for n, cells in enumerate(table):
        text = "  ".join(
            cell.ljust(width) if i in (0, 6) else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths))
        )
        lines.append(text.rstrip())
        if n == 0:
            lines.append("-" * len(lines[-1]))
    if not diff.rows:
        lines.append("(no configuration in both)")
    changed = sum(1 for row in diff.rows if not row.same_run)
    lines += [
        "",
        f"{len(diff.rows)} configurations in both, {changed} with a changed run; Δ = B - A; W/L/T: B's wins, "
        "losses, ties",
    ]
    if diff.only_a:
        lines.append(f"only in A: {', '.join(diff.only_a)}")
    if diff.only_b:
        lines.append(f"only in B: {', '.join(diff.only_b)}")
    for row in diff.rows:
        if row.problem:
            lines.append(f"{row.config_id} not compared: {row.problem}")
        elif row.coverage is not None and row.coverage.confounded:
            lines.append(f"{row.config_id} coverage-confounded: {row.coverage.reason}")
    lines += diff.notes
    return "\n".join(lines) + "\n"


def diff_to_dict(diff: RevisionDiff) -> dict[str, Any]:
    """The diff as JSON-safe data (``--json``)."""

    def side(revision) -> dict[str, Any]:
        return {"label": revision.label, "commit": revision.commit, "reports": revision.reports}

    def row(found: DiffRow) -> dict[str, Any]:
        comparison = found.comparison
        return {
            "config_id": found.config_id,
            "run_a": found.run_a,
            "run_b": found.run_b,
            "same_run": found.same_run,
            "mean_a": found.mean_a,
            "mean_b": found.mean_b,
            "comparison": None if comparison is None else comparison.to_dict(),
            "coverage_confounded": None if found.coverage is None else found.coverage.reason,
            "problem": found.problem,
        }

    judgments = diff.judgments
    return {
        "a": side(diff.a),
        "b": side(diff.b),
        "metric": diff.metric,
        "judgments": {
            "version": judgments.version,
            "source_sha256": judgments.source_sha256,
            "queries": len(judgments.query_ids),
        },
        "contract": judgments.contract_record(),
        "confidence": diff.confidence,
        "n_resamples": diff.n_resamples,
        "seed": diff.seed,
        "family_size": diff.family_size,
        "rows": [row(found) for found in diff.rows],
        "only_a": diff.only_a,
        "only_b": diff.only_b,
        "notes": diff.notes,
    }
