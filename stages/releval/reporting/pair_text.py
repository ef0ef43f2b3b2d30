"""A paired comparison as `releval compare` prints it: the six lines (:func:`render_pair`) and the
JSON form (:func:`pair_to_dict`).

Pure: a :class:`~releval.measurement.pair.PairReport` in, text or a dict out; the figures are
computed by :func:`releval.measurement.pair.compare_sides`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from releval.judging.completeness import POSITIVES_ONLY_CAVEAT
from releval.measurement import stats
from releval.measurement.pair import PairReport
from releval.reporting.coverage_text import coverage_dict, coverage_sentence
from releval.reporting.text import (
    describe_contract,
    describe_evaluation_set,
    format_p,
    holm_note,
    interval,
    power_sentence,
    short,
    signed,
    thin_evidence,
    verdict_text,
)


def _change(change: stats.QueryChange | None, texts: Mapping[str, str]) -> str:
    if change is None:
        return "none"
    return f"{change.query_id}{short(texts.get(change.query_id))} {change.baseline:.4f} → {change.candidate:.4f}"


def _thin_evidence(report: PairReport) -> str | None:
    """:func:`~releval.reporting.text.thin_evidence` of an inconclusive primary comparison (a verdict, or
    its absence for a coverage reason, is not a question of how many queries)."""
    return thin_evidence(report.power, report.metric) if report.thin else None


def render_pair(report: PairReport, family: str = "comparisons") -> str:
    """The six-line report, a seventh on judging coverage when the contract lists a judged@k
    (:func:`~releval.reporting.coverage_text.coverage_sentence`; positives-only and sampled sets: the
    caveat of their kind), then one line per slice when the queries carry slices.

    ``family`` names what the primary's Holm adjustment ran over, when it ran over several.
    """
    p, metric = report.primary, report.metric
    conf = f"{p.confidence:.0%}"
    secondary = (
        "; ".join(
            f"{name} {c.baseline_mean:.4f} → {c.candidate_mean:.4f}, Δ {signed(c.mean_difference)} "
            f"{conf} CI {interval(c.bootstrap_ci)}{holm_note(c, 'metrics')} {verdict_text(c)}"
            for name, c in report.secondary.items()
        )
        or "none"
    )
    kind = f" ({report.kind})" if report.kind else ""
    verdict = verdict_text(p)
    lines = [
        f"1. candidate {report.candidate.ref} vs baseline {report.baseline.ref}",
        f"2. evaluation set: {describe_evaluation_set(report.baseline.contract, p.n_queries, report.slice_name)}",
        f"3. metric contract: {describe_contract(report.baseline.contract, metric)}",
        f"4. result: {metric} {p.baseline_mean:.4f} → {p.candidate_mean:.4f}, "
        f"Δ {signed(p.mean_difference)}, {conf} CI {interval(p.bootstrap_ci)} "
        f"(paired bootstrap, {p.n_resamples} query resamples, p {format_p(p.bootstrap_p_value)}"
        f"{holm_note(p, family)}; paired t {interval(p.t_interval)}); W/L/T {p.wins}/{p.losses}/{p.ties}, "
        f"sign test p {format_p(p.sign_test_p_value)} → "
        f"{verdict.upper() if p.verdict != stats.NO_VERDICT else verdict}{kind}",
        f"5. secondary: {secondary}. Worst query: {_change(p.worst_regression, report.texts)}; "
        f"best: {_change(p.best_improvement, report.texts)}",
        f"6. power: {power_sentence(report.power)}",
    ]
    thin = _thin_evidence(report)
    if thin is not None:
        lines.append(f"   thin evidence: {thin}")
    if report.coverage is not None:
        lines.append(f"7. coverage: {coverage_sentence(report.coverage)}")
    elif report.positives_only:
        lines.append(f"7. coverage: not a question here: {POSITIVES_ONLY_CAVEAT}")
    elif report.sample_caveat is not None:
        lines.append(f"7. sampled judgments: {report.sample_caveat}")
    for result in report.slices:
        c = result.comparison
        if c.verdict == stats.NO_VERDICT:
            numbers = f"Δ {signed(c.mean_difference)}, W/L/T {c.wins}/{c.losses}/{c.ties}"
        else:
            numbers = (
                f"Δ {signed(c.mean_difference)} {conf} CI {interval(c.bootstrap_ci)}, "
                f"W/L/T {c.wins}/{c.losses}/{c.ties}, p {format_p(c.bootstrap_p_value)}{holm_note(c, 'slices')}"
            )
        lines.append(f"   slice {result.name} ({c.n_queries} queries): {numbers} → {verdict_text(c)}")
    return "\n".join(lines)


def _comparison_dict(comparison: stats.Comparison, texts: Mapping[str, str]) -> dict[str, Any]:
    data = comparison.to_dict()
    for key in ("worst_regression", "best_improvement"):
        if data[key] is not None:
            data[key]["text"] = texts.get(data[key]["query_id"])
            data[key]["difference"] = data[key]["candidate"] - data[key]["baseline"]
    return data


def pair_to_dict(report: PairReport) -> dict[str, Any]:
    """JSON-safe form of a :class:`~releval.measurement.pair.PairReport` (infinite interval ends become null)."""
    contract = report.baseline.contract
    return {
        "baseline": {"ref": report.baseline.ref, "source": report.baseline.source},
        "candidate": {"ref": report.candidate.ref, "source": report.candidate.source},
        "evaluation_set": {
            "dataset": contract.get("dataset"),
            "judgments_version": contract.get("judgments_version"),
            "judgments_sha256": contract.get("judgments_sha256"),
            "queries": report.primary.n_queries,
            "split": contract.get("split"),
            "slice": report.slice_name,
            "pooling": contract.get("pooling"),
        },
        "contract": dict(contract),
        "metric": report.metric,
        "verdict": report.primary.verdict,
        "kind": report.kind,
        "primary": _comparison_dict(report.primary, report.texts),
        "power": report.power.to_dict(),
        "thin_evidence": _thin_evidence(report),
        "secondary": {name: _comparison_dict(c, report.texts) for name, c in report.secondary.items()},
        "slices": {r.name: _comparison_dict(r.comparison, report.texts) for r in report.slices},
        "minimum_slice_queries": stats.MIN_SLICE_QUERIES,
        "coverage": None if report.coverage is None else coverage_dict(report.coverage),
        "sample": None
        if report.sample_caveat is None
        else {**(report.baseline.contract.get("sample") or {}), "caveat": report.sample_caveat},
    }
