"""`releval compare`: paired comparison of two configurations, or of every one in the grid.

    releval compare BASELINE CANDIDATE [--metric ndcg@10] [--secondary recall@100,hit@10]
                    [--slice NAME] [--reports reports] [--json] [--resamples 10000] [--seed 0]
    releval compare --grid [--baseline ID] [--thresholds 1,2,3] [--json]

BASELINE and CANDIDATE each name scores in one of three ways, tried in this order:

* a path to a run file (a TREC run, JSONL, a releval run.parquet, or a run folder holding one):
  it is collapsed to documents and scored with the metric engine against ``--qrels`` (default
  data/work/qrels.parquet; TREC qrels, JSONL or parquet, read as `releval score` reads them),
  under the contract in reports/metrics.json;
* a configuration id in reports/per_query.parquet, e.g. ``minilm/c256``;
* ``REV:config_id`` with REV a git revision, e.g. ``HEAD~1:minilm/c256`` or
  ``origin/main:minilm/c256``: reports/per_query.parquet and reports/metrics.json are read at
  that revision with ``git show`` (they are committed to git), so comparisons across commits
  work in any clone.

The two must share their contract and their query set; otherwise the command refuses and names
the difference (exit 2).

The verdict is releval's one decision rule (:func:`releval.measurement.stats.decide`): the paired
bootstrap p-value, Holm-adjusted over the comparisons printed together (the grid's
configurations; the secondary metrics; the slices), below 0.05, read by the sign of the
difference. A slice of fewer than 10 queries gets its numbers but no verdict. Line 6 gives the
SD of the per-query differences and the `releval power` figure for the observed difference
(``power`` in --json).

Judging coverage overrides the verdict. Unjudged documents count as grade 0, so a side that
retrieves documents nobody judged scores lower for being different. When the contract lists a
judged@k (k: the primary metric's cutoff, judged@10 for ndcg@10), line 7 gives both sides'
judged@k against the contract's coverage terms (params.yaml ``metric.coverage``: ``min_judged``
0.9, ``max_judged_gap`` 0.05; ``--min-judged``/``--max-judged-gap`` replace them for one
command): when either side is below min_judged or the two differ by more than max_judged_gap,
the verdict is ``coverage-confounded``, not improvement/regression/inconclusive, in the pair,
its secondaries and the grid alike (a slice is read on its own queries). Line 7 (and the grid's
coverage notes) also give the condensed-list value of the metric, ``ndcg@10'``: the metric
computed on the ranking with its unjudged documents removed (Sakai, "Alternatives to Bpref",
SIGIR 2007), and bpref, and say when either favours another side than the standard value. The
judging debt is listed by `releval pool --missing`.

The reading is :mod:`releval.measurement.sides`; the statistics are :mod:`releval.measurement.pair`
and :mod:`releval.measurement.grid`; the texts are :mod:`releval.reporting.pair_text` and
:mod:`releval.reporting.grid_text`.
"""

from __future__ import annotations

import argparse
import json

from releval import config, paths
from releval.errors import InputError
from releval.inputs import trec
from releval.measurement import sides
from releval.reporting.grid_text import grid_to_dict, render_grid
from releval.reporting.pair_text import pair_to_dict, render_pair


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """Options `releval compare` and `releval gate` share: where scores, runs, qrels and queries live."""
    parser.add_argument(
        "--metric", default=None, help="metric to decide on (default: the contract's primary, e.g. ndcg@10)"
    )
    parser.add_argument(
        "--secondary",
        default=None,
        help="comma-separated secondary metrics, each with its own interval (default: recall@100,hit@10 where scored)",
    )
    parser.add_argument(
        "--reports",
        default=paths.REPORTS,
        help=f"folder with metrics.json and per_query.parquet (default: {paths.REPORTS})",
    )
    parser.add_argument(
        "--qrels", default=paths.QRELS, help="judgments that run files are scored against: TREC qrels, JSONL or parquet"
    )
    parser.add_argument("--qrels-format", choices=trec.FORMATS, help="default: from the file extension")
    parser.add_argument(
        "--run-format", choices=trec.FORMATS, help="format of run-file references (default: from the file extension)"
    )
    parser.add_argument(
        "--queries",
        default=paths.QUERIES,
        help="query texts; slices and must_never_break flags when present",
    )
    parser.add_argument(
        "--runs-root", default=paths.RUNS, help="run folders (run.json + run.parquet), found by config_id"
    )
    parser.add_argument(
        "--judgments-meta",
        default=paths.JUDGMENTS_META,
        help="judgment version of the qrels, recorded with a scored run file",
    )
    parser.add_argument(
        "--resamples", type=int, default=10_000, help="paired bootstrap resamples of the queries (default 10000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument(
        "--min-judged",
        type=float,
        default=None,
        metavar="F",
        help="coverage term: each side's judged@k (k: the primary's cutoff) must reach F for a verdict, "
        "else coverage-confounded (default: the baseline contract's metric.coverage.min_judged, 0.9)",
    )
    parser.add_argument(
        "--max-judged-gap",
        type=float,
        default=None,
        metavar="F",
        help="coverage term: the two sides' judged@k may differ by at most F "
        "(default: the contract's metric.coverage.max_judged_gap, 0.05)",
    )


