"""Sampled judging on the shipped pydocs data: inferred metrics against the fully judged values.

Data. The 24 runs of the current default grid (reports/lineage.json names each configuration's
run; the committed archive, data/archive, holds it at document level, read with
``Archive.read_documents``, which checks each file's sha256), the 85 dev queries of
data/pydocs/v3/queries.jsonl and the judgments data/judgments/v3, pooled at depth 10 from all 24
configurations: every pair in their top 10 is judged. Truth: releval's ndcg@10, map and dcg@10
(metrics.py, the contract of params.yaml) under the full v3 judgments on those queries.

Designs (releval.measurement.inferred). The frame is the union of the 24 configurations' top-10
pairs, stratified by best rank ([1], [2-3], [4-10]); for each sampling rate and seed a sample is
drawn (:func:`~releval.measurement.inferred.draw_sample`, default allocation) and only its
pairs' v3 grades are given to the estimators:

    sample   nothing else is judged: the sample is the only judgment source
    pool3    the union of the top 3 is judged completely (certain) and the rate applies to the
             rest of the top-10 union

For every draw: infNDCG@10, infAP (whole ranking) and infDCG@10 of the 24 configurations with
their judgment-sampling intervals (a) (queries fixed), the share of relevant documents among
each configuration's unjudged top 10 with its interval, and the paired comparison of every
configuration with the baseline minilm/c256 (interval (b): queries resampled over the per-query
estimates; two-level: judgments resampled too; judgments only). Reported per design, rate and
judgment bootstrap: the bias (mean over seeds of estimate - truth) per configuration, its mean
and maximum magnitude over configurations, the RMSE, and the share of draws whose 95% interval
covers the truth (basic and percentile intervals), mean and minimum over configurations; for the
comparisons the same against the true paired difference; runtime per draw. ``frame truth``
columns use the v3 judgments of the frame pairs only: v3 also judges 36 dev pairs outside every
configuration's top 10 (the query writers' expected documents), which no sample of the frame
can see.

numpy's BLAS is pinned to one thread (OPENBLAS_NUM_THREADS=1 and friends, before numpy loads):
the estimators multiply many small matrices, for which BLAS threads only contend (on a loaded
2-core machine they made an estimate 5 to 10 times slower).

Writes benchmarks/results/inferred.json and inferred.md.

    python benchmarks/bench_inferred.py [--seeds 200] [--rates 0.1,0.2,0.3,0.5]
        [--designs sample,pool3] [--methods replacement,rescaled] [--resamples 1000] [--out DIR]
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from releval import io  # noqa: E402
from releval.api import project_terms, read_judgments  # noqa: E402
from releval.measurement import inferred  # noqa: E402
from releval.measurement.metrics import evaluate  # noqa: E402
from releval.measurement.operations import describe_machine  # noqa: E402
from releval.provenance.archive import Archive  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
JUDGMENTS = ROOT / "data" / "judgments" / "v3"
QUERIES = ROOT / "data" / "pydocs" / "v3" / "queries.jsonl"
LINEAGE = ROOT / "reports" / "lineage.json"
HISTORY = ROOT / "reports" / "history.parquet"
ARCHIVE = ROOT / "data" / "archive"
BASELINE = "minilm/c256"
K = 10
POOL_DEPTH = 3
METRICS = {"infndcg@10": "ndcg@10", "infap": "map", "infdcg@10": "dcg@10"}  # estimate -> releval's truth
RATIO_METRICS = ("infndcg@10", "infap")
COMPARED = ("infndcg@10", "infap")
PAIRED = ("queries", "two-level", "judgments")
CONFIDENCE = 0.95
# Appended to the report: how to read it, and what was tried while building the estimators (the
# figures marked "pilot" come from 25-40 seeds of the same data, not from this run).
NOTES = """## Reading

- The unbiased estimates are unbiased: infDCG@10 (truth 4.9-6.8) and the share of relevant
  documents among a configuration's unjudged top 10 are off by no more than the Monte Carlo error
  of 200 draws (infDCG@10 at 10%: mean bias -0.055 where one draw's RMSE is 0.65; the share:
  0.003 at most). In the `sample` design their intervals cover 85-97% of the time; in `pool3`
  the frame holds 1.5% relevant pairs (0.33 per query), a sample finds a handful of them over the
  85 queries, and the bootstrap of so few rare events covers 47-93%.
