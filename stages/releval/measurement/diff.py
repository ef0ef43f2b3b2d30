"""Every configuration of two commits, compared: what `releval diff REV [REV]` prints.

Each revision's ``<reports>/lineage.json`` (``git show``; the reports folder is params.yaml's
``reports_dir`` at that revision; the working tree's own for the workspace) names the run each
configuration scored, by the sha256 of its run.parquet. The committed run archive
(:mod:`releval.provenance.archive`, which only grows, so the workspace's holds every earlier
commit's runs) gives both runs at document level. Both are scored under the *current* judgments and
contract (``data/work/qrels.parquet``'s dev queries; params.yaml's ``metric`` section) with
releval's scoring, so a difference is the runs' and never the judgments'. Per configuration present
in both revisions: the paired comparison of the two runs over the shared queries
(:func:`releval.measurement.stats.compare_paired`: bootstrap interval, W/L/T), with verdicts
decided as one family over every configuration whose run changed (Holm, :func:`stats.decide_family`,
as the grid comparison decides), and judging coverage read as every comparison reads it
(:mod:`releval.measurement.coverage`: a coverage-confounded comparison says so instead of a
verdict). A configuration whose run did not change is "same run", without a test.

Figures only; :mod:`releval.reporting.diff_text` says them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from releval import config, paths
from releval.errors import InputError
from releval.judging.completeness import metrics_for
from releval.measurement import holdout, scoring, stats
from releval.measurement.coverage import Coverage, coverage
from releval.measurement.metrics import Contract, contract_from_params
from releval.provenance import archive, revisions

WORKSPACE = "workspace"


@dataclass(frozen=True)
class Revision:
    """One side of a diff: which commit (None: the working tree), where its reports are, and the run
    each configuration scored there (lineage.json: config id -> run sha256)."""

    label: str  # as the user named it, or "workspace"
    commit: str | None
    reports: str
    runs: dict[str, str]

    @property
    def short(self) -> str:
        return WORKSPACE if self.commit is None else self.commit[:10]


def read_revision(repo: str | Path, rev: str | None) -> Revision:
    """The configurations and runs of ``rev`` (a git revision; None: the working tree)."""
    repo = Path(repo)
    if rev is None or rev == WORKSPACE:
        reports = config.reports_folder(repo / paths.PARAMS)
        path = repo / reports / Path(paths.LINEAGE).name
        if not path.exists():
            raise InputError("missing: the workspace has no scored grid (`dvc repro` writes it)", file=str(path))
        return Revision(WORKSPACE, None, reports, _lineage_runs(path.read_bytes(), str(path)))
    commit = revisions.resolve_commit(repo, rev)
    params = archive.params_at(repo, commit)
    reports = paths.reports_folder(params, source=f"{rev}:{paths.PARAMS}") if params else paths.REPORTS
    where = f"{reports}/{Path(paths.LINEAGE).name}"
    data = revisions.show_file(commit, where, repo)
    if data is None:
        raise InputError(
            "not in that commit: it holds no scored grid (reports are committed after `dvc repro`)",
            file=f"{rev}:{where}",
        )
    return Revision(rev, commit, reports, _lineage_runs(data, f"{rev}:{where}"))


def _lineage_runs(data: bytes, source: str) -> dict[str, str]:
    try:
        lineage = json.loads(data)
    except ValueError as exc:
        raise InputError(f"not JSON: {exc}", file=source) from None
    if not isinstance(lineage, dict):
        raise InputError("expected an object of configurations", file=source)
    found = {}
    for config_id, entry in lineage.items():
        run = entry.get("run_sha256") if isinstance(entry, dict) else None
        if not isinstance(run, str) or not run:
            raise InputError("no run_sha256", file=source, field=str(config_id))
        found[str(config_id)] = run
    return found


@dataclass(frozen=True)
class Judgments:
    """What both sides are scored under: the active judgments over the scored (dev) queries, and the contract."""

    version: str
    source_sha256: str | None
    qrels_path: str
    qrels: pl.DataFrame
    query_ids: list[str]
    metrics: list[str]  # as params.yaml lists them, less what the judgments cannot score
    primary: str
    contract: Contract
    coverage_terms: scoring.CoverageTerms

    def engine_terms(self) -> dict[str, Any]:
        """The contract's terms a user chooses (params.yaml's metric section), without the engine's fixed ones."""
        return dataclasses.asdict(self.contract)

    def contract_record(self) -> dict[str, Any]:
        """The contract as the comparison texts describe one."""
        return {**self.contract.to_dict(), "metrics": list(self.metrics), "primary": self.primary}


