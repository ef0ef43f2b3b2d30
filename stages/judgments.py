"""DVC stage `judgments`: the active judgment set → data/work/qrels.parquet + judgments.json.

Judged documents that are not in the corpus are an error, unless the dataset is a declared
subset of a larger corpus: then they are dropped, counted and recorded
(:func:`releval.judging.judgments.active_judgments`).

The sealed holdout stays sealed: only the dev queries' judgments are written. The holdout's are
read only by `releval holdout` (``--split holdout``), which logs the opening first.
"""

import argparse

import polars as pl

from releval import io, paths
from releval.measurement import holdout
from releval.config import load_params, section
from releval.judging.judgments import active_judgments
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", default=paths.DOCS)
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--out", default=paths.QRELS)
    parser.add_argument("--meta", default=paths.JUDGMENTS_META)
    holdout.add_split_argument(parser)
    args = parser.parse_args()
    params = load_params()
    dataset, judgments = section(params, "dataset"), section(params, "judgments")
    subset = dataset.get("subset") or {}
    docs = pl.read_parquet(args.docs, columns=["doc_id", "text"])
    queries = pl.read_parquet(args.queries)
    selected = holdout.select_queries(queries, args.split, source=args.queries)["query_id"]
    active = active_judgments(judgments, subset, docs, queries["query_id"])
    kept = active.qrels.filter(pl.col("query_id").is_in(selected.implode()))
    if dropped := active.dropped_outside_corpus_subset:
        warn(f"judgments: dropped {dropped} judgments of documents outside the corpus subset")
    io.write_parquet(args.out, kept)
    io.write_json(
        args.meta,
        {
            "version": str(judgments["version"]),
            "source": judgments["path"],
            "split": holdout.contract_split(queries, args.split),
            **active.provenance,
            "counts": {
                "judgments": kept.height,
                "queries_judged": kept["query_id"].n_unique(),
                "dropped_outside_corpus_subset": active.dropped_outside_corpus_subset,
                "dropped_outside_query_subset": active.dropped_outside_query_subset,
                "sealed_outside_split": active.qrels.height - kept.height,
                "grades": {str(g): n for g, n in kept.group_by("grade").len().sort("grade").iter_rows()},
            },
        },
    )
    print(f"judgments {judgments['version']}: {kept.height} judgments")


if __name__ == "__main__":
    entry(main)
