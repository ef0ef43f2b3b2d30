"""The sides of a comparison, read from what a user names: `releval compare` and `releval gate`'s references.

A reference names scores in one of three ways, tried in this order:

* a path to a run file (a TREC run, a releval run.parquet, or a run folder holding one): it is
  collapsed to documents and scored against the qrels under the contract in the reports'
  metrics.json;
* a configuration id in the reports' per_query.parquet, e.g. ``minilm/c256``;
* ``REV:config_id`` with REV a git revision: the reports are read at that revision.

:class:`Sources` resolves references to :class:`~releval.measurement.pair.Side` objects,
reading each file once (reports, runs, qrels, queries; the working tree's or a git revision's);
:func:`pair_report` and :func:`grid_report` then compute the comparisons with
:mod:`releval.measurement.pair` and :mod:`releval.measurement.grid`, and the gate's
must-never-break queries with :mod:`releval.measurement.gate`. The texts are
:mod:`releval.reporting`'s.
"""

from __future__ import annotations

import io as _io
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from releval.config import load_params
from releval.errors import InputError
from releval.inputs import trec
from releval.io import sha256_file
from releval.judging import completeness
from releval.measurement import holdout, scoring
from releval.measurement.gate import Broken, must_never_break, must_never_break_ids
from releval.measurement.grid import GridReport, compare_grid, threshold_means
from releval.measurement.metrics import check_run
from releval.measurement.pair import DEFAULT_SECONDARY, PairReport, Side, compare_sides, config_side
from releval.provenance import revisions
from releval.retrieval import runs


def coverage_terms(
    contract: dict[str, Any], min_judged: float | None = None, max_judged_gap: float | None = None
) -> scoring.CoverageTerms:
    """The contract's coverage terms (:func:`releval.measurement.scoring.coverage_terms`), each
    given one (``--min-judged``, ``--max-judged-gap``) replacing its own."""
    terms = scoring.coverage_terms(contract, source="metrics.json contract")
    given = {"min_judged": min_judged, "max_judged_gap": max_judged_gap}
    try:
        return replace(terms, **{key: value for key, value in given.items() if value is not None})
    except InputError as exc:
        option = "--" + str(exc.field).rpartition(".")[2].replace("_", "-")
        raise InputError(exc.detail, file="<command line>", field=option) from None


# --------------------------------------------------------------------------- reading


@dataclass
class Reports:
    """metrics.json and per_query.parquet, from the working tree or a git revision."""

    where: str  # shown to the reader, e.g. "reports" or "git HEAD~1:reports"
    metrics: dict[str, Any]
    per_query: pl.DataFrame

    @property
    def contract(self) -> dict[str, Any]:
        contract = self.metrics.get("contract")
        if not isinstance(contract, dict):
            raise InputError("no 'contract' block", file=f"{self.where}/metrics.json", field="contract")
        return contract

    def config_ids(self) -> list[str]:
        order = list(self.metrics.get("configs", {}))
        present = list(dict.fromkeys(self.per_query["config_id"].to_list()))
        return [c for c in order if c in present] + [c for c in present if c not in order]

    def side(self, ref: str, config_id: str) -> Side:
        if self.per_query.filter(pl.col("config_id") == config_id).height == 0:
            raise InputError(
                f"no configuration {config_id!r}; known: {', '.join(self.config_ids())}",
                file=f"{self.where}/per_query.parquet",
                field="config_id",
            )
        return config_side(self.per_query, config_id, self.contract, f"{self.where}/per_query.parquet", ref)


def _parse_reports(where: str, metrics_bytes: bytes, per_query_bytes: bytes) -> Reports:
    try:
        metrics = json.loads(metrics_bytes)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", file=f"{where}/metrics.json", line=exc.lineno) from None
    try:
        per_query = pl.read_parquet(_io.BytesIO(per_query_bytes))
    except Exception as exc:  # polars raises several error types for a bad file
        raise InputError(f"not a parquet table: {exc}", file=f"{where}/per_query.parquet") from None
    for column in ("config_id", "query_id"):
        if column not in per_query.columns:
            raise InputError("missing column", file=f"{where}/per_query.parquet", field=column)
    return Reports(where, metrics, per_query)


def _read_reports(folder: str | Path) -> Reports:
    """The reports in ``folder`` of the working tree; a missing file is an error naming it."""
    folder = Path(folder)
    for name in ("metrics.json", "per_query.parquet"):
        if not (folder / name).exists():
            raise InputError("missing; run `dvc repro` (the score stage writes it)", file=str(folder / name))
    return _parse_reports(
        str(folder), (folder / "metrics.json").read_bytes(), (folder / "per_query.parquet").read_bytes()
    )


