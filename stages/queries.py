"""DVC stage `queries`: the query set → data/work/queries.parquet (query_id, text, ...).

Format `releval` is releval's own queries.jsonl (split, slices, must_never_break; validated
with every problem reported); other formats are imported and every query is `dev`.
"""

import argparse

from releval import io, paths
from releval.config import load_params, section
from releval.inputs.corpus import read_queries
from releval.inputs.schemas import load_queries
from releval.errors import InputError
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=paths.QUERIES)
    args = parser.parse_args()
    dataset = section(load_params(), "dataset")
    path, fmt = dataset["queries"]["path"], dataset["queries"]["format"]
    queries = load_queries(path) if fmt == "releval" else read_queries(path, fmt)
    limit = dataset.get("subset", {}).get("queries")
    if limit is not None:
        queries = queries.head(int(limit))
    if queries.height == 0:
        raise InputError("the query set is empty", file=dataset["queries"]["path"])
    io.write_parquet(args.out, queries)
    print(f"queries: {queries.height} queries from {dataset['queries']['path']}")


if __name__ == "__main__":
    entry(main)
