"""`releval score`: score a run against judgments; the contract is printed with the numbers."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from releval import io
from releval.errors import InputError
from releval.measurement.metrics import (
    GAINS,
    MISSING_IN_RUN_POLICIES,
    NO_RELEVANT_POLICIES,
    TIE_RULES,
    Contract,
    evaluate,
    parse_metrics,
)
from releval.inputs.trec import FORMATS, read_qrels_checked, read_run_checked
from releval.measurement.evaluation_text import evaluation_json, evaluation_tsv

DEFAULT_METRICS = "ndcg@10,recall@20,recall@100,map,mrr@10,p@10,bpref,judged@10"
_CONTRACT_OPTIONS = {
    "gain": "--gain",
    "ties": "--ties",
    "rel_threshold": "--rel-threshold",
    "no_relevant": "--no-relevant",
    "missing_in_run": "--missing-in-run",
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--qrels", required=True, help="judgments: TREC qrels, JSONL or parquet")
    parser.add_argument("--run", required=True, help="run: TREC run, JSONL or parquet")
    parser.add_argument("--qrels-format", choices=FORMATS, help="default: from the file extension")
    parser.add_argument("--run-format", choices=FORMATS, help="default: from the file extension")
    parser.add_argument(
        "--metrics",
        default=DEFAULT_METRICS,
        help=f"comma-separated, e.g. ndcg@10,recall@100,map (default: {DEFAULT_METRICS})",
    )
    parser.add_argument("--gain", choices=GAINS, help="nDCG gain: 2^grade-1 (default) or the grade")
    parser.add_argument("--ties", choices=TIE_RULES, help="order of equal scores (default: docid-asc)")
    parser.add_argument("--rel-threshold", type=int, help="lowest grade that counts as relevant (default: 1)")
    parser.add_argument(
        "--no-relevant",
        choices=NO_RELEVANT_POLICIES,
        help="queries without a relevant judgment: left out of the mean (default) or scored 0",
    )
    parser.add_argument(
        "--missing-in-run",
        choices=MISSING_IN_RUN_POLICIES,
        help="judged queries the run lacks: scored 0 (default) or left out",
    )
    parser.add_argument(
        "--trec-eval-compat",
        action="store_true",
        help="trec_eval's conventions: linear gain, trec_eval ties, its query set",
    )
    parser.add_argument("--per-query", action="store_true", help="also print every query's values")
    parser.add_argument("--format", choices=("json", "tsv"), default="json")
    parser.add_argument("--output", help="write here (atomically) instead of standard output")


def run(args: argparse.Namespace) -> int:
    contract = contract_from_args(args)
    metrics = parse_metrics(name for name in args.metrics.split(",") if name.strip())
    qrels = read_qrels_checked(args.qrels, args.qrels_format)
    run_table = read_run_checked(args.run, args.run_format)
    evaluation = evaluate(qrels, run_table, metrics, contract, qrels_source=args.qrels, run_source=args.run)
    render = evaluation_json if args.format == "json" else evaluation_tsv
    text = render(evaluation, args.per_query)
    if args.output:
        io.write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def contract_from_args(args: argparse.Namespace) -> Contract:
    """The options given, over trec_eval's conventions with --trec-eval-compat, else releval's defaults."""
    base = Contract.trec_eval() if args.trec_eval_compat else Contract()
    given = {term: getattr(args, term) for term in _CONTRACT_OPTIONS if getattr(args, term) is not None}
    if args.trec_eval_compat:
        for term, value in given.items():
            if value != getattr(base, term):
                raise InputError(
                    f"{value!r} contradicts --trec-eval-compat, which uses {getattr(base, term)!r}",
                    file="<command line>",
                    field=_CONTRACT_OPTIONS[term],
                )
    return dataclasses.replace(base, **given)