def _read_reports_at(rev: str, folder: str | Path) -> Reports:
    """The reports in ``folder`` as committed at git revision ``rev``."""
    folder = Path(folder).as_posix()

    def committed(name: str) -> bytes:  # "./": relative to the current directory, not the repository root
        return revisions.show_file(rev, f"./{Path(folder, name).as_posix()}", check=True) or b""

    return _parse_reports(f"git {rev}:{folder}", committed("metrics.json"), committed("per_query.parquet"))


def read_run_file(path: str | Path, format: str | None = None) -> pl.DataFrame:
    """A run at document level (query_id, doc_id, score).

    A releval run table (parquet with chunk_id or rank, or a run folder holding run.parquet) is
    collapsed to documents exactly as the score stage does; anything else is read by
    :func:`releval.inputs.trec.read_run` (TREC text, JSONL or parquet with query_id, doc_id, score;
    ``format`` as `releval score --run-format` takes it, default from the extension).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "run.parquet"
        if not path.exists():
            raise InputError("a run folder must hold run.parquet", file=str(path))
        format = "parquet"
    if (format or trec.infer_format(path)) == "parquet":
        try:
            table = pl.read_parquet(path)
        except Exception as exc:  # polars raises several unrelated types for a damaged file
            raise InputError(f"not a readable parquet file: {exc}", file=str(path)) from None
        if "chunk_id" in table.columns or "rank" in table.columns:
            for column in ("query_id", "doc_id", "score", "rank"):
                if column not in table.columns:
                    raise InputError("missing column", file=str(path), field=column)
            doc_run = scoring.document_run(
                table.with_columns(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8))
            )
            return check_run(doc_run.select("query_id", "doc_id", "score"), source=str(path))
    return trec.read_run(path, format)


def _warn_if_changed(reports: str | Path, config_id: str, run_dir: Path) -> None:
    """Warn when a run on disk is not the one the reports were scored from (lineage.json)."""
    lineage = Path(reports) / "lineage.json"
    if not lineage.exists():
        return
    expected = json.loads(lineage.read_text(encoding="utf-8")).get(config_id, {}).get("run_sha256")
    if expected and expected != sha256_file(run_dir / "run.parquet"):
        print(
            f"WARNING: {run_dir}/run.parquet differs from the run {lineage} records for "
            f"{config_id}; the reports are stale (run `dvc repro`)",
            file=sys.stderr,
        )


class Sources:
    """Resolves references to sides; reads each file once."""

    def __init__(
        self,
        reports: str | Path,
        qrels: str | Path,
        queries: str | Path,
        runs_root: str | Path,
        judgments_meta: str | Path,
        qrels_format: str | None = None,
        run_format: str | None = None,
    ):
        self.reports, self.qrels_path, self.queries_path = reports, qrels, queries
        self.runs_root, self.judgments_meta = runs_root, judgments_meta
        self.qrels_format, self.run_format = qrels_format, run_format
        self._at: dict[str, Reports] = {}

    @cached_property
    def current(self) -> Reports | None:
        folder = Path(self.reports)
        if not (folder / "metrics.json").exists() or not (folder / "per_query.parquet").exists():
            return None
        return _read_reports(folder)

    def current_or_fail(self) -> Reports:
        if self.current is None:
            return _read_reports(self.reports)  # raises, naming the missing file
        return self.current

    def at(self, rev: str) -> Reports:
        if rev not in self._at:
            self._at[rev] = _read_reports_at(rev, self.reports)
        return self._at[rev]

    @cached_property
    def queries(self) -> pl.DataFrame | None:
        path = Path(self.queries_path)
        if not path.exists():
            return None
        queries = pl.read_parquet(path)
        if "query_id" not in queries.columns:
            raise InputError("missing column", file=str(path), field="query_id")
        return queries.with_columns(pl.col("query_id").cast(pl.Utf8))

    @cached_property
    def qrels(self) -> pl.DataFrame:
        """The judgments, read as `releval score` reads them (:func:`releval.inputs.trec.read_qrels`)."""
        path = Path(self.qrels_path)
        if not path.exists():
            raise InputError("missing; run `dvc repro` or `dvc pull`", file=str(path))
        return trec.read_qrels(path, self.qrels_format)

    def run_contract(self) -> dict[str, Any]:
        """The contract a run file is scored under: the reports', with today's judgments."""
        contract = dict(self.current_or_fail().contract)
        meta = Path(self.judgments_meta)
        if meta.exists():
            judgments = json.loads(meta.read_text(encoding="utf-8"))
            contract["judgments_version"] = judgments.get("version", contract.get("judgments_version"))
            contract["judgments_sha256"] = judgments.get("source_sha256", contract.get("judgments_sha256"))
        return contract

    def resolve(self, ref: str) -> Side:
        if Path(ref).is_file() or (Path(ref) / "run.parquet").is_file():
            doc_run = read_run_file(ref, self.run_format)
            contract = self.run_contract()
            evaluation = scoring.score_recorded(doc_run, self.qrels, contract)
            per_query = scoring.with_condensed(evaluation, doc_run, self.qrels).with_columns(
                pl.col("query_id").cast(pl.Utf8)
            )
            return Side(ref, f"run file {ref} scored against {self.qrels_path}", contract, per_query, doc_run)
        current = self.current
        if current is not None and ref in current.config_ids():
            return current.side(ref, ref)
        if ":" in ref:
            rev, config_id = ref.split(":", 1)
            return self.at(rev).side(ref, config_id)
        known = (
            f"; configurations in {self.reports}: {', '.join(current.config_ids())}"
            if current is not None
            else f"; {self.reports}/ holds no scores"
        )
        raise InputError(f"{ref!r} is not a run file, a configuration id, or REV:config_id{known}", field="ref")

    def run_dirs(self) -> list[Path]:
        """Every run folder below the runs root (none when it does not exist)."""
        root = Path(self.runs_root)
        return runs.find_runs(root) if root.exists() else []

    def run_for(self, side: Side) -> pl.DataFrame:
        """The side's document-level run: the run file itself, or the run folder of a
        configuration of the working tree's reports (found by run.json config_id)."""
        if side.run is not None:
            return side.run
        current = self.current
        if current is None or side.ref not in current.config_ids():
            raise InputError(
                "its run is needed (document ranks) but only its scores are known; "
                "pass a configuration id of the working tree or a run file",
                field=side.ref,
            )
        for run_dir in self.run_dirs():
            meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
            if meta.get("config_id") == side.ref:
                _warn_if_changed(self.reports, side.ref, run_dir)
                return scoring.document_run(runs.read_run(run_dir)[0]).select(
                    pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8), "score"
                )
        raise InputError(
            f"no run with config_id {side.ref!r} below it; run `dvc pull` or `dvc repro`",
            file=str(Path(self.runs_root)),
        )


