"""DVC stage `report`: the evaluation card, observations, plots and a readable report of the grid.

Reads reports/metrics.json, per_query.parquet and lineage.json (written by `score`), params.yaml,
data/work/* (documents, queries, judgments, runs) and the holdout access log; writes

* reports/card.json          the evaluation card (releval.provenance.card), validated
* reports/observations.json  one observation per configuration under that card, validated
* reports/report.md          grid, comparisons against grid.baseline, slices, worst queries,
                             the card, coverage and truncation warnings
* reports/report.html        the same plots, rendered offline (Vega inlined from dvc_plots/offline.html)
* reports/plots/*.json       DVC plot data (see the `plots:` section of dvc.yaml)
* reports/plots/*.png        the plots as images

Every output goes through releval.io's atomic writers.
"""

import argparse
import json
import os
import subprocess
from pathlib import Path

import polars as pl

from releval.provenance import card as cards
from releval import io
from releval.measurement import compare
from releval.measurement import holdout
from releval.reporting import plots
from releval.retrieval import runs
from releval.measurement import scoring
from releval.config import load_params, section
from releval.errors import InputError
from releval.stage import entry, warn

JUDGED_WARNING = 0.5  # as stages/score.py: judged@k below this leans on unjudged documents
CODE_PATHS = ("stages", "conf", "dvc.yaml", "params.yaml", "pyproject.toml", "requirements", "dvc_plots")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reports", default="reports")
    parser.add_argument("--work", default="data/work")
    parser.add_argument("--template", default="dvc_plots/offline.html")
    parser.add_argument("--holdout-log", default=str(holdout.DEFAULT_LOG))
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of the queries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worst", type=int, default=10, help="how many worst queries to list")
    args = parser.parse_args()
    reports, work = Path(args.reports), Path(args.work)
    params = load_params()
    metrics_doc = _json(reports / "metrics.json")
    contract = metrics_doc["contract"]
    configs = metrics_doc["configs"]
    if not configs:
        raise InputError("no configurations were scored", file=str(reports / "metrics.json"), field="configs")
    lineage = _json(reports / "lineage.json")
    per_query = pl.read_parquet(reports / "per_query.parquet").with_columns(pl.col("query_id").cast(pl.Utf8))
    docs = pl.read_parquet(work / "docs.parquet")
    queries = pl.read_parquet(work / "queries.parquet").with_columns(pl.col("query_id").cast(pl.Utf8))
    qrels = pl.read_parquet(work / "qrels.parquet").with_columns(
        pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8)
    )
    judgments_meta = _json(work / "judgments.json")
    dataset, judgments_params = section(params, "dataset"), section(params, "judgments")
    scored = holdout.scored_queries(queries, contract, source=str(work / "queries.parquet"))
    scored_ids = scored["query_id"].to_list()
    slices = compare.query_slices(scored)
    log_entries = holdout.read_log(args.holdout_log)
    split_counts = holdout.split_counts(queries)
    run_metas = {cid: _run_meta(lineage.get(cid, {})) for cid in configs}

    card = cards.build_card(
        contract=contract,
        dataset=dataset,
        judgments_params=judgments_params,
        judgments_meta=judgments_meta,
        corpus=_corpus_info(dataset, docs, work),
        queries=_queries_info(dataset, queries, split_counts, work),
        qrels_sha256=cards.qrels_content_sha256(qrels),
        models=_models_used(params, lineage),
        slices={name: len(ids) for name, ids in slices.items()},
        holdout={
            **holdout.summary(log_entries),
            "holdout_queries": split_counts["holdout"],
            "sealed_queries": int(contract.get("holdout_queries_sealed", 0)),
            "log": args.holdout_log,
        },
        code=_code_state(),
        rubric=_rubric(judgments_meta),
    )
    cards.validate_card(card, str(reports / "card.json"))
    warnings = _warnings(configs, run_metas, contract)
    observations = []
    for cid in configs:
        rows = per_query.filter(pl.col("config_id") == cid)
        computed = cards.slice_means(rows, slices, contract["metrics"]) if slices else {}
        observations.append(
            cards.build_observation(
                card,
                cid,
                configs[cid],
                lineage.get(cid, {}),
                run_metas[cid],
                slices=computed,
                warnings=warnings.get(cid, []),
            )
        )
    observations_doc = {"card_id": card["card_id"], "observations": observations}
    cards.validate_observations(observations_doc, card, str(reports / "observations.json"))

    primary = contract.get("primary") or contract["metrics"][0]
    order = list(configs)
    baseline = _baseline(params, order)
    tables = {
        "ndcg_ci": plots.interval_table(per_query, primary, order, args.resamples, args.seed),
        "recall_curve": plots.recall_curve_table(
            _doc_runs(lineage, order, scored_ids),
            holdout.restrict(qrels, scored_ids),
            scoring.contract_from_record(contract),
        ),
        "quality_cost": plots.quality_cost_table(configs, primary),
        "difference_hist": plots.difference_table(per_query, baseline, primary, order),
    }
    specs = plots.vega_specs(tables, primary, baseline)
    plots_dir = reports / "plots"
    for name, rows in tables.items():
        io.write_json(plots_dir / f"{name}.json", rows)
        io.write_bytes(plots_dir / f"{name}.png", plots.render_png(name, rows, primary, baseline))
    ranked = cards.rank_observations(observations, [card], primary)
    markdown = _report_markdown(
        card, ranked, tables["ndcg_ci"], configs, contract, per_query, scored, qrels, baseline, primary, warnings, args
    )
    io.write_json(reports / "card.json", card)
    io.write_json(reports / "observations.json", observations_doc)
    io.write_text(reports / "report.md", markdown)
    page = plots.html_page(
        plots.read_template(args.template),
        specs,
        f"releval report: {card['dataset']} under judgments {card['judgments']['version']}",
        intro_html=_intro_html(card, ranked, primary),
        images={name: f"plots/{name}.png" for name in tables},
    )
    io.write_text(reports / "report.html", page)
    for messages in warnings.values():
        for message in messages:
            warn(message)
    print(f"report: card {card['card_id']}, {len(observations)} observations, baseline {baseline}, {len(tables)} plots")


