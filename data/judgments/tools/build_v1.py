"""How data/judgments/v1 was assembled from the filled annotation pools (kept for the record).

Pool: union of the top-10 documents of bm25/c256, minilm/c256 and e5small/c256 for the 64 v1
queries (`releval pool --depth 10`), 1,302 pairs, shown to judges sorted by query and doc_id
with no scores or ranks. claude-a judged every pair; claude-b independently judged 20 queries
(every third query, q003..q060). Usage: python data/judgments/tools/build_v1.py FILLED.csv...
"""

import csv
import sys
from pathlib import Path

from releval.judgments import Manifest, judgment_line, write_version

SCALE = {0: "not useful", 1: "on topic, points the way", 2: "substantial part of the answer", 3: "answers the query"}


def main(paths: list[str]) -> None:
    rows = []
    for path in paths:
        with open(path, newline="", encoding="utf-8") as fh:
            rows += [r for r in csv.DictReader(fh) if r["grade"].strip()]
    rows.sort(key=lambda r: (r["query_id"], r["doc_id"], r["annotator"]))
    data = "".join(judgment_line({**r, "grade": int(r["grade"])}) + "\n" for r in rows).encode("utf-8")
    manifest = Manifest(
        version="v1",
        parent=None,
        date="2026-11-30",
        scale=SCALE,
        rubric="../RUBRIC.md",
        annotators=("claude-a", "claude-b"),
        judgments_sha256="",
        description="pooled at depth 10 from bm25/c256, minilm/c256, e5small/c256; "
        "judges are LLM agents (Claude) reading each full document against "
        "RUBRIC.md, shown no system scores or ranks; claude-b double-judged "
        "20 queries for agreement",
    )
    sealed = write_version(Path("data/judgments/v1"), manifest, data)
    print(f"v1: {len(rows)} judgments, sha256 {sealed.judgments_sha256[:12]}")


if __name__ == "__main__":
    main(sys.argv[1:])
