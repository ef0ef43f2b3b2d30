"""DVC stage `judgments`: the active judgment set → data/work/qrels.parquet + judgments.json.

Judged documents that are not in the corpus are an error, unless the dataset is a declared
subset of a larger corpus: then they are dropped, counted and recorded (IDCG must only count
documents a system could retrieve).

The sealed holdout stays sealed: only the dev queries' judgments are written. The holdout's are
read only by `releval holdout` (``--split holdout``), which logs the opening first.
"""

import argparse

import polars as pl

from releval import io
from releval.measurement import holdout
from releval.config import load_params, section
from releval.inputs.corpus import read_judgments
from releval.judging.judgments import doc_lengths, load_version
from releval.errors import InputError
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", default="data/work/docs.parquet")
    parser.add_argument("--queries", default="data/work/queries.parquet")
    parser.add_argument("--out", default="data/work/qrels.parquet")
    parser.add_argument("--meta", default="data/work/judgments.json")
    holdout.add_split_argument(parser)
    args = parser.parse_args()
    params = load_params()
    dataset, judgments = section(params, "dataset"), section(params, "judgments")
    subset = dataset.get("subset") or {}
    docs = pl.read_parquet(args.docs, columns=["doc_id", "text"])
    doc_ids = docs["doc_id"]
    queries = pl.read_parquet(args.queries)
    query_ids = queries["query_id"]
    selected = holdout.select_queries(queries, args.split, source=args.queries)["query_id"]
    if judgments["format"] == "releval":
        # A declared subset leaves judged documents/queries outside it: those are dropped and
        # counted below, so only a full dataset checks references (and spans) here.
        full = subset.get("docs") is None and subset.get("queries") is None
        judgment_set = load_version(
            judgments["path"],
            query_ids=query_ids.to_list() if full else None,
            doc_lengths=doc_lengths(docs) if full else None,
        )
        if judgment_set.version != str(judgments["version"]):
            raise InputError(
                f"the set in {judgments['path']} is version {judgment_set.version!r}",
                file="params.yaml",
                field="judgments.version",
            )
        qrels = judgment_set.qrels()
        provenance = _set_provenance(judgment_set)
    else:
        qrels = read_judgments(judgments["path"], judgments["format"])
        provenance = {
            "source_sha256": io.sha256_file(judgments["path"]),
            "scale": {str(k): v for k, v in judgments.get("scale", {}).items()},
        }
    unknown_docs = qrels.filter(~pl.col("doc_id").is_in(doc_ids.implode()))
    if unknown_docs.height and subset.get("docs") is None:
        first = unknown_docs.row(0, named=True)
        raise InputError(
            f"{unknown_docs.height} judgment(s) name documents not in the corpus "
            f"(first: query {first['query_id']}, doc {first['doc_id']})",
            file=judgments["path"],
            field="doc_id",
        )
    outside_queries = qrels.filter(~pl.col("query_id").is_in(query_ids.implode()))
    if outside_queries.height and subset.get("queries") is None:
        first = outside_queries.row(0, named=True)
        raise InputError(
            f"{outside_queries.height} judgment(s) name queries not in the query set "
            f"(first: query {first['query_id']})",
            file=judgments["path"],
            field="query_id",
        )
    known = qrels.filter(pl.col("doc_id").is_in(doc_ids.implode()) & pl.col("query_id").is_in(query_ids.implode()))
    kept = known.filter(pl.col("query_id").is_in(selected.implode()))
    if unknown_docs.height:
        warn(f"judgments: dropped {unknown_docs.height} judgments of documents outside the corpus subset")
    io.write_parquet(args.out, kept)
    io.write_json(
        args.meta,
        {
            "version": str(judgments["version"]),
            "source": judgments["path"],
            "split": holdout.contract_split(queries, args.split),
            **provenance,
            "counts": {
                "judgments": kept.height,
                "queries_judged": kept["query_id"].n_unique(),
                "dropped_outside_corpus_subset": unknown_docs.height,
                "dropped_outside_query_subset": outside_queries.height,
                "sealed_outside_split": known.height - kept.height,
                "grades": {str(g): n for g, n in kept.group_by("grade").len().sort("grade").iter_rows()},
            },
        },
    )
    print(f"judgments {judgments['version']}: {kept.height} judgments")


def _set_provenance(judgment_set) -> dict:
    manifest = judgment_set.manifest
    return {
        "source_sha256": manifest.judgments_sha256,
        "scale": {str(k): v for k, v in manifest.scale.items()},
        "parent": manifest.parent,
        "date": manifest.date,
        "annotators": list(manifest.annotators),
        "rubric": manifest.rubric,
        "rubric_sha256": judgment_set.rubric_sha256,
        "description": manifest.description,
        "aggregation": "lower median of the annotators' grades",
    }


if __name__ == "__main__":
    entry(main)
