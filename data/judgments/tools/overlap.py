"""Query-document word overlap of a query set, per slice (releval.judging.overlap).

Usage: python data/judgments/tools/overlap.py [JUDGMENT_SET] [QUERIES] [CORPUS]
(defaults: data/judgments/v3, data/pydocs/v3/queries.jsonl, data/pydocs/v3/corpus.jsonl.gz)
"""

import sys

from releval.inputs.corpus import read_corpus
from releval.inputs.schemas import load_queries
from releval.judging.judgments import load_version
from releval.judging.overlap import overlap_markdown, query_overlaps

SLICES = ("navigational", "paraphrase", "howto", "hard", "tail")
DEFAULTS = ["data/judgments/v3", "data/pydocs/v3/queries.jsonl", "data/pydocs/v3/corpus.jsonl.gz"]


def main(argv: list[str]) -> None:
    judgment_set, queries_path, corpus_path = (argv + DEFAULTS[len(argv) :])[:3]
    docs = read_corpus(corpus_path, "jsonl")
    texts = {d: f"{t} {x}" for d, t, x in docs.select("doc_id", "title", "text").iter_rows()}
    rows = query_overlaps(load_queries(queries_path), load_version(judgment_set).qrels(), texts, SLICES)
    sys.stdout.write(overlap_markdown(rows, SLICES))


if __name__ == "__main__":
    main(sys.argv[1:])