# --------------------------------------------------------------------------- inputs


def _json(path: Path):
    if not path.exists():
        raise InputError("missing; run `dvc repro`", file=str(path))
    return json.loads(path.read_text(encoding="utf-8"))


def _sha256_if_file(path) -> str | None:
    path = Path(str(path)) if path else None
    return io.sha256_file(path) if path is not None and path.is_file() else None


def _corpus_info(dataset: dict, docs: pl.DataFrame, work: Path) -> dict:
    corpus = dataset.get("corpus") or {}
    return {
        "id": dataset.get("name"),
        "source": corpus.get("path"),
        "format": corpus.get("format"),
        "content_sha256": cards.corpus_content_sha256(docs),
        "file_sha256": io.sha256_file(work / "docs.parquet"),
        "source_sha256": _sha256_if_file(corpus.get("path")),
        "documents": docs.height,
        "subset": (dataset.get("subset") or {}).get("docs"),
    }


def _queries_info(dataset: dict, queries: pl.DataFrame, split_counts: dict, work: Path) -> dict:
    spec = dataset.get("queries") or {}
    return {
        "id": dataset.get("name"),
        "version": spec.get("version"),
        "source": spec.get("path"),
        "format": spec.get("format"),
        "content_sha256": cards.queries_content_sha256(queries),
        "file_sha256": io.sha256_file(work / "queries.parquet"),
        "source_sha256": _sha256_if_file(spec.get("path")),
        "total": queries.height,
        "splits": split_counts,
    }


def _rubric(judgments_meta: dict) -> dict | None:
    name = judgments_meta.get("rubric")
    if not name:
        return None
    source = Path(str(judgments_meta.get("source") or "."))
    path = Path(os.path.normpath((source if source.is_dir() else source.parent) / name))
    summary = None
    if path.is_file():
        paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        prose = [p for p in paragraphs if not p.startswith(("#", "|", "-", "*"))]
        summary = " ".join(" ".join(prose[0].split()).split(" ")[:120]) if prose else None
    return {
        "path": str(path),
        "sha256": judgments_meta.get("rubric_sha256") or _sha256_if_file(path),
        "summary": summary,
    }


def _models_used(params: dict, lineage: dict) -> dict:
    declared = params.get("models") or {}
    used = sorted({name for entry in lineage.values() for name in (entry.get("models") or {})})
    return {name: declared.get(name, {}) for name in used}


def _code_state() -> dict:
    def git(*cmd):
        try:
            return subprocess.run(["git", *cmd], capture_output=True, text=True)
        except OSError:
            return None

    head = git("rev-parse", "HEAD")
    if head is None or head.returncode != 0:
        return {"commit": None, "dirty": False, "dirty_paths": []}
    status = git("status", "--porcelain", "--untracked-files=all", "--", *CODE_PATHS)
    paths = sorted({line[3:] for line in status.stdout.splitlines() if line.strip()}) if status else []
    return {"commit": head.stdout.strip(), "dirty": bool(paths), "dirty_paths": paths}


