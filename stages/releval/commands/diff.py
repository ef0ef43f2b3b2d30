"""`releval diff`: every configuration of two commits, its paired difference with an interval, in one screen.

    releval diff REV [REV] [--metric ndcg@10] [--json] [--resamples 10000] [--seed 0]

A is the first revision, B the second (default: the workspace, as `dvc repro` left it). Each revision's
reports/lineage.json (git show; the reports folder params.yaml names at that revision) names the run each
configuration scored; both runs come from the committed run archive (data/archive, which only grows, so
the workspace's holds every earlier commit's runs) and are scored now, under the current judgments and
contract: data/work/qrels.parquet's dev queries and params.yaml's metric section, the first two lines say
which. Per configuration in both: A's and B's mean, Δ = B - A, the paired bootstrap interval, the queries
B wins, loses and ties, and the verdict, Holm-adjusted over the configurations whose run changed (as
`releval compare --grid` decides; judging coverage overrides a verdict as it does there). A configuration
whose run did not change says "same run", without a test. A run missing from the archive (a commit made
before the archive, or never reproduced here) is named; `releval archive --from-rev REV` brings a commit's
runs back from DVC's cache.

The figures are :mod:`releval.measurement.diff`'s; the text is :mod:`releval.reporting.diff_text`'s.
"""

from __future__ import annotations

import argparse
import json

from releval import config, paths
from releval.errors import InputError
from releval.measurement import diff
from releval.provenance.archive import Archive
from releval.reporting.diff_text import diff_to_dict, render_diff


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("revs", nargs="+", metavar="REV", help="A, and B (default: the workspace): git revisions")
    parser.add_argument("--metric", help="the metric compared (default: params.yaml's metric.primary)")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95, help="interval confidence (default 0.95)")
    parser.add_argument("--archive", default=paths.ARCHIVE, help=f"the run archive (default {paths.ARCHIVE})")
    parser.add_argument("--qrels", default=paths.QRELS, help=f"the current judgments (default {paths.QRELS})")
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--judgments-meta", default=paths.JUDGMENTS_META)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    if len(args.revs) > 2:
        raise InputError(f"one or two revisions, got {len(args.revs)}", file="<command line>", field="REV")
    rev_a, rev_b = args.revs[0], (args.revs[1] if len(args.revs) == 2 else None)
    judgments = diff.current_judgments(
        config.load_params(), qrels=args.qrels, queries=args.queries, judgments_meta=args.judgments_meta
    )
    found = diff.diff_revisions(
        diff.read_revision(".", rev_a),
        diff.read_revision(".", rev_b),
        Archive(args.archive),
        judgments,
        metric=args.metric,
        n_resamples=args.resamples,
        confidence=args.confidence,
        seed=args.seed,
    )
    print(
        json.dumps(diff_to_dict(found), indent=2) if args.json else render_diff(found),
        end="" if not args.json else "\n",
    )
    return 0