def current_judgments(
    params: Mapping[str, Any],
    *,
    qrels: str | Path = paths.QRELS,
    queries: str | Path = paths.QUERIES,
    judgments_meta: str | Path = paths.JUDGMENTS_META,
) -> Judgments:
    """The working tree's judgments (the judgments stage's outputs) and params.yaml's contract."""
    metric_cfg = config.section(params, "metric")
    for path in (qrels, queries, judgments_meta):
        if not Path(path).exists():
            raise InputError("missing: `dvc repro` writes it (the judgments and queries stages)", file=str(path))
    meta = json.loads(Path(judgments_meta).read_text(encoding="utf-8"))
    scored = holdout.select_queries(pl.read_parquet(queries), "dev", source=str(queries))["query_id"].to_list()
    metrics, _ = metrics_for(list(metric_cfg["metrics"]), scoring.judged_completeness(meta))
    return Judgments(
        version=str(meta.get("version", "unknown")),
        source_sha256=meta.get("source_sha256"),
        qrels_path=str(qrels),
        qrels=holdout.restrict(pl.read_parquet(qrels), scored),
        query_ids=scored,
        metrics=metrics,
        primary=str(metric_cfg["primary"]),
        contract=contract_from_params(metric_cfg),
        coverage_terms=scoring.coverage_terms(metric_cfg),
    )


@dataclass(frozen=True)
class DiffRow:
    """One configuration present in both revisions."""

    config_id: str
    run_a: str
    run_b: str
    mean_a: float | None
    mean_b: float | None
    comparison: stats.Comparison | None = None  # None: the same run, or a run that could not be scored
    coverage: Coverage | None = None
    problem: str | None = None  # why a side has no score (not archived, archived too shallowly, ...)

    @property
    def same_run(self) -> bool:
        return self.run_a == self.run_b


@dataclass(frozen=True)
class RevisionDiff:
    a: Revision
    b: Revision
    metric: str
    judgments: Judgments
    rows: list[DiffRow]
    only_a: list[str]
    only_b: list[str]
    n_resamples: int
    confidence: float
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def family_size(self) -> int:
        """The comparisons the verdicts were adjusted over (configurations whose run changed and was scored)."""
        return sum(1 for row in self.rows if row.comparison is not None)