def _run_meta(entry: dict) -> dict:
    run_dir = entry.get("run_dir")
    if run_dir and (Path(run_dir) / "run.json").exists():
        return json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    return {}


def _doc_runs(lineage: dict, configs: list[str], scored_ids: list[str]) -> dict[str, pl.DataFrame]:
    found = {}
    for cid in configs:
        run_dir = (lineage.get(cid) or {}).get("run_dir")
        if not run_dir or not (Path(run_dir) / "run.parquet").exists():
            raise InputError(f"no run for {cid}; run `dvc repro`", file="reports/lineage.json", field=cid)
        chunk_run, _ = runs.read_run(run_dir)
        found[cid] = scoring.document_run(chunk_run, scored_ids)
    return found


def _baseline(params: dict, configs: list[str]) -> str:
    baseline = (params.get("grid") or {}).get("baseline")
    if baseline in configs:
        return baseline
    if baseline:
        warn(f"params.yaml grid.baseline {baseline!r} was not scored; comparing against {configs[0]}")
    return configs[0]


def _warnings(configs: dict, run_metas: dict, contract: dict) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for cid, row in configs.items():
        for metric in contract.get("metrics") or []:
            if metric.startswith("judged@") and row.get(metric, 1.0) < JUDGED_WARNING:
                found.setdefault(cid, []).append(
                    f"{cid}: {metric} = {row[metric]:.2f}: most of its top documents are unjudged and count as "
                    "non-relevant; its scores are lower bounds"
                )
        meta = run_metas.get(cid) or {}
        rate = (row.get("ops") or {}).get("truncation_rate")
        if rate and meta.get("kind", "dense") == "dense":
            model = meta.get("model")
            limit = ((meta.get("models") or {}).get(model) or {}).get("protocol", {}).get("max_seq_length")
            share = (row.get("ops") or {}).get("truncated_token_share")
            found.setdefault(cid, []).append(
                f"{cid}: {rate:.1%} of chunks were truncated at {model}'s max_seq_length"
                + (f" ({limit} tokens)" if limit else "")
                + (
                    f", {share:.1%} of their tokens never embedded"
                    if share is not None
                    else "; their ends were never embedded"
                )
            )
    return found


# --------------------------------------------------------------------------- report.md


def _fmt(value, spec="{:.4f}") -> str:
    if value is None:
        return "–"
    try:
        return spec.format(value)
    except (TypeError, ValueError):
        return str(value)


def _sides(per_query: pl.DataFrame, contract: dict, config_id: str) -> compare.Side:
    rows = per_query.filter(pl.col("config_id") == config_id).drop("config_id")
    rows = rows.select([c for c in rows.columns if c == "query_id" or rows[c].null_count() < rows.height])
    return compare.Side(config_id, "reports/per_query.parquet", dict(contract), rows)