- The ratio estimates (infNDCG@10, infAP) are biased. At 10% (3.6 pairs per query) the top
  stratum (best rank 1: 4.4 pairs per query, 37% relevant, most of the relevant pairs) is sampled
  about once per query, and a query whose sample holds no relevant pair scores 0: -0.11 / -0.13.
  From 20% on the allocation judges the top stratum completely and a positive bias remains
  (+0.02 / +0.04 at 30%, +0.009 / +0.018 at 50%, +0.002 to +0.007 / +0.009 to +0.027 in `pool3`):
  a rare relevant pair of a deep stratum, weighted 1/pi = 3 to 11, is missed by most samples (the
  ideal DCG and the relevant count come out too small, the metric too large) and, when drawn,
  counts 3 to 11 times in a ratio that is concave in it. The bias does not shrink with the number
  of queries while a mean's sampling noise does, so interval (a) of a mean over 85 queries
  under-covers (basic: 10-75% of the draws; in `sample` at 10% it covers best, being widest).
- Differences between configurations share most of that bias: from 20% on, the mean |bias| of a
  difference is 0.0003-0.008 (nDCG) and 0.0015-0.017 (AP), and interval (b) (queries resampled, as
  releval's verdicts) holds the true difference on the same queries in 98-100% of the draws; its
  width is 0.9-1.0 times that of a normal interval with the queries' spread under full judgments
  plus the estimate's spread over the draws, i.e. about right for a verdict about queries in
  general (over-covering a fixed-query truth is expected). At 10% of the `sample` frame: 90%
  (nDCG), 51% (AP). The judgments-only interval under-covers like (a).

## What was tried

- Judgment bootstrap. Rao & Wu's rescaling with n_h - 1 draws (the first choice) gives the exact
  stratified variance for linear estimates (tested), but its factors never reach 0 and it showed
  about half the spread of infNDCG@10 that repeated samples have, a quarter or less of infAP's
  (pilot; `rescaled` rows). McCarthy & Snowden's with-replacement draws (m_h = (n_h - 1) /
  (1 - f_h)) have the same linear variance and let a replicate drop a pair, as another sample
  could: 52-91% of the spread, mostly 65-80% (pilot), and higher coverage than `rescaled` in every
  row of the ratio estimates; the default. Plain within-stratum resampling (`naive`, no finite-
  population or small-stratum correction) covered infDCG@10 in 46% / 89% of the draws at 10% /
  20% (pilot).
- Interval (a). Percentile first; then basic (reflected about the estimate), which corrects for
  the bias the replicates show (the with-replacement replicates show 40-75% of it, pilot): basic
  covers 0.10-0.75 where percentile covers 0.00-0.80; the default.
- Allocation (pilot, infNDCG@10 bias at 10 / 20 / 30%): proportional 1:1:1, |bias| 0.14 / 0.13 /
  0.11; 4:1:1 -0.12 / -0.04 / +0.013; 8:2:1 (default) -0.11 / +0.002 / +0.020; the issue's strata
  [1-3], [4-10], proportional: |bias| 0.45 / 0.37 / 0.25. At least 2 pairs per stratum (no
  collapsed strata; 4:1:1, `rescaled`) spent 16% of the frame at the 10% rate and still covered
  35% (nDCG) / 12% (AP).
- infAP. trec_eval's prior for a stratum with no sampled document above a rank (eps / 2 eps =
  1/2) overstated AP (a deep stratum is 2% relevant); the stratum's own sample rate is the
  default (`empty_stratum`).
- Ideal DCG. `ideal="ranks"` (each judged document at the mean discount of its grade's ranks,
  the other documents' counts estimated given it was drawn; unbiased for a lone relevant pair of a
  stratum) halves the positive bias (pilot: +0.009 instead of +0.020 at 30%, +0.003 instead of
  +0.008 at 50%, +0.005 instead of +0.008 in `pool3` at 10%) but doubles the negative one at 10%
  (-0.22 instead of -0.10): kept as an option.
- Simulated intervals: a pseudo-population (unsampled pairs' grades drawn from the per-stratum
  rates of the pooled sample), the design (4:1:1) redrawn 40 times, the estimator's error simulated. The
  spread came out right (0.034 against 0.037), the bias did not (the queries' own structure is
  lost): 62% / 37% coverage over 4 seeds at 20%; not kept.