# --------------------------------------------------------------------------- one pair


def _metric_and_secondary(
    metric: str | None,
    secondary: str | None,
    contract: dict[str, Any],
    baseline: Side,
    candidate: Side,
) -> tuple[str, list[str]]:
    """The metric decided on (given, else the contract's primary) and the secondaries (comma-separated
    text given, else :data:`~releval.measurement.pair.DEFAULT_SECONDARY` where both sides scored them)."""
    chosen = metric or contract.get("primary") or "ndcg@10"
    if secondary is not None:
        others = [m.strip() for m in secondary.split(",") if m.strip()]
    else:
        others = [m for m in DEFAULT_SECONDARY if m in baseline.per_query.columns and m in candidate.per_query.columns]
    return chosen, others


def pair_report(
    sources: Sources,
    baseline_ref: str,
    candidate_ref: str,
    metric: str | None = None,
    secondary: str | None = None,
    slice_name: str | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    min_judged: float | None = None,
    max_judged_gap: float | None = None,
) -> PairReport:
    """Paired comparison of two references (see the module docstring), its coverage read under the
    baseline contract's coverage terms with ``min_judged``/``max_judged_gap`` replacing them when given."""
    baseline = sources.resolve(baseline_ref)
    candidate = sources.resolve(candidate_ref)
    chosen, others = _metric_and_secondary(metric, secondary, baseline.contract, baseline, candidate)
    return compare_sides(
        baseline,
        candidate,
        chosen,
        others,
        sources.queries,
        slice_name,
        n_resamples,
        seed,
        coverage_terms=coverage_terms(baseline.contract, min_judged, max_judged_gap),
    )


def sealed_must_never_break(sources: Sources) -> list[str]:
    """Must-never-break queries of the sealed holdout split: their judgments and runs stay out of the
    working files until `releval holdout` opens them, so the gate cannot (and must not) check them."""
    queries = sources.queries
    if queries is None or "split" not in queries.columns:
        return []
    return must_never_break_ids(queries.filter(pl.col("split") == "holdout"))


