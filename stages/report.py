"""DVC stage `report`: the evaluation card, observations, plots and a readable report of the grid.

Reads reports/metrics.json, per_query.parquet and lineage.json (written by `score`), params.yaml,
data/work/* (documents, queries, judgments, runs, chunks) and the holdout access log; writes

* reports/card.json          the evaluation card (releval.provenance.card), validated
* reports/observations.json  one observation per configuration under that card, validated
* reports/report.md          a conclusion (best, indistinguishable set, resampling wins, what
                             would settle it), grid, comparisons against grid.baseline (one
                             verdict each), relevance-threshold check, slices, worst queries,
                             the card, coverage and truncation warnings
* reports/report.html        the same report as one offline page: the plots embedded, a verdict table,
                             the per-query view (the queries where two configurations differ most)
* reports/plots/*.json       DVC plot data (see the `plots:` section of dvc.yaml)
* reports/plots/*.png        the plots as images

Every output goes through releval.io's atomic writers.
"""

import argparse
from pathlib import Path

from releval import io, paths
from releval.config import load_params
from releval.reporting.evaluation_report import build_report, read_inputs
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reports", default=paths.REPORTS)
    parser.add_argument("--work", default=paths.WORK)
    parser.add_argument("--holdout-log", default=paths.HOLDOUT_LOG)
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of the queries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worst", type=int, default=10, help="how many worst queries to list")
    args = parser.parse_args()
    reports = Path(args.reports)
    params = load_params()
    inputs = read_inputs(reports, Path(args.work), args.holdout_log)
    report = build_report(inputs, params, resamples=args.resamples, seed=args.seed, worst=args.worst)
    plots_dir = paths.rebase(paths.PLOTS, paths.REPORTS, reports)
    for name, rows in report.plot_tables.items():
        io.write_json(plots_dir / f"{name}.json", rows)
        io.write_bytes(plots_dir / f"{name}.png", report.images[name])
    io.write_json(paths.rebase(paths.CARD, paths.REPORTS, reports), report.card)
    io.write_json(paths.rebase(paths.OBSERVATIONS, paths.REPORTS, reports), report.observations)
    io.write_text(paths.rebase(paths.REPORT_MD, paths.REPORTS, reports), report.markdown)
    io.write_text(paths.rebase(paths.REPORT_HTML, paths.REPORTS, reports), report.page)
    # The score and encode stages already warned about these; report.md lists them.
    print(
        f"report: card {report.card['card_id']}, {len(report.observations['observations'])} observations, "
        f"baseline {report.baseline}, {len(report.plot_tables)} plots, {len(report.warnings)} warning(s) in report.md"
    )


if __name__ == "__main__":
    entry(main)
