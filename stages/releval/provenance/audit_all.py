"""What `releval audit --all` reads once and the links it makes of it (:class:`AllAudit`): every
configuration scored once, each number, slice mean, condensed-list mean, count and cost figure of
metrics.json against it, the grid, lineage.json, the archive and the contract; the report files
are :class:`releval.provenance.report_checks.ReportChecks`'."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from releval import config, io, paths
from releval.errors import InputError
from releval.judging.completeness import metrics_for
from releval.measurement import evidence, holdout, operations, scoring
from releval.measurement.metrics import contract_from_params
from releval.progress import progress
from releval.provenance import archive, revisions
from releval.provenance.hash_checks import judgments_source_links, model_links, run_file_links
from releval.provenance.lineage import JUDGMENTS_META, QUERIES_FILE, _covers, _read_json, _rel, reports_files
from releval.provenance.links import Link, _short, _slice_link, _unique
from releval.provenance.recomputation import Rescored, ScoringInputs, audited_inputs, run_source
from releval.provenance.report_checks import ReportChecks
from releval.retrieval import runs
from releval.retrieval.chunking import titles_term


@dataclass
class AllAudit(ReportChecks):
    """What `audit --all` reads once, and the links it makes of it."""

    root: Path
    folder: str  # the dataset's reports folder
    metrics_file: str
    lineage_file: str
    metrics: dict[str, Any]
    lineage: dict[str, Any]
    params: dict[str, Any] | None
    lock: dict[str, Any]
    inputs: ScoringInputs
    input_links: list[Link]
    store: archive.Archive
    metric_cfg: dict[str, Any]
    engine: Any  # the metric engine's Contract
    split: str
    expected: list[str]  # the configurations the grid declares, in the order score.py scores them
    rescored: dict[str, Rescored | str]  # config_id -> its rescoring, or why it could not be had
    documents: int | None
    selected: pl.DataFrame | None = None  # the queries score.py scores (its split)
    scored: Any = None  # releval.measurement.scoring.ScoredQueries: those queries with their qrels and slices
    passages: Any = None  # releval.measurement.scoring.EvidenceInputs: the rebuilt spans, when judgments mark any
    # configurations whose passage-level figures are taken as recorded: their chunk-level runs are not here
    evidence_as_recorded: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, root: Path, tmp: Path, desc: str | None) -> AllAudit:
        folder = config.reports_folder(root / paths.PARAMS)
        metrics_file, lineage_file = reports_files(root)
        metrics = _read_json(root / metrics_file, root)
        lineage = _read_json(root / lineage_file, root)
        params = config.load_params(root / paths.PARAMS) if (root / paths.PARAMS).exists() else None
        lock = revisions.read_lock_stages(root)
        inputs, input_links = audited_inputs(root, tmp, lock)
        recorded = metrics.get("contract") or {}
        if params is not None:
            metric_cfg = dict(config.section(params, "metric"))
            engine = contract_from_params(metric_cfg)
            grid = config.section(params, "grid")
            expected = list(runs.grid_run_folders(grid, paths.RUNS))
        else:  # a repository without params.yaml: its own record is all there is to go by
            metric_cfg = {
                "metrics": list(recorded.get("metrics") or []),
                "primary": recorded.get("primary") or (recorded.get("metrics") or [None])[0],
                "collapse": recorded.get("collapse", "first"),
                **({scoring.COVERAGE_KEY: recorded[scoring.COVERAGE_KEY]} if scoring.COVERAGE_KEY in recorded else {}),
            }
            engine = scoring.contract_from_record(recorded)
            expected = list(metrics.get("configs") or {})
        if metric_cfg.get("collapse", "first") != "first":
            raise InputError(
                f"unknown collapse rule {metric_cfg.get('collapse')!r}; score.py collapses 'first'",
                file=paths.PARAMS if params is not None else metrics_file,
                field="metric.collapse",
            )
        split = _score_split(lock, metrics_file)
        docs_file = inputs.files.get(paths.DOCS)
        documents = (
            pl.scan_parquet(docs_file).select(pl.len()).collect().item() if docs_file and docs_file.exists() else None
        )
        state = cls(
            root,
            folder,
            metrics_file,
            lineage_file,
            metrics,
            lineage,
            params,
            lock,
            inputs,
            input_links,
            archive.Archive(root / paths.ARCHIVE),
            metric_cfg,
            engine,
            split,
            expected,
            {},
            documents,
        )
        state.rescore(desc)
        return state

    # ----------------------------------------------------------------- scoring every configuration once

    def entry(self, config_id: str) -> dict[str, Any]:
        """lineage.json's entry of a configuration; where it has none, the grid's run folder."""
        entry = self.lineage.get(config_id) or {}
        if entry.get("run_dir") or self.params is None:
            return entry
        folders = runs.grid_run_folders(config.section(self.params, "grid"), paths.RUNS)
        return {"run_dir": folders[config_id].as_posix()} if config_id in folders else {}

    def configs(self) -> list[str]:
        """The grid's configurations, then any other metrics.json holds (each is scored)."""
        return list(dict.fromkeys([*self.expected, *(self.metrics.get("configs") or {})]))

    def completeness(self) -> Any:
        """What the judgments declare (judgments.json): positives-only leaves judged@k, bpref and
        condensed lists out."""
        return scoring.judged_completeness(self.judgments_meta())

    def metric_names(self) -> list[str]:
        """The metrics score.py computes: params' list, less what the judgments' completeness leaves out."""
        return metrics_for(list(self.metric_cfg["metrics"]), self.completeness())[0]

    def rescore(self, desc: str | None) -> None:
        metric_names = self.metric_names()
        spans = self.inputs.files.get(paths.EVIDENCE) or self.root / paths.EVIDENCE
        self.passages = scoring.evidence_inputs(self.metric_cfg, spans, self.root / paths.CHUNKS)
        selected = holdout.select_queries(self.inputs.queries, self.split, source=QUERIES_FILE)
        self.scored = scoring.scored_queries(selected, self.inputs.qrels)
        self.selected = selected
        configs = self.configs()
        for config_id in progress(configs, desc, len(configs), "configurations"):
            try:
                self.rescored[config_id] = self._rescore_one(config_id, metric_names)
            except InputError as exc:
                self.rescored[config_id] = str(exc)

    def _recorded_evidence_columns(self, config_id: str) -> pl.DataFrame | None:
        """per_query.parquet's passage-level columns of ``config_id`` as recorded (None: none recorded)."""
        path = self.root / self.report_file(paths.PER_QUERY)
        if not path.exists():
            return None
        names = [c for c in pl.read_parquet_schema(path) if c.startswith(evidence.METRIC_PREFIX)]
        if not names:
            return None
        recorded = pl.read_parquet(path, columns=["config_id", "query_id", *names])
        return recorded.filter(pl.col("config_id") == config_id).drop("config_id")

    def _rescore_one(self, config_id: str, metric_names: list[str]) -> Rescored:
        entry = self.entry(config_id)
        if not entry.get("run_dir") and not entry.get("run_sha256"):
            raise InputError(f"{self.lineage_file} has no run for it")
        kind, where = run_source(self.root, config_id, entry, self.store)
        if kind == "run":
            chunk_run, meta = runs.read_run(where)
            doc_run = scoring.document_run(chunk_run, self.scored.ids)
            source, full, run_sha = f"{entry['run_dir']}/run.parquet", True, io.sha256_file(where / "run.parquet")
        else:
            doc_run = holdout.restrict(self.store.read_documents(where["docs_sha256"]), self.scored.ids)
            meta = (
                self.store.read_meta(where["meta_sha256"])
                if self.store.meta_file(where["meta_sha256"]).exists()
                else None
            )
            source = f"the committed archive ({paths.ARCHIVE}/{archive.DOCS_DIR}/{where['docs_sha256'][:12]}…)"
            full, run_sha = where["depth"] is None, where["run_sha256"]
        evaluation = scoring.score(doc_run, self.scored, metric_names, self.engine)
        condensed = full and not self.completeness().positives_only
        per_query = (
            scoring.with_condensed(evaluation, doc_run, self.scored.qrels) if condensed else evaluation.per_query
        )
        recorded = (self.metrics.get("configs") or {}).get(config_id) or {}
        result = {
            "mean": dict(evaluation.mean),
            "condensed": scoring.condensed_means(per_query) if full else dict(recorded.get("condensed") or {}),
            "counts": evaluation.counts,
            "ops": operations.cost_figures(meta.get("ops") or {}) if meta else dict(recorded.get("ops") or {}),
            "slices": evaluation.slices or {},
            "warnings": scoring.run_warnings(config_id, evaluation, metric_names, meta or {}),
        }
        if self.passages is not None and kind == "run":  # passage-level figures need the chunk-level run
            by_query, result[scoring.EVIDENCE_KEY] = scoring.score_evidence(
                chunk_run, meta, self.scored, self.passages, self.engine
            )
            if by_query is not None:
                per_query = per_query.join(by_query, on="query_id", how="left", maintain_order="left")
        elif self.passages is not None and scoring.EVIDENCE_KEY in recorded:
            # Not recomputable from the archive (it keeps document-level runs): the figures and the per-query
            # columns are taken as recorded, and the per-query link says so.
            result[scoring.EVIDENCE_KEY] = recorded[scoring.EVIDENCE_KEY]
            recorded_columns = self._recorded_evidence_columns(config_id)
            if recorded_columns is not None:
                per_query = per_query.join(recorded_columns, on="query_id", how="left", maintain_order="left")
                self.evidence_as_recorded.append(config_id)
        return Rescored(
            config_id,
            entry.get("run_dir"),
            source,
            full,
            evaluation,
            per_query.with_columns(pl.lit(config_id).alias("config_id")),
            doc_run,
            meta,
            run_sha,
            result,
        )

    # ----------------------------------------------------------------- the links

    def links(self) -> list[Link]:
        links = list(self.input_links)
        links += self.grid_links()
        links += self.number_links()
        links += self.config_links()
        links += self.archive_links()
        links += judgments_source_links(self.root, self.judgments_meta())
        truth = self.true_document()
        if truth is not None:
            links += self.contract_links(truth)
            links += self.report_links(truth)
        else:
            unscored = [c for c in self.expected if not isinstance(self.rescored.get(c), Rescored)]
            links.append(
                Link(
                    "report",
                    self.folder,
                    "note",
                    "the report files are not checked: "
                    + (f"{', '.join(unscored)} could not be scored" if unscored else "no configuration to check"),
                )
            )
        return _unique(links)

    def judgments_meta(self) -> dict[str, Any]:
        path = self.inputs.files.get(JUDGMENTS_META)
        return json.loads(path.read_text(encoding="utf-8")) if path is not None and path.exists() else {}

    def grid_links(self) -> list[Link]:
        """Every configuration the grid declares is scored, recorded and traced; nothing else is."""
        if self.params is None:
            return [
                Link("grid", paths.PARAMS, "note", "no params.yaml: which configurations must be there is not checked")
            ]
        recorded, traced = set(self.metrics.get("configs") or {}), set(self.lineage)
        links = []
        for config_id in self.expected:
            if config_id not in recorded:
                links.append(
                    Link(
                        "grid",
                        config_id,
                        "missing",
                        f"the grid in {paths.PARAMS} declares it; {self.metrics_file} has no entry",
                    )
                )
            if config_id not in traced:
                links.append(
                    Link(
                        "grid",
                        config_id,
                        "missing",
                        f"the grid in {paths.PARAMS} declares it; {self.lineage_file} has no entry",
                    )
                )
        for config_id in sorted((recorded | traced) - set(self.expected)):
            where = " and ".join(
                f for f, keys in ((self.metrics_file, recorded), (self.lineage_file, traced)) if config_id in keys
            )
            links.append(
                Link("grid", config_id, "mismatch", f"in {where}, but not in the grid {paths.PARAMS} declares")
            )
        if not links:
            links.append(
                Link(
                    "grid",
                    f"{len(self.expected)} configurations",
                    "ok",
                    f"the grid in {paths.PARAMS}, {self.metrics_file} and {self.lineage_file} "
                    "name the same configurations",
                )
            )
        return links

    def number_links(self) -> list[Link]:
        """Each metric and slice mean of metrics.json against its recomputation."""
        links = []
        rescored = {c: r for c, r in self.rescored.items() if isinstance(r, Rescored)}
        from_archive = sorted(c for c, r in rescored.items() if r.source.startswith("the committed archive"))
        if from_archive:
            links.append(
                Link(
                    "archive",
                    f"{len(from_archive)} of {len(self.rescored)} configurations",
                    "ok",
                    f"runs read from the committed archive ({paths.ARCHIVE}), each file's sha256 matching its "
                    "name: their chunk-level runs are not available here",
                )
            )
        for config_id, row in (self.metrics.get("configs") or {}).items():
            again = self.rescored.get(config_id)
            if not isinstance(again, Rescored):
                links.append(Link("recompute", config_id, "missing", again or "not scored"))
                continue
            for metric in self.metric_names():
                recorded, value = row.get(metric), again.result["mean"].get(metric)
                status = "ok" if recorded == value else "mismatch"
                links.append(
                    Link(
                        "recompute",
                        f"{config_id} {metric}",
                        status,
                        f"{value!r}" if status == "ok" else f"{self.metrics_file} {recorded!r}, recomputed {value!r}",
                    )
                )
            mine = again.result["slices"]
            for name in dict.fromkeys([*(row.get("slices") or {}), *mine]):
                block, computed = (row.get("slices") or {}).get(name) or {}, (mine.get(name) or {}).get("mean") or {}
                for metric in dict.fromkeys([*(block.get("mean") or {}), *computed]):
                    links.append(
                        _slice_link(
                            f"{config_id} slice {name} {metric}",
                            (block.get("mean") or {}).get(metric),
                            computed.get(metric),
                        )
                    )
        return links

    def config_links(self) -> list[Link]:
        """Per configuration: condensed means, counts and cost figures in metrics.json, its
        lineage.json entry, its run file and the archive's copy, its models' weights."""
        links = []
        for config_id, again in self.rescored.items():
            if not isinstance(again, Rescored):
                continue
            row = (self.metrics.get("configs") or {}).get(config_id)
            if row is not None:
                links += self._figure_links(config_id, row, again)
            entry = self.lineage.get(config_id)
            if entry is not None:
                links += self._lineage_links(config_id, entry, again)
                if entry.get("run_dir"):
                    links += run_file_links(
                        self.root, config_id, entry["run_dir"], entry.get("run_sha256"), self.store, self.lineage_file
                    )
                links += model_links(self.root, entry.get("models") or (again.meta or {}).get("models") or {})
            if (
                again.source.endswith("run.parquet")
                and self.lock_has_archive()
                and self.store.entry(again.run_sha256, config_id) is None
            ):
                links.append(
                    Link(
                        "archive",
                        f"{again.run_dir}/run.parquet",
                        "missing",
                        f"{config_id}'s run (sha256 {again.run_sha256[:12]}) is not in {paths.ARCHIVE}, which the "
                        "archive stage keeps every scored run in",
                    )
                )
        return links

    def lock_has_archive(self) -> bool:
        return any(_covers(paths.ARCHIVE, o["path"]) for s in self.lock.values() for o in s.get("outs") or [])

    def _figure_links(self, config_id: str, row: Mapping[str, Any], again: Rescored) -> list[Link]:
        links = []
        if again.full:
            recorded = row.get("condensed") or {}
            for metric in dict.fromkeys([*recorded, *again.result["condensed"]]):
                mine = again.result["condensed"].get(metric)
                links.append(
                    Link(
                        "condensed",
                        f"{config_id} {metric}{scoring.CONDENSED_MARK}",
                        "ok" if recorded.get(metric) == mine else "mismatch",
                        f"{mine!r}"
                        if recorded.get(metric) == mine
                        else f"{self.metrics_file} {recorded.get(metric)!r}, recomputed {mine!r}",
                    )
                )
        else:
            links.append(
                Link(
                    "condensed",
                    f"{config_id} condensed",
                    "note",
                    "not recomputed: the archive keeps this run to a depth, and a condensed list reaches below it",
                )
            )
        if scoring.EVIDENCE_KEY in row or scoring.EVIDENCE_KEY in again.result:
            subject = f"{config_id} evidence"
            if not again.full:
                links.append(
                    Link("evidence", subject, "note", "not recomputed: passage-level figures need the chunk-level run")
                )
            else:
                recorded, mine = row.get(scoring.EVIDENCE_KEY) or {}, again.result.get(scoring.EVIDENCE_KEY) or {}
                means, computed = recorded.get("mean") or {}, mine.get("mean") or {}
                for metric in dict.fromkeys([*means, *computed]):
                    value = computed.get(metric)
                    ok = means.get(metric) == value
                    links.append(
                        Link(
                            "recompute",
                            f"{config_id} {metric}",
                            "ok" if ok else "mismatch",
                            f"{value!r} from the chunk-level run and {paths.EVIDENCE}"
                            if ok
                            else f"{self.metrics_file} {means.get(metric)!r}, recomputed {value!r}",
                        )
                    )
                rest = {k: v for k, v in recorded.items() if k != "mean"}
                rest_mine = {k: v for k, v in mine.items() if k != "mean"}
                links.append(
                    Link("evidence", subject, "ok", "passage-level counts as recomputed from the chunks")
                    if rest == rest_mine
                    else Link(
                        "evidence",
                        subject,
                        "mismatch",
                        f"{self.metrics_file} {_short(rest)}, recomputed {_short(rest_mine)}",
                    )
                )
        counts = row.get("counts") or {}
        if counts == again.result["counts"]:
            links.append(
                Link("counts", f"{config_id} counts", "ok", f"{len(counts)} counts as recomputed (queries, rows, ties)")
            )
        else:
            differ = sorted(
                k for k in {*counts, *again.result["counts"]} if counts.get(k) != again.result["counts"].get(k)
            )
            links.append(
                Link(
                    "counts",
                    f"{config_id} counts",
                    "mismatch",
                    "; ".join(
                        f"{k}: {self.metrics_file} {counts.get(k)!r}, recomputed {again.result['counts'].get(k)!r}"
                        for k in differ
                    ),
                )
            )
        ops, where = (
            row.get("ops") or {},
            "run.json" if again.source.endswith("run.parquet") else "the archive's run.json",
        )
        if again.meta is None:
            links.append(Link("ops", f"{config_id} ops", "missing", f"no run.json in {again.run_dir} or the archive"))
            return links
        raw, mine = again.meta.get("ops") or {}, again.result["ops"]
        for key in dict.fromkeys([*ops, *mine]):
            if key in ops and key in raw and ops[key] == raw[key]:
                links.append(Link("ops", f"{config_id} ops.{key}", "ok", f"equals {where} ops.{key}"))
            else:
                links.append(
                    Link(
                        "ops",
                        f"{config_id} ops.{key}",
                        "mismatch",
                        f"{self.metrics_file} has {ops.get(key, '(none)')!r}, {where} has {raw.get(key, '(none)')!r}",
                    )
                )
        return links

    def _lineage_links(self, config_id: str, entry: Mapping[str, Any], again: Rescored) -> list[Link]:
        """lineage.json's models and inputs of a configuration against its run.json."""
        if again.meta is None:
            return []
        differ = [
            key
            for key in ("models", "inputs")
            if key in again.meta
            and json.dumps(entry.get(key), sort_keys=True) != json.dumps(again.meta[key], sort_keys=True)
        ]
        if differ:
            return [
                Link(
                    "lineage",
                    f"{config_id}",
                    "mismatch",
                    f"{self.lineage_file}'s {' and '.join(differ)} differ from the run's run.json",
                )
            ]
        return [Link("lineage", config_id, "ok", "models and inputs as the run's run.json records")]

    def archive_links(self) -> list[Link]:
        """Every file the archive index names, its sha256 against its name."""
        index = self.store.index() if self.store.root.exists() else archive.empty_index()
        links = []
        for row in index.iter_rows(named=True):
            for path in (self.store.docs_file(row["docs_sha256"]), self.store.meta_file(row["meta_sha256"])):
                subject = _rel(path, self.root)
                if not path.exists():
                    links.append(Link("archive", subject, "missing", f"{row['config_id']}: the archive index names it"))
                elif archive.sha256_bytes(path.read_bytes()) != path.stem:
                    links.append(
                        Link(
                            "archive",
                            subject,
                            "mismatch",
                            f"{row['config_id']}, run {row['run_sha256'][:12]}: sha256 "
                            f"{archive.sha256_bytes(path.read_bytes())[:12]} does not match the file's name: edited",
                        )
                    )
        if index.height and not links:
            links.append(
                Link(
                    "archive",
                    f"{index.height} archived runs",
                    "ok",
                    f"every file of {paths.ARCHIVE} the index names has the sha256 of its name",
                )
            )
        return _unique(links)

    # ----------------------------------------------------------------- what the score stage would have written

    def true_document(self) -> dict[str, Any] | None:
        """metrics.json as the score stage writes it from the verified inputs and runs: every
        figure recomputed (a slice mean within rounding of the recorded one keeps the recorded
        value); None when a configuration could not be scored."""
        rescored = {c: self.rescored[c] for c in self.expected if c in self.rescored}
        if not rescored or any(not isinstance(r, Rescored) for r in rescored.values()):
            return None
        recorded = self.metrics.get("configs") or {}
        results = {}
        for config_id, again in rescored.items():
            result = dict(again.result)
            kept = (recorded.get(config_id) or {}).get("slices")
            if kept is not None and _slices_agree(kept, result["slices"]):
                result["slices"] = kept
            results[config_id] = result
        judgments = self.judgments_meta()
        contract_record = self.metrics.get("contract") or {}
        if self.params is not None:
            dataset = config.section(self.params, "dataset.name")
            titles = titles_term(self.params)
        else:
            dataset, titles = contract_record.get("dataset"), contract_record.get("titles")
        document = scoring.metrics_document(
            results,
            self.engine,
            {**self.metric_cfg, "metrics": self.metric_names()},
            dataset,
            {"version": judgments.get("version"), "source_sha256": judgments.get("source_sha256"), **judgments},
            self.split_terms(),
            titles=titles,
            documents=self.documents,
            passages=self.passages,
        )
        document["_results"] = results
        return document

    def split_terms(self) -> dict[str, Any]:
        queries = self.inputs.queries
        sealed = holdout.split_counts(queries, source=QUERIES_FILE)["holdout"]
        opened = holdout.opens_holdout(self.split) and sealed > 0
        return {
            "split": holdout.contract_split(queries, self.split),
            "queries": self.selected.height,
            "holdout_queries_sealed": 0 if opened else sealed,
        }

    def contract_links(self, truth: Mapping[str, Any]) -> list[Link]:
        """metrics.json's contract (and saturation block) against what params.yaml, judgments.json and
        the queries give."""
        if self.params is None:
            return [Link("contract", f"{self.metrics_file} contract", "note", "no params.yaml to check it against")]
        recorded, mine = self.metrics.get("contract") or {}, truth["contract"]
        other = self._other_code(self.metrics_file)
        links = []
        for key in dict.fromkeys([*recorded, *mine]):
            if recorded.get(key) == mine.get(key) and (key in recorded) == (key in mine):
                continue
            one_side = (key in recorded) != (key in mine)
            links.append(
                Link(
                    "contract",
                    f"{self.metrics_file} contract.{key}",
                    "note" if other and one_side else "mismatch",
                    f"records {_short(recorded.get(key)) if key in recorded else '(no such term)'}; {paths.PARAMS}, "
                    f"judgments.json and the queries give {_short(mine.get(key)) if key in mine else '(no such term)'}"
                    + (f" ({other})" if other else ""),
                )
            )
        if self.metrics.get("saturation") != truth.get("saturation"):
            links.append(
                Link(
                    "contract",
                    f"{self.metrics_file} saturation",
                    "mismatch",
                    f"records {_short(self.metrics.get('saturation'))}; the corpus gives "
                    f"{_short(truth.get('saturation'))}",
                )
            )
        if not any(link.broken for link in links):
            links.append(
                Link(
                    "contract",
                    f"{self.metrics_file} contract",
                    "ok",
                    f"{len(mine)} terms as {paths.PARAMS}, judgments.json and the queries give them",
                )
            )
        return links


def _score_split(lock: Mapping[str, Any], metrics_file: str) -> str:
    """The split the score stage scored (its ``--split`` in dvc.lock's command; dev by default)."""
    for stage in lock.values():
        if any(o["path"] == metrics_file for o in stage.get("outs") or []):
            match = re.search(r"--split[ =](\w+)", str(stage.get("cmd", "")))
            if match and match.group(1) in holdout.SCORE_SPLITS:
                return match.group(1)
    return "dev"


def _slices_agree(recorded: Mapping[str, Any], computed: Mapping[str, Any]) -> bool:
    """True when every slice mean of ``recorded`` is ``computed``'s (to the slice tolerance), and the blocks match."""
    if set(recorded) != set(computed):
        return False
    for name, block in recorded.items():
        other = computed[name]
        if {k: v for k, v in block.items() if k != "mean"} != {k: v for k, v in other.items() if k != "mean"}:
            return False
        mine, theirs = block.get("mean") or {}, other.get("mean") or {}
        if set(mine) != set(theirs) or any(_slice_link("", mine[m], theirs[m]).status != "ok" for m in mine):
            return False
    return True