def _report_markdown(
    card, ranked, intervals, configs, contract, per_query, scored, qrels, baseline, primary, warnings, args
) -> str:
    ci = {row["config_id"]: row for row in intervals}
    quality = [m for m in contract["metrics"] if not m.startswith(("judged@", "ceiling@"))][:4]
    coverage = [m for m in contract["metrics"] if m.startswith("judged@")]
    header = [
        "configuration",
        f"{primary} [95% CI]",
        *[m for m in quality if m != primary],
        *coverage,
        "chunks/s",
        "index MB",
        "p95 ms",
        "truncated",
    ]
    lines = [
        f"# releval report: {card['dataset']}",
        "",
        f"Card `{card['card_id']}`; judgments {card['judgments']['version']}; "
        f"{card['queries']['count']} queries scored (split {card['queries']['split']}); "
        f"baseline `{baseline}`. Plots: reports/report.html (opens offline), reports/plots/*.png.",
        "",
        "## Grid",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    for item in ranked:
        row, ops = configs[item.config_id], configs[item.config_id].get("ops") or {}
        interval = ci.get(item.config_id) or {}
        cells = [
            f"`{item.config_id}`",
            f"{row[primary]:.4f} [{_fmt(interval.get('low'))}, {_fmt(interval.get('high'))}]",
            *[_fmt(row.get(m)) for m in quality if m != primary],
            *[_fmt(row.get(m), "{:.2f}") for m in coverage],
            _fmt(ops.get("chunks_per_s"), "{:.1f}"),
            _fmt(None if ops.get("index_bytes") is None else ops["index_bytes"] / 1e6, "{:.2f}"),
            _fmt(ops.get("latency_ms_p95"), "{:.1f}"),
            _fmt(ops.get("truncation_rate"), "{:.1%}"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Intervals: percentile bootstrap over queries, {args.resamples} resamples, seed {args.seed}.", ""]

    lines += [f"## Against the baseline `{baseline}`", ""]
    secondary = [m for m in compare.DEFAULT_SECONDARY if m in per_query.columns]
    if len(configs) > 1:
        grid = compare.compare_grid(
            per_query, baseline, primary, list(configs), args.resamples, args.seed, contract=contract
        )
        lines += ["```", compare.render_grid(grid), "```", ""]
        base_side = _sides(per_query, contract, baseline)
        for cid in configs:
            if cid == baseline:
                continue
            pair = compare.compare_sides(
                base_side,
                _sides(per_query, contract, cid),
                primary,
                secondary,
                scored,
                n_resamples=args.resamples,
                seed=args.seed,
            )
            lines += ["```", compare.render_pair(pair), "```", ""]
    else:
        lines += ["Only one configuration was scored; nothing to compare.", ""]

    lines += ["## Slices", ""]
    slices = compare.query_slices(scored)
    if slices:
        names = list(slices)
        lines += [
            "| configuration | " + " | ".join(f"{n} ({len(slices[n])})" for n in names) + " |",
            "|---|" + "---:|" * len(names),
        ]
        for item in ranked:
            obs_slices = item.observation["scores"]["slices"]
            lines.append(
                f"| `{item.config_id}` | "
                + " | ".join(_fmt((obs_slices.get(n) or {}).get("mean", {}).get(primary)) for n in names)
                + " |"
            )
        lines.append(
            f"\n{primary} per slice (in brackets: scored queries carrying it); a query may carry several "
            "slices; – : no query of the slice could be evaluated (none has a relevant judgment)."
        )
    else:
        lines.append("No slices declared (the queries carry no `slices`).")
    lines.append("")

    lines += [f"## Worst queries ({primary}, mean over configurations)", ""]
    texts = compare.query_texts(scored)
    relevant = qrels.filter(pl.col("grade") >= int(contract.get("rel_threshold", 1))).group_by("query_id").len()
    relevant = dict(relevant.iter_rows())
    hardest = (
        per_query.group_by("query_id")
        .agg(pl.col(primary).mean().alias("mean"), pl.col(primary).max().alias("best"))
        .sort(["mean", "query_id"])
        .head(args.worst)
    )
    base_scores = dict(per_query.filter(pl.col("config_id") == baseline).select("query_id", primary).iter_rows())
    lines += ["| query | text | relevant | mean | baseline | best |", "|---|---|---:|---:|---:|---:|"]
    for query_id, mean, best in hardest.iter_rows():
        text = " ".join(str(texts.get(query_id, "")).split())
        text = text if len(text) <= 70 else text[:69] + "…"
        lines.append(
            f"| {query_id} | {text.replace('|', '/')} | {relevant.get(query_id, 0)} | {mean:.4f} | "
            f"{_fmt(base_scores.get(query_id))} | {best:.4f} |"
        )
    lines += ["", "## Evaluation card", "", cards.card_markdown(card), ""]

    lines += ["## Warnings", ""]
    messages = [m for cid in configs for m in warnings.get(cid, [])]
    lines += [f"- {m}" for m in messages] if messages else ["None."]
    if card["code"]["dirty"]:
        lines.append(
            f"- the code or configuration differs from commit {card['code']['commit']} "
            f"({len(card['code']['dirty_paths'])} path(s)); commit before reporting these numbers"
        )
    return "\n".join(lines) + "\n"


def _intro_html(card, ranked, primary) -> str:
    import html

    rows = "".join(f"<tr><td>{html.escape(r.config_id)}</td><td>{r.value:.4f}</td></tr>" for r in ranked)
    return (
        f"<p>Card <code>{card['card_id']}</code>: corpus {html.escape(card['corpus']['id'])} "
        f"({card['corpus']['documents']} documents), {card['queries']['count']} queries "
        f"(split {card['queries']['split']}), judgments {html.escape(card['judgments']['version'])}, "
        f"relevance grade &gt;= {card['judgments']['relevance']['threshold']}.</p>"
        f"<table><tr><th>configuration</th><th>{html.escape(primary)}</th></tr>{rows}</table>"
    )


if __name__ == "__main__":
    entry(main)