## For use

Judge the top stratum completely: an existing shallow pool, or a rate at which the default
allocation reaches it (here 20%, 7 pairs per query). Prefer paired differences to absolute
values; read interval (a) as the sampling noise around an estimate whose bias can be as large
(the rows above give its size for a pool like pydocs'). The unjudged share and infDCG are safe
to read with their intervals.
"""


# --------------------------------------------------------------------------- data


def load() -> dict[str, Any]:
    """The grid's runs (dev queries), the v3 judgments of the dev queries and the project's contract."""
    lineage = json.loads(LINEAGE.read_text())
    archive = Archive(ARCHIVE)
    index = archive.index()
    history = pl.read_parquet(HISTORY)
    queries = pl.read_ndjson(QUERIES).filter(pl.col("split") == "dev")
    dev = sorted(queries["query_id"].cast(pl.String).to_list())
    runs = {}
    for config_id in sorted(lineage):
        run_sha = lineage[config_id]["run_sha256"]
        entry = index.filter((pl.col("run_sha256") == run_sha) & (pl.col("config_id") == config_id))
        if entry.height == 0:
            raise SystemExit(f"{config_id}: run {run_sha[:12]} is not in the archive")
        versions = history.filter(pl.col("run_sha256") == run_sha)["judgments_version"].unique().to_list()
        if versions and "v3" not in versions:
            raise SystemExit(f"{config_id}: run {run_sha[:12]} was scored under {versions}, not v3")
        run = archive.read_documents(entry["docs_sha256"][0])  # checked against its sha256
        runs[config_id] = run.filter(pl.col("query_id").is_in(dev))
    if BASELINE not in runs:
        raise SystemExit(f"the baseline {BASELINE} is not in the grid")
    qrels = read_judgments(JUDGMENTS).filter(pl.col("query_id").is_in(dev))
    return {"runs": runs, "dev": dev, "qrels": qrels, "contract": project_terms(ROOT / "params.yaml").contract}


def truth_table(qrels: pl.DataFrame, runs: dict[str, pl.DataFrame], dev: list[str], contract) -> dict[str, np.ndarray]:
    """Per query (sorted dev ids) x configuration: releval's value of each truth metric."""
    out = {name: np.zeros((len(dev), len(runs))) for name in METRICS.values()}
    for c, run in enumerate(runs.values()):
        evaluation = evaluate(qrels, run, list(METRICS.values()), contract)
        per_query = evaluation.per_query.sort("query_id")
        if per_query["query_id"].to_list() != dev:
            raise SystemExit("every dev query must be evaluated (each has a relevant document under v3)")
        for name in out:
            out[name][:, c] = per_query[name].to_numpy()
    return out


def pairs_table(pairs: set[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame(sorted(pairs), schema={"query_id": pl.String, "doc_id": pl.String}, orient="row")


def top_pairs(ranked: inferred.RankedRuns, dev: list[str], depth: int) -> set[tuple[str, str]]:
    return {
        (q, doc)
        for q in dev
        for c in range(len(ranked.configurations))
        for doc in ranked.ranking(q, c)[:depth].tolist()
    }


# --------------------------------------------------------------------------- one design


def run_design(
    name: str, data: dict[str, Any], ranked: inferred.RankedRuns, rates: list[float], methods: list[str], args
) -> dict[str, Any]:
    qrels, dev, contract = data["qrels"], data["dev"], data["contract"]
    names = ranked.configurations
    base = names.index(BASELINE)
    certain = qrels.head(0)
    if name == "pool3":
        certain = qrels.join(pairs_table(top_pairs(ranked, dev, POOL_DEPTH)), on=["query_id", "doc_id"])
    frame = inferred.sampling_frame(ranked, K, judged=certain, query_ids=dev)
    frame_pairs = pairs_table({(q.query_id, d) for q in frame.queries for d in q.doc_ids})
    truth = truth_table(qrels, data["runs"], dev, contract)
    frame_qrels = pl.concat([qrels.join(frame_pairs, on=["query_id", "doc_id"]), certain])
    frame_truth = truth_table(frame_qrels, data["runs"], dev, contract)
    full = inferred.draw_sample(frame, 1.0, seed=0)
    complete = inferred.infer(full, frame_qrels, ranked, ["infndcg@10"], contract, n_resamples=1)
    true_share = complete.relevant_share
    out: dict[str, Any] = {
        "design": name,
        "frame_pairs": frame.size,
        "certain_pairs": certain.height,
        "frame_per_query": frame.size / len(dev),
        "truth_means": {m: dict(zip(names, truth[t].mean(axis=0).tolist())) for m, t in METRICS.items()},
        "frame_truth_gap": {
            m: float(np.max(np.abs(truth[t].mean(axis=0) - frame_truth[t].mean(axis=0)))) for m, t in METRICS.items()
        },
        "runs": [],
    }
    for rate in rates:
        for method in methods:
            started = time.perf_counter()
            record = one_setting(
                frame, certain, qrels, ranked, contract, truth, frame_truth, true_share, base, rate, method, args
            )
            record.update(design=name, rate=rate, method=method, wall_s=time.perf_counter() - started)
            out["runs"].append(record)
            print(summary_line(record), flush=True)
    return out


def one_setting(frame, certain, qrels, ranked, contract, truth, frame_truth, true_share, base, rate, method, args):
    names = ranked.configurations
    n_configs, seeds = len(names), args.seeds
    est = {m: np.zeros((seeds, n_configs)) for m in METRICS}
    low = {m: np.zeros((seeds, n_configs)) for m in METRICS}
    high = {m: np.zeros((seeds, n_configs)) for m in METRICS}
    share = np.zeros((3, seeds, n_configs))
    diff = {m: np.zeros((seeds, n_configs)) for m in COMPARED}
    paired = {(m, p): np.zeros((2, seeds, n_configs)) for m in COMPARED for p in PAIRED}
    sizes, times = np.zeros(seeds), np.zeros(seeds)
    for seed in range(seeds):
        design = inferred.draw_sample(frame, rate, seed)
        judged = pl.concat(
            [qrels.join(design.sampled_pairs().select("query_id", "doc_id"), on=["query_id", "doc_id"]), certain]
        )
        started = time.perf_counter()
        result = inferred.infer(
            design, judged, ranked, list(METRICS), contract, baseline=BASELINE, n_resamples=args.resamples,
            seed=seed, method=method, interval="basic",
        )  # fmt: skip
        times[seed] = time.perf_counter() - started
        sizes[seed] = design.sample_size
        for m in METRICS:
            est[m][seed], low[m][seed], high[m][seed] = result.mean[m], result.low[m], result.high[m]
        share[:, seed] = result.relevant_share, result.share_low, result.share_high
        for comparison in result.comparisons:
            if comparison.metric not in COMPARED:
                continue
            c = names.index(comparison.candidate)
            diff[comparison.metric][seed, c] = comparison.mean_difference
            for p, interval in zip(PAIRED, ("query_interval", "two_level_interval", "judgment_interval")):
                paired[comparison.metric, p][:, seed, c] = getattr(comparison, interval)
    record: dict[str, Any] = {
        "seeds": seeds,
        "resamples": args.resamples,
        "sample_pairs": float(sizes.mean()),
        "sample_per_query": float(sizes.mean()) / len(frame.queries),
        "seconds_per_draw": float(times.mean()),
        "metrics": {},
        "comparisons": {},
    }
    for m, t in METRICS.items():
        true_mean, frame_mean = truth[t].mean(axis=0), frame_truth[t].mean(axis=0)
        # The basic interval reflects the percentile one about the estimate: either gives the other.
        pct_low, pct_high = 2 * est[m] - high[m], 2 * est[m] - low[m]
        record["metrics"][m] = {
            **error_summary(est[m], true_mean),
            "coverage_basic": coverage_summary(low[m], high[m], true_mean),
            "coverage_percentile": coverage_summary(pct_low, pct_high, true_mean),
            "coverage_basic_frame_truth": coverage_summary(low[m], high[m], frame_mean),
            "mean_width": float(np.mean(high[m] - low[m])),
            "per_config": {
                name: {
                    "truth": float(true_mean[c]),
                    "bias": float(est[m][:, c].mean() - true_mean[c]),
                    "rmse": float(np.sqrt(np.mean((est[m][:, c] - true_mean[c]) ** 2))),
                    "coverage_basic": float(np.mean((low[m][:, c] <= true_mean[c]) & (true_mean[c] <= high[m][:, c]))),
                }
                for c, name in enumerate(names)
            },
        }
    record["metrics"]["relevant_share"] = {
        **error_summary(share[0], true_share),
        "coverage_percentile": coverage_summary(share[1], share[2], true_share),
    }
    for m in COMPARED:
        t = METRICS[m]
        true_diff = truth[t].mean(axis=0) - truth[t].mean(axis=0)[base]
        per_query_diff = truth[t] - truth[t][:, [base]]
        others = [c for c in range(n_configs) if c != base]
        # Spread a query-resampled interval should have: the queries' spread under full judgments
        # plus the sampling spread of the estimated mean difference over the draws.
        ideal_sd = np.sqrt(per_query_diff.var(axis=0, ddof=1) / len(frame.queries) + diff[m].var(axis=0, ddof=1))
        record["comparisons"][m] = {
            **error_summary(diff[m][:, others], true_diff[others]),
            **{
                f"coverage_{p}": coverage_summary(
                    paired[m, p][0][:, others], paired[m, p][1][:, others], true_diff[others]
                )
                for p in PAIRED
            },
            **{
                f"width_ratio_{p}": float(
                    np.mean((paired[m, p][1] - paired[m, p][0]).mean(axis=0)[others] / (2 * 1.96 * ideal_sd[others]))
                )
                for p in ("queries", "two-level")
            },
        }
    return record


def error_summary(estimates: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Over configurations: bias (mean over draws of estimate - truth) and RMSE."""
    bias = estimates.mean(axis=0) - truth
    rmse = np.sqrt(np.mean((estimates - truth) ** 2, axis=0))
    return {
        "mean_bias": float(bias.mean()),
        "mean_abs_bias": float(np.abs(bias).mean()),
        "max_abs_bias": float(np.abs(bias).max()),
        "mean_rmse": float(rmse.mean()),
        "max_rmse": float(rmse.max()),
        "mean_sd": float(estimates.std(axis=0, ddof=1).mean()),
    }


def coverage_summary(low: np.ndarray, high: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    covered = ((low <= truth) & (truth <= high)).mean(axis=0)
    return {"mean": float(covered.mean()), "min": float(covered.min())}


def summary_line(record: dict[str, Any]) -> str:
    parts = [
        f"{record['design']} {record['rate']:.0%} {record['method']}: {record['sample_per_query']:.1f} pairs/query"
    ]
    for m in RATIO_METRICS:
        r = record["metrics"][m]
        parts.append(
            f"{m} bias {r['mean_bias']:+.4f} (max |{r['max_abs_bias']:.4f}|) rmse {r['mean_rmse']:.4f} "
            f"cover {r['coverage_basic']['mean']:.2f}/{r['coverage_percentile']['mean']:.2f}"
        )
    parts.append(f"{record['seconds_per_draw']:.2f} s/draw")
    return " | ".join(parts)


# --------------------------------------------------------------------------- report


def markdown(document: dict[str, Any]) -> str:
    machine = document["machine"]
    lines = [
        "# Sampled judging: inferred metrics against full judgments (pydocs v3)",
        "",
        f"`{document['command']}`, {document['date']} at {document['revision']}, on {machine['cpu']} "
        f"({machine['usable_cores']} usable cores, load {machine['load_1min']}); numpy's BLAS on one thread. "
        f"Total {document['wall_s'] / 60:.1f} min.",
        "",
        f"Data: the {document['configurations']} configurations of the current grid (runs from data/archive, "
        f"per reports/lineage.json), the {document['queries']} dev queries, judgments v3 (complete at depth 10 for "
        "every configuration). Truth: releval's ndcg@10, map and dcg@10 under the full v3 judgments, the contract "
        "of params.yaml (exponential gain, ties by doc_id). Frame: the union of the configurations' top-10 pairs, "
        "strata by best rank [1], [2-3], [4-10], default allocation (weights 8:2:1, at least one pair per "
        f"non-empty cell). {document['seeds']} seeds per row, {document['resamples']} judgment-bootstrap replicates "
        "per interval, 95% intervals.",
        "",
    ]
    for design in document["designs"]:
        lines += [
            f"## Design `{design['design']}`: {design['frame_pairs']:,} frame pairs "
            f"({design['frame_per_query']:.1f} per query), {design['certain_pairs']:,} certain",
            "",
            "Bias: mean over configurations of (mean over draws of the estimate - truth); |bias| mean and max over "
            "configurations; RMSE mean over configurations; coverage: share of draws whose interval (a) holds the "
            "truth, mean and minimum over configurations, for the basic interval (the default) and the percentile "
            "one.",
            "",
            "| rate | bootstrap | pairs/query | metric | bias | mean abs bias | max abs bias | RMSE | coverage basic "
            "(mean / min) | coverage percentile (mean / min) | s/draw |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for record in design["runs"]:
            for m in (*RATIO_METRICS, "infdcg@10", "relevant_share"):
                r = record["metrics"][m]
                basic = r.get("coverage_basic")
                basic_text = f"{basic['mean']:.3f} / {basic['min']:.3f}" if basic else "-"
                pct = r["coverage_percentile"]
                lines.append(
                    f"| {record['rate']:.0%} | {record['method']} | {record['sample_per_query']:.1f} | {m} | "
                    f"{r['mean_bias']:+.4f} | {r['mean_abs_bias']:.4f} | {r['max_abs_bias']:.4f} | "
                    f"{r['mean_rmse']:.4f} | {basic_text} | {pct['mean']:.3f} / {pct['min']:.3f} | "
                    f"{record['seconds_per_draw']:.2f} |"
                )
        lines += [
            "",
            f"Paired comparisons with {BASELINE} (23 per draw): bias of the estimated mean difference against the "
            "true one (full judgments, same queries), and the share of draws whose interval holds it: (b) queries "
            "resampled over the per-query estimates (the verdict's interval), two-level (judgments resampled too), "
            "judgments only (queries fixed). Width ratio: the interval's width over the width a normal interval "
            "would need with the queries' spread under full judgments plus the estimate's spread over the draws.",
            "",
            "| rate | bootstrap | metric | mean abs bias | max abs bias | RMSE | (b) queries | two-level | judgments "
            "only | width ratio (b) / two-level |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for record in design["runs"]:
            for m in COMPARED:
                r = record["comparisons"][m]
                cov = [f"{r[f'coverage_{p}']['mean']:.3f} / {r[f'coverage_{p}']['min']:.3f}" for p in PAIRED]
                lines.append(
                    f"| {record['rate']:.0%} | {record['method']} | {m} | {r['mean_abs_bias']:.4f} | "
                    f"{r['max_abs_bias']:.4f} | {r['mean_rmse']:.4f} | {' | '.join(cov)} | "
                    f"{r['width_ratio_queries']:.2f} / {r['width_ratio_two-level']:.2f} |"
                )
        gaps = ", ".join(f"{m} {gap:.4f}" for m, gap in design["frame_truth_gap"].items())
        lines += ["", f"Largest |full v3 - frame-only v3| of a configuration's mean: {gaps}.", ""]
    lines += [NOTES, document.get("notes", ""), ""]
    return "\n".join(lines)


def revision() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        return commit.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--rates", default="0.1,0.2,0.3,0.5")
    parser.add_argument("--designs", default="sample,pool3")
    parser.add_argument("--methods", default="replacement,rescaled")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--notes", type=Path, default=None, help="Markdown appended to the report")
    args = parser.parse_args(argv)
    rates = [float(rate) for rate in args.rates.split(",")]
    started = time.perf_counter()
    data = load()
    ranked = inferred.rank_runs(data["runs"], data["contract"].ties)
    designs = [run_design(name, data, ranked, rates, args.methods.split(","), args) for name in args.designs.split(",")]
    document = {
        "command": "python benchmarks/bench_inferred.py " + " ".join(argv if argv is not None else os.sys.argv[1:]),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "revision": revision(),
        "machine": describe_machine(),
        "configurations": len(ranked.configurations),
        "queries": len(data["dev"]),
        "baseline": BASELINE,
        "seeds": args.seeds,
        "resamples": args.resamples,
        "designs": designs,
        "wall_s": time.perf_counter() - started,
        "notes": args.notes.read_text() if args.notes else "",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    io.write_text(args.out / "inferred.json", json.dumps(document, indent=1) + "\n")
    io.write_text(args.out / "inferred.md", markdown(document))
    print(f"wrote {args.out / 'inferred.md'} in {document['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
