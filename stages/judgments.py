"""DVC stage `judgments`: the active judgment set → data/work/qrels.parquet, judgments.json, evidence.parquet.

Judged documents that are not in the corpus are an error, unless the dataset is a declared
subset of a larger corpus: then they are dropped, counted and recorded
(:func:`releval.judging.judgments.active_judgments`).

The sealed holdout stays sealed: only the dev queries' judgments (and evidence spans) are written.
The holdout's are read only by `releval holdout` (``--split holdout``), which logs the opening
first. The work is :func:`releval.judging.active.judgments_outputs`, which the audit reruns.
"""

import argparse

import polars as pl

from releval import io, paths
from releval.measurement import holdout
from releval.config import load_params, section
from releval.judging.active import judgments_outputs
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", default=paths.DOCS)
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--out", default=paths.QRELS)
    parser.add_argument("--meta", default=paths.JUDGMENTS_META)
    parser.add_argument("--evidence", default=paths.EVIDENCE)
    holdout.add_split_argument(parser)
    args = parser.parse_args()
    params = load_params()
    dataset, judgments = section(params, "dataset"), section(params, "judgments")
    out = judgments_outputs(
        judgments,
        dataset.get("subset") or {},
        pl.read_parquet(args.docs, columns=["doc_id", "text"]),
        pl.read_parquet(args.queries),
        split=args.split,
        rel_threshold=int(section(params, "metric.rel_threshold")),
        queries_source=args.queries,
    )
    if dropped := out.meta["counts"]["dropped_outside_corpus_subset"]:
        warn(f"judgments: dropped {dropped} judgments of documents outside the corpus subset")
    io.write_parquet(args.out, out.qrels)
    io.write_json(args.meta, out.meta)
    io.write_parquet(args.evidence, out.spans)
    spans = f", {out.spans.height} evidence spans" if out.spans.height else ""
    print(f"judgments {judgments['version']}: {out.qrels.height} judgments{spans}")


if __name__ == "__main__":
    entry(main)
