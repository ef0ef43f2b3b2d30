"""`audit --all`'s checks of the report files: quality.json, per_query.parquet and grid.md as the
score stage makes them from the verified numbers, ops.json and ops.md from the runs' run.json,
report.md and observations.json as the report stage does, history and the change tables as the
rescore stage does (:class:`ReportChecks`, part of :class:`releval.provenance.audit_all.AllAudit`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl
from releval import config, paths
from releval.errors import InputError
from releval.measurement import evidence, holdout, operations, scoring
from releval.measurement.chunk_budget import chunking_sizes
from releval.measurement.pair import query_slices
from releval.measurement.report_figures import report_figures
from releval.provenance import card as cards
from releval.provenance.lineage import JUDGMENTS_META, QRELS_FILE, QUERIES_FILE, _read_json
from releval.provenance.links import (
    Link,
    _common,
    _frame_difference,
    _json_difference,
    _number_difference,
    _numbers,
    _text_difference,
    other_code,
)
from releval.provenance.recomputation import Rescored
from releval.reporting import evaluation_report as er
from releval.reporting.archive_reports import build_archive_reports
from releval.reporting.markdown import grid_markdown, table_quality_metrics
from releval.reporting.report_md import report_markdown

# What the report stage runs with when dvc.yaml passes no flag (stages/report.py's defaults).
REPORT_DEFAULTS = {"resamples": 10_000, "seed": 0, "worst": 10}
# Report files and the stage that writes each (paths under the reports folder, as under reports/).
SCORE_FILES = (paths.QUALITY, paths.PER_QUERY, paths.GRID)
REPORT_FILES = (paths.REPORT_MD, paths.OBSERVATIONS)
RESCORE_FILES = (paths.HISTORY, paths.HISTORY_MD, paths.IDCG_CHANGES, paths.IDCG_CHANGES_MD, paths.SCORE_CHANGES)


class ReportChecks:
    """The report-file links of :class:`releval.provenance.audit_all.AllAudit`, which this is a base
    of: the methods read its fields (root, folder, lock, params, metrics, inputs, store, rescored...)."""

    def report_file(self, path: str) -> str:
        return paths.rebase(path, paths.REPORTS, self.folder).as_posix()

    def declared(self, path: str) -> bool:
        """True when dvc.lock records ``path`` as an output or it is on disk: it must then hold what it derives from."""
        return (self.root / path).exists() or any(
            o["path"] == path for s in self.lock.values() for o in s.get("outs") or []
        )

    def report_links(self, truth: dict[str, Any]) -> list[Link]:
        results = truth.pop("_results")
        links = []
        quality, per_query, grid = (self.report_file(p) for p in SCORE_FILES)
        if self.declared(quality):
            links.append(
                self._json_link(
                    quality, scoring.headline_document(truth), "the score stage makes of the verified numbers"
                )
            )
        if self.declared(per_query):
            links.append(self._per_query_link(per_query))
        if self.declared(grid):
            links.append(self._markdown_link(grid, lambda: self._grid_markdown(truth, results)))
        links += self._machine_links()
        report_md, observations = (self.report_file(p) for p in REPORT_FILES)
        if self.declared(report_md) or self.declared(observations):
            links += self._report_links(truth, report_md, observations)
        if any(self.declared(self.report_file(p)) for p in RESCORE_FILES):
            links += self._history_links()
        return links

    def _json_link(self, path: str, expected: Any, how: str) -> Link:
        """A JSON report against what this checkout's code makes of the verified numbers: equal;
        where the stage that wrote it ran other code, equal in every field both hold (a field
        only one version of the code writes is no difference)."""
        try:
            recorded = _read_json(self.root / path, self.root)
        except InputError as exc:
            return Link("report", path, "missing", exc.detail)
        if recorded == expected:
            return Link("report", path, "ok", f"equals what {how}")
        other = self._other_code(path)
        if other:
            mine, theirs = _common(recorded, expected)
            if mine == theirs:
                return Link(
                    "report",
                    path,
                    "note",
                    f"every field both hold equals what {how}; some are written by one version of the code only "
                    f"({_json_difference(recorded, expected)}): {other}",
                )
            return Link(
                "report", path, "mismatch", f"differs from what {how}: {_json_difference(mine, theirs)} ({other})"
            )
        return Link("report", path, "mismatch", f"differs from what {how}: {_json_difference(recorded, expected)}")

    def _other_code(self, path: str) -> str:
        """'stage X ran other code than this checkout's (files)' for the stage that wrote ``path``; '' when the same."""
        stage = self._writer(path)
        other = other_code(self.lock, stage) if stage else []
        if not other:
            return ""
        more = ", …" if len(other) > 3 else ""
        return f"stage {stage} ran other code than this checkout's ({', '.join(other[:3])}{more})"

    def _per_query_link(self, path: str) -> Link:
        frames = [self.rescored[c].per_query for c in self.expected if isinstance(self.rescored.get(c), Rescored)]
        expected = scoring.per_query_table(frames)
        if not (self.root / path).exists():
            return Link("report", path, "missing", "not on disk")
        recorded = pl.read_parquet(self.root / path)
        partial = not all(self.rescored[c].full for c in self.expected if isinstance(self.rescored.get(c), Rescored))
        if partial:  # condensed-list columns need every retrieved document, evidence columns the chunks
            keep = [
                c
                for c in expected.columns
                if not c.endswith(scoring.CONDENSED_MARK) and not c.startswith(evidence.METRIC_PREFIX)
            ]
            expected, recorded = expected.select(keep), recorded.select([c for c in keep if c in recorded.columns])
        if recorded.equals(expected):
            what = "the metric columns" if partial else "every row and column"
            taken = self.evidence_as_recorded
            recorded_note = (
                f"; the passage-level columns of {len(taken)} configurations are taken as recorded: their "
                "chunk-level runs are not here (the archive keeps document-level runs; `dvc pull` or `dvc repro` "
                "brings them)"
                if taken
                else ""
            )
            return Link(
                "report",
                path,
                "ok",
                f"{what} as the runs and judgments give them ({expected.height} rows){recorded_note}",
            )
        return Link("report", path, "mismatch", _frame_difference(recorded, expected, ["config_id", "query_id"]))

    def _machine_links(self) -> list[Link]:
        """ops.json and ops.md: each configuration's machine figures as its run.json records them
        (the machine they were measured on is taken as ops.json records it)."""
        ops_json, ops_md = self.report_file(paths.OPS), self.report_file(paths.OPS_MD)
        if not (self.declared(ops_json) or self.declared(ops_md)):
            return []
        archived = [cid for cid in self.expected if not self.rescored[cid].source.endswith("run.parquet")]
        if archived:  # the archive keeps a run's first run.json; the machine figures of a rerun differ
            return [
                Link(
                    "report",
                    path,
                    "unavailable",
                    f"machine figures of {len(archived)} configurations are not here: their runs were read from "
                    "the archive, which keeps the run.json of a run's first measurement; `dvc pull` or "
                    "`dvc repro` brings the runs' own",
                )
                for path in (ops_json, ops_md)
                if self.declared(path)
            ]
        try:
            recorded = _read_json(self.root / ops_json, self.root)
        except InputError as exc:
            return [Link("report", ops_json, "missing", exc.detail)]
        figures = {
            cid: operations.machine_figures((self.rescored[cid].meta or {}).get("ops") or {}) for cid in self.expected
        }
        expected = operations.ops_document(figures, recorded.get("machine") or {})
        links = [self._json_link(ops_json, expected, "the runs' run.json record (machine as recorded)")]
        if self.declared(ops_md) and recorded.get("machine"):
            links.append(self._markdown_link(ops_md, lambda: operations.ops_markdown(expected)))
        return links

    def _grid_markdown(self, truth: Mapping[str, Any], results: Mapping[str, Any]) -> str:
        metrics = self.metric_names()
        return grid_markdown(
            {cid: dict(r) for cid, r in results.items()},
            truth["contract"],
            table_quality_metrics(metrics),
            self.metric_cfg["primary"],
            saturation=truth.get("saturation"),
        )

    def _markdown_link(self, path: str, render: Callable[[], str], writer: str | None = None) -> Link:
        """A rendered report against what this checkout's code renders from the verified numbers:
        byte for byte; where the stage that wrote it ran other code, every number in it (the
        layout may differ, no number may)."""
        if not (self.root / path).exists():
            return Link("report", path, "missing", "not on disk")
        try:
            expected = render()
        except InputError as exc:
            return Link("report", path, "missing", f"cannot be rendered again: {exc}")
        recorded = (self.root / path).read_text(encoding="utf-8")
        if recorded == expected:
            return Link(
                "report", path, "ok", "byte for byte what this checkout's code renders from the verified numbers"
            )
        stage = writer or self._writer(path)
        other = other_code(self.lock, stage) if stage else []
        code = (
            f"stage {stage} ran other code than this checkout's "
            f"({', '.join(other[:3])}{', …' if len(other) > 3 else ''})"
            if other
            else ""
        )
        if other and _numbers(recorded) == _numbers(expected):
            return Link(
                "report", path, "note", f"every number as the verified numbers give it; the layout differs: {code}"
            )
        where = _text_difference(recorded, expected) if not other else _number_difference(recorded, expected)
        return Link(
            "report",
            path,
            "mismatch",
            f"differs from what the verified numbers render: {where}" + (f" ({code})" if code else ""),
        )

    def _writer(self, path: str) -> str | None:
        return next((n for n, s in self.lock.items() if any(o["path"] == path for o in s.get("outs") or [])), None)

    def _report_links(self, truth: dict[str, Any], report_md: str, observations_file: str) -> list[Link]:
        """report.md and observations.json rebuilt as the report stage builds them from the
        verified numbers and the recorded card (card.json: its id checked against its content)."""
        card_file = self.report_file(paths.CARD)
        try:
            card = _read_json(self.root / card_file, self.root)
        except InputError as exc:
            return [Link("report", card_file, "missing", exc.detail)]
        if card.get("card_id") != cards.card_id(card):
            return [
                Link(
                    "report",
                    card_file,
                    "mismatch",
                    f"card_id {card.get('card_id')!r} does not match its content ({cards.card_id(card)})",
                )
            ]
        written = json.loads(json.dumps(truth, sort_keys=True, default=str))  # as the report stage reads metrics.json
        contract, configs = written["contract"], written["configs"]
        summary = cards.contract_summary(self.metrics.get("contract") or {})
        if summary != card.get("contract"):
            return [
                Link(
                    "report",
                    card_file,
                    "mismatch",
                    f"its contract is not {self.metrics_file}'s: {_json_difference(card.get('contract'), summary)}",
                )
            ]
        card = {**card, "contract": summary}  # card.json's keys are sorted; the report renders the card as built
        order = list(configs)
        per_query = scoring.per_query_table([self.rescored[c].per_query for c in order]).with_columns(
            pl.col("query_id").cast(pl.Utf8)
        )
        queries = self.inputs.queries.with_columns(pl.col("query_id").cast(pl.Utf8))
        qrels = self.inputs.qrels.with_columns(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8))
        scored = holdout.scored_queries(queries, contract, source=QUERIES_FILE)
        scored_ids = scored["query_id"].to_list()
        judgments = self.judgments_meta()
        slices = query_slices(scored) | er.human_only_slice(judgments, scored_ids)
        lineage = {cid: self.true_lineage(cid) for cid in order}
        run_metas = {cid: dict(self.rescored[cid].meta or {}) for cid in order}
        warnings = er.configuration_warnings(configs, run_metas, contract)
        observations = er.build_observations(
            card, configs, per_query, slices, lineage, run_metas, warnings, contract["metrics"]
        )
        links = []
        if self.declared(observations_file):
            links.append(
                self._json_link(
                    observations_file,
                    json.loads(json.dumps({"card_id": card["card_id"], "observations": observations})),
                    "the report stage makes of the verified numbers under card.json",
                )
            )
        if not self.declared(report_md):
            return links
        options = self.report_options()
        primary = contract.get("primary") or contract["metrics"][0]

        def render() -> str:
            baseline = er.baseline_config(self.params or {}, order)
            figures = report_figures(
                per_query,
                contract,
                order,
                scored,
                {cid: self.rescored[cid].doc_run for cid in order},
                qrels,
                holdout.restrict(qrels, scored_ids),
                baseline,
                primary,
                int(card["corpus"]["documents"]),
                resamples=options["resamples"],
                seed=options["seed"],
                worst=options["worst"],
                chunk_tokens=chunking_sizes(self.params),
            )
            return report_markdown(
                card,
                cards.rank_observations(observations, [card], primary),
                figures,
                configs,
                contract,
                baseline,
                primary,
                warnings,
                resamples=options["resamples"],
                seed=options["seed"],
                reports=self.folder,
            )

        links.append(self._markdown_link(report_md, render))
        return links

    def true_lineage(self, config_id: str) -> dict[str, Any]:
        """lineage.json's entry as the score stage writes it for the run read."""
        again = self.rescored[config_id]
        meta = again.meta or {}
        entry = self.lineage.get(config_id) or {}
        return {
            "models": meta.get("models", entry.get("models")),
            "inputs": meta.get("inputs", entry.get("inputs")),
            "run_dir": entry.get("run_dir") or again.run_dir,
            "run_sha256": again.run_sha256,
        }

    def report_options(self) -> dict[str, int]:
        """--resamples, --seed and --worst of the report stage's command in dvc.lock (stages/report.py's
        defaults otherwise)."""
        stage = self._writer(self.report_file(paths.REPORT_MD))
        cmd = str((self.lock.get(stage) or {}).get("cmd", "")) if stage else ""
        options = dict(REPORT_DEFAULTS)
        for name in options:
            match = re.search(rf"--{name}[ =](\d+)", cmd)
            if match:
                options[name] = int(match.group(1))
        return options

    def _history_links(self) -> list[Link]:
        """history and the IDCG/score change tables as the rescore stage builds them from the archive."""
        files = self.inputs.files
        judgments = self.judgments_meta()
        source = judgments.get("source")
        if source and not Path(str(source)).is_absolute():
            judgments = {**judgments, "source": str(self.root / str(source))}
        try:
            built = build_archive_reports(
                self.store,
                dataset=str(config.section(self.params, "dataset.name"))
                if self.params
                else str((self.metrics.get("contract") or {}).get("dataset")),
                contract=self.engine,
                metrics=list(self.metric_cfg["metrics"]),
                primary=str(self.metric_cfg["primary"]),
                judgments=judgments,
                judgments_meta_path=str(files.get(JUDGMENTS_META)),
                queries=self.inputs.queries,
                qrels_path=str(files[QRELS_FILE]),
                docs_path=str(files[paths.DOCS]),
            )
        except (InputError, KeyError) as exc:
            subject = self.report_file(paths.HISTORY)
            return [Link("report", subject, "mismatch", f"the archive cannot be scored again: {exc}")]
        stage = self._writer(self.report_file(paths.HISTORY_MD))
        links = []
        for path, table in (
            (paths.HISTORY, built.history),
            (paths.IDCG_CHANGES, built.idcg_changes),
            (paths.SCORE_CHANGES, built.score_changes),
        ):
            path = self.report_file(path)
            if not self.declared(path):
                continue
            if not (self.root / path).exists():
                links.append(Link("report", path, "missing", "not on disk"))
                continue
            recorded = pl.read_parquet(self.root / path)
            if recorded.equals(table):
                links.append(
                    Link(
                        "report",
                        path,
                        "ok",
                        f"every row as the archived runs score under the active judgments ({table.height} rows)",
                    )
                )
            else:
                keys = [k for k in ("config_id", "run_sha256", "query_id", "metric") if k in table.columns]
                links.append(Link("report", path, "mismatch", _frame_difference(recorded, table, keys)))
        for path, text in (
            (paths.HISTORY_MD, built.history_markdown),
            (paths.IDCG_CHANGES_MD, built.idcg_changes_markdown),
        ):
            path = self.report_file(path)
            if self.declared(path):
                links.append(self._markdown_link(path, lambda text=text: text, stage))
        return links
