"""DVC stage `ingest`: the corpus → data/work/docs.parquet (doc_id, title, text, sha256)."""

import argparse

from releval import io, paths
from releval.config import load_params, section
from releval.inputs.corpus import read_corpus
from releval.errors import InputError
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=paths.DOCS)
    args = parser.parse_args()
    dataset = section(load_params(), "dataset")
    docs = read_corpus(dataset["corpus"]["path"], dataset["corpus"]["format"])
    limit = dataset.get("subset", {}).get("docs")
    if limit is not None:
        docs = docs.head(int(limit))
    if docs.height == 0:
        raise InputError("the corpus is empty", file=dataset["corpus"]["path"])
    io.write_parquet(args.out, docs)
    print(f"ingest: {docs.height} documents from {dataset['corpus']['path']}")


if __name__ == "__main__":
    entry(main)