def sources_from_args(args: argparse.Namespace) -> sides.Sources:
    """The sources named by :func:`add_source_arguments`' options."""
    return sides.Sources(
        args.reports,
        args.qrels,
        args.queries,
        args.runs_root,
        args.judgments_meta,
        args.qrels_format,
        args.run_format,
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "baseline_ref", nargs="?", metavar="BASELINE", help="configuration id, run file, or REV:config_id"
    )
    parser.add_argument(
        "candidate_ref", nargs="?", metavar="CANDIDATE", help="configuration id, run file, or REV:config_id"
    )
    add_source_arguments(parser)
    parser.set_defaults(reports=None)  # the active dataset's folder, read from --params
    parser.add_argument("--slice", dest="slice_name", default=None, help="compare only the queries carrying this slice")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    grid = parser.add_argument_group("grid-wide comparison")
    grid.add_argument("--grid", action="store_true", help="every configuration in the reports against one baseline")
    grid.add_argument(
        "--baseline",
        dest="grid_baseline",
        default=None,
        help="grid baseline (default: params.yaml grid.baseline, else the first)",
    )
    grid.add_argument("--params", default="params.yaml")
    grid.add_argument(
        "--thresholds",
        default="1,2,3",
        help="relevance thresholds (grade >= t) to re-score the runs at to see "
        "whether the winner changes; '' skips (default 1,2,3)",
    )
    grid.add_argument(
        "--alpha", type=float, default=0.05, help="family-wise level for 'indistinguishable from the best'"
    )
    grid.add_argument(
        "--spread-width", type=float, default=0.01, help="score-spread flag: all means within this band (default 0.01)"
    )


def run(args: argparse.Namespace) -> int:
    if args.reports is None:
        args.reports = config.reports_folder(args.params)
    sources = sources_from_args(args)
    if args.grid:
        if args.candidate_ref is not None:
            raise InputError("--grid takes no CANDIDATE; use --baseline ID", field="CANDIDATE")
        grid = sides.grid_report(
            sources,
            metric=args.metric,
            baseline=args.grid_baseline if args.grid_baseline is not None else args.baseline_ref,
            params=args.params,
            thresholds=args.thresholds,
            n_resamples=args.resamples,
            seed=args.seed,
            alpha=args.alpha,
            spread_width=args.spread_width,
            min_judged=args.min_judged,
            max_judged_gap=args.max_judged_gap,
        )
        if args.json:
            print(json.dumps(grid_to_dict(grid), indent=2, allow_nan=False))
        else:
            print(render_grid(grid))
        return 0
    if args.baseline_ref is None or args.candidate_ref is None:
        raise InputError("give BASELINE and CANDIDATE, or --grid", field="arguments")
    report = sides.pair_report(
        sources,
        args.baseline_ref,
        args.candidate_ref,
        metric=args.metric,
        secondary=args.secondary,
        slice_name=args.slice_name,
        n_resamples=args.resamples,
        seed=args.seed,
        min_judged=args.min_judged,
        max_judged_gap=args.max_judged_gap,
    )
    if args.json:
        print(json.dumps(pair_to_dict(report), indent=2, allow_nan=False))
    else:
        print(render_pair(report))
    return 0