def broken_must_never_break(sources: Sources, report: PairReport, top_n: int) -> list[Broken]:
    """The must-never-break queries (flagged in the queries) the candidate's run breaks at ``top_n``;
    sealed holdout queries are left out (:func:`sealed_must_never_break`)."""
    sealed = set(sealed_must_never_break(sources))
    flagged = [q for q in must_never_break_ids(sources.queries) if q not in sealed]
    if not flagged:
        return []
    try:
        run = sources.run_for(report.candidate)
    except InputError as exc:
        raise InputError(f"{len(flagged)} must-never-break queries need the candidate's run: {exc}") from None
    contract = report.candidate.contract
    return must_never_break(
        flagged,
        sources.qrels,
        run,
        top_n,
        int(contract.get("rel_threshold", 1)),
        contract.get("ties", "docid-asc"),
    )


# --------------------------------------------------------------------------- the grid


def _grid_baseline(configs: list[str], chosen: str | None, params: str | Path) -> str:
    """The baseline given, else params.yaml's grid.baseline when it was scored, else the first."""
    if chosen:
        return chosen
    params = Path(params)
    if params.exists():
        baseline = (load_params(params).get("grid") or {}).get("baseline")
        if baseline in configs:
            return baseline
        if baseline:
            print(
                f"WARNING: {params} grid.baseline {baseline!r} is not in the reports; using {configs[0]}",
                file=sys.stderr,
            )
    return configs[0]


def _threshold_means(
    sources: Sources,
    reports: Reports,
    configs: list[str],
    metric: str,
    contract: dict[str, Any],
    thresholds: Sequence[int],
) -> dict[int, dict[str, float] | None] | None:
    """Re-score every configuration's run at each relevance threshold
    (:func:`releval.measurement.grid.threshold_means`); None if runs are missing.

    Only the queries the reports scored take part (the sealed holdout stays sealed), so the
    grade >= rel_threshold row reproduces the reported means."""
    if not thresholds:
        return None
    found: dict[str, Path] = {}
    for run_dir in sources.run_dirs():
        config_id = json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("config_id")
        if config_id in configs:
            found[config_id] = run_dir
    missing = [c for c in configs if c not in found]
    if missing:
        print(
            f"WARNING: relevance-threshold stability not computed: no run below {Path(sources.runs_root)} for "
            f"{', '.join(missing)} (run `dvc pull` or `dvc repro`)",
            file=sys.stderr,
        )
        return None
    doc_runs = {}
    for config_id in configs:
        _warn_if_changed(sources.reports, config_id, found[config_id])
        scored_ids = reports.per_query.filter(pl.col("config_id") == config_id)["query_id"].cast(pl.Utf8).to_list()
        doc_runs[config_id] = scoring.document_run(runs.read_run(found[config_id])[0], scored_ids)
    scored_qrels = holdout.restrict(sources.qrels, reports.per_query["query_id"].cast(pl.Utf8).unique().to_list())
    return threshold_means(doc_runs, scored_qrels, contract, metric, thresholds)


def _parse_thresholds(text: str) -> list[int]:
    """Relevance thresholds from comma-separated text; empty text gives none."""
    return [int(t) for t in text.split(",") if t.strip()]


def grid_report(
    sources: Sources,
    metric: str | None = None,
    baseline: str | None = None,
    params: str | Path = "params.yaml",
    thresholds: str = "1,2,3",
    n_resamples: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
    spread_width: float = 0.01,
    min_judged: float | None = None,
    max_judged_gap: float | None = None,
) -> GridReport:
    """Every configuration of the working tree's reports against one baseline (see
    :func:`releval.measurement.grid.compare_grid`), with the winner re-scored at each
    relevance threshold in ``thresholds`` (comma-separated; '' skips), coverage read under the
    contract's terms with ``min_judged``/``max_judged_gap`` replacing them when given. Under a sampled
    judgment set the grid decides on the inferred metric and the runs are not re-scored (the grid says why)."""
    reports = sources.current_or_fail()
    contract = reports.contract
    configs = reports.config_ids()
    if not configs:
        raise InputError("no configurations", file=f"{reports.where}/per_query.parquet")
    chosen = metric or contract.get("primary") or "ndcg@10"
    baseline = _grid_baseline(configs, baseline, params)
    means = (
        None
        if completeness.from_contract(contract).sampled
        else _threshold_means(sources, reports, configs, chosen, contract, _parse_thresholds(thresholds))
    )
    return compare_grid(
        reports.per_query.with_columns(pl.col("query_id").cast(pl.Utf8)),
        baseline,
        chosen,
        configs,
        n_resamples,
        seed,
        alpha,
        spread_width,
        means,
        contract,
        coverage_terms(contract, min_judged, max_judged_gap),
    )