def diff_revisions(
    a: Revision,
    b: Revision,
    store: archive.Archive,
    judgments: Judgments,
    *,
    metric: str | None = None,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> RevisionDiff:
    """Each configuration of both ``a`` and ``b``: its two runs (from ``store``) scored under ``judgments``,
    compared paired on ``metric`` (default: the primary), verdicts decided over the changed ones."""
    metric = metric or judgments.primary
    if metric not in judgments.metrics:
        raise InputError(f"not among the contract's metrics ({', '.join(judgments.metrics)})", field="--metric")
    shared = [cid for cid in a.runs if cid in b.runs]
    scorer = _Scorer(store, judgments)
    rows, compared = [], []
    for config_id in shared:
        run_a, run_b = a.runs[config_id], b.runs[config_id]
        side_a, side_b = scorer.per_query(run_a, config_id), scorer.per_query(run_b, config_id)
        problem = "; ".join(
            f"{name}'s {found}" for name, found in (("A", side_a), ("B", side_b)) if isinstance(found, str)
        )
        mean_a = None if isinstance(side_a, str) else float(side_a[metric].mean())
        mean_b = None if isinstance(side_b, str) else float(side_b[metric].mean())
        if problem or run_a == run_b:
            rows.append(DiffRow(config_id, run_a, run_b, mean_a, mean_b, problem=problem or None))
            continue
        joined = side_a.join(side_b, on="query_id", how="inner", suffix="_b").sort("query_id")
        comparison = stats.compare_paired(
            joined[metric].to_numpy(),
            joined[f"{metric}_b"].to_numpy(),
            joined["query_id"].to_list(),
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
        )
        found = _coverage(joined, metric, judgments, (a.short, b.short))
        rows.append(DiffRow(config_id, run_a, run_b, mean_a, mean_b, comparison, found))
        compared.append(len(rows) - 1)
    decided = stats.decide_family([rows[i].comparison for i in compared], stats.alpha_of(confidence))
    for i, comparison in zip(compared, decided):
        if rows[i].coverage is not None and rows[i].coverage.confounded:
            comparison = comparison.confounded()
        rows[i] = DiffRow(**{**rows[i].__dict__, "comparison": comparison})
    notes = []
    for row in rows:
        if row.comparison is not None and row.comparison.n_queries < len(judgments.query_ids):
            notes.append(
                f"{row.config_id}: {row.comparison.n_queries} of {len(judgments.query_ids)} queries scored on both "
                "sides"
            )
    return RevisionDiff(
        a=a,
        b=b,
        metric=metric,
        judgments=judgments,
        rows=rows,
        only_a=[cid for cid in a.runs if cid not in b.runs],
        only_b=[cid for cid in b.runs if cid not in a.runs],
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        notes=notes,
    )


def _coverage(joined: pl.DataFrame, metric: str, judgments: Judgments, names: tuple[str, str]) -> Coverage | None:
    judged_metric = scoring.coverage_metric(judgments.contract_record())
    if judged_metric is None or judged_metric not in joined.columns:
        return None

    def means(column: str) -> tuple[float, float] | None:
        if column not in joined.columns or f"{column}_b" not in joined.columns:
            return None
        return float(joined[column].mean()), float(joined[f"{column}_b"].mean())

    return coverage(judged_metric, judgments.coverage_terms, metric, means, names)


class _Scorer:
    """Archived runs scored under one set of judgments, each distinct run once."""

    def __init__(self, store: archive.Archive, judgments: Judgments):
        self.store, self.judgments = store, judgments
        self.index = store.index()
        self.scored: dict[str, pl.DataFrame | str] = {}

    def per_query(self, run_sha256: str, config_id: str) -> pl.DataFrame | str:
        """The run's per-query scores (query_id + one column per metric), or why there are none."""
        if run_sha256 not in self.scored:
            self.scored[run_sha256] = self._score(run_sha256, config_id)
        return self.scored[run_sha256]

    def _score(self, run_sha256: str, config_id: str) -> pl.DataFrame | str:
        entries = self.index.filter(pl.col("run_sha256") == run_sha256)
        if entries.height == 0:
            return (
                f"run {run_sha256[:12]} is not in the run archive {self.store.root} "
                "(`releval archive --from-rev REV` brings a commit's runs back)"
            )
        # The deepest copy (a run archived under several contracts keeps each depth it was stored at).
        entry = entries.sort(pl.col("depth").fill_null(2**62), descending=True).row(0, named=True)
        shallow = archive.too_shallow(entry["depth"], self.judgments.metrics)
        if shallow:
            return f"run {run_sha256[:12]} is archived too shallow for the contract's metrics: {shallow}"
        doc_run = holdout.restrict(self.store.read_documents(entry["docs_sha256"]), self.judgments.query_ids)
        if doc_run.height == 0:
            return f"run {run_sha256[:12]} holds none of the scored queries"
        try:
            evaluation = scoring.score_table(
                doc_run,
                self.judgments.qrels,
                self.judgments.metrics,
                self.judgments.contract,
                run_source=f"archived run {run_sha256[:12]} ({config_id})",
            )
        except InputError as exc:
            return exc.detail
        return evaluation.per_query
