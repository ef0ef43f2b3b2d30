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

The reading is :mod:`releval.measurement.comparisons`; the statistics and texts are
:mod:`releval.measurement.compare`.
"""

from __future__ import annotations

import argparse
import json

from releval import config
from releval.errors import InputError
from releval.measurement import compare, comparisons


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "baseline_ref", nargs="?", metavar="BASELINE", help="configuration id, run file, or REV:config_id"
    )
    parser.add_argument(
        "candidate_ref", nargs="?", metavar="CANDIDATE", help="configuration id, run file, or REV:config_id"
    )
    comparisons.add_source_arguments(parser)
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
    sources = comparisons.Sources.from_args(args)
    if args.grid:
        if args.candidate_ref is not None:
            raise InputError("--grid takes no CANDIDATE; use --baseline ID", field="CANDIDATE")
        grid = comparisons.grid_report(
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
            print(json.dumps(compare.grid_to_dict(grid), indent=2, allow_nan=False))
        else:
            print(compare.render_grid(grid))
        return 0
    if args.baseline_ref is None or args.candidate_ref is None:
        raise InputError("give BASELINE and CANDIDATE, or --grid", field="arguments")
    report = comparisons.pair_report(
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
        print(json.dumps(compare.pair_to_dict(report), indent=2, allow_nan=False))
    else:
        print(compare.render_pair(report))
    return 0
