"""`releval gate`: a regression gate for CI.

    releval gate --baseline REF --candidate REF [--metric ndcg@10] [--must-rank 3] [--margin M]

REF is a configuration id, a run file, or ``REV:config_id`` (see `releval compare`).

Exit codes:

* 0: the metric passes (below) and no must-never-break query is broken; it prints why, with
  the paired-bootstrap interval.
* 1: the metric fails, or a must-never-break query (``must_never_break`` true in
  data/work/queries.parquet) has no relevant document in the candidate's top N documents
  (``--must-rank``, default 3). That rule is absolute: it checks the candidate's own ranking,
  not whether the baseline passed. Flagged queries of the sealed holdout split are not checked
  (their judgments stay out of the working files until `releval holdout`); the gate says how many.

The metric fails, without ``--margin``, on a significant regression: the verdict `releval
compare` prints (bootstrap p-value of candidate - baseline below 0.05, negative difference);
an inconclusive difference passes, however large, so a small query set passes almost anything.
With ``--margin M`` the gate is a non-inferiority test: it fails whenever the 95% interval's
lower bound of candidate - baseline is below -M, that is whenever the data cannot rule out a
drop larger than M (for example ``--margin 0.02`` on nDCG@10), so too few queries fail it.
* 2: the two cannot be compared (different contracts or query sets; the message names the
  difference), or an input is missing or bad, or the comparison is coverage-confounded: either
  side's judged@k (k: the primary's cutoff) is below the contract's ``metric.coverage.min_judged``
  (0.9) or the two differ by more than ``max_judged_gap`` (0.05; ``--min-judged`` and
  ``--max-judged-gap`` replace them), so the difference may be the judging's, not the
  retrieval's (unjudged documents count as grade 0). Such a gate neither passes nor fails on
  the metric; it prints "gate: FAIL — coverage-confounded" with the condensed-list value and
  bpref in line 7 of the report, and names `releval pool --missing`, which lists the documents
  to judge. Every failure other than a verdict exits 2, so a 1 always means "the change made
  retrieval worse".

How to use it as a CI step (reports/ is committed to git, so the baseline is read from the
target branch's commit with ``git show``; the candidate is the branch's own reports, produced
by `dvc repro` or pulled with `dvc pull`)::

    # .github/workflows/eval.yml (sketch)
    - run: git fetch origin main            # the baseline revision must be present
    - run: dvc pull || dvc repro            # reports/ and data/work/ for the candidate
    - run: releval gate --baseline origin/main:minilm/c256 --candidate minilm/c256

Use ``fetch-depth: 0`` (or fetch the target branch) in the checkout step so that the revision
resolves. The must-never-break rule needs the candidate's run (data/work/runs) and
data/work/qrels.parquet; without flagged queries it needs neither.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from releval import config
from releval.commands.compare import add_source_arguments, sources_from_args
from releval.errors import InputError
from releval.measurement import sides
from releval.measurement.gate import GATE_INCOMPARABLE, gate_decision
from releval.reporting.gate_text import render_gate
from releval.reporting.pair_text import render_pair


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        dest="baseline_ref",
        required=True,
        metavar="REF",
        help="configuration id, run file, or REV:config_id (e.g. origin/main:minilm/c256)",
    )
    parser.add_argument(
        "--candidate",
        dest="candidate_ref",
        required=True,
        metavar="REF",
        help="configuration id, run file, or REV:config_id",
    )
    parser.add_argument(
        "--must-rank",
        type=int,
        default=3,
        metavar="N",
        help="must-never-break queries need a relevant document in this top N (default 3)",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=None,
        metavar="M",
        help="non-inferiority: fail when the 95%% interval's lower bound of candidate - baseline is below -M "
        "(e.g. 0.02); default: fail only on a significant regression, so an inconclusive drop passes",
    )
    add_source_arguments(parser)
    parser.set_defaults(reports=None)  # the active dataset's folder (params.yaml reports_dir)


def _gate(args: argparse.Namespace) -> int:
    if args.reports is None:
        args.reports = config.reports_folder()
    sources = sources_from_args(args)
    report = sides.pair_report(
        sources,
        args.baseline_ref,
        args.candidate_ref,
        metric=args.metric,
        secondary=args.secondary,
        n_resamples=args.resamples,
        seed=args.seed,
        min_judged=args.min_judged,
        max_judged_gap=args.max_judged_gap,
    )
    broken = sides.broken_must_never_break(sources, report, args.must_rank)
    sealed = sides.sealed_must_never_break(sources)
    result = gate_decision(report, broken, args.must_rank, args.margin, sealed)
    print(render_pair(report))
    print()
    print(render_gate(result))
    return result.code


def run(args: argparse.Namespace) -> int:
    try:
        return _gate(args)
    except InputError as exc:
        print(f"gate: cannot compare — {exc}", file=sys.stderr)
        return GATE_INCOMPARABLE
    except Exception:  # a crash must not read as "regression" (exit 1) in CI
        traceback.print_exc()
        print("gate: cannot compare — unexpected error (above)", file=sys.stderr)
        return GATE_INCOMPARABLE
