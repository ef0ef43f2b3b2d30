"""How data/judgments/v2 was made from v1 (kept for the record): the way real sets grow.

1. A batch of 12 harder queries (q101..q112) was pooled exactly as v1 (depth 10 from
   bm25/c256, minilm/c256, e5small/c256, already-judged pairs left out: 244 pairs) and judged
   by claude-a reading each full document against RUBRIC.md.
2. Four v1 grades were revisited in adjudication, each for a reason stated in REGRADES; every
   annotator's row for the pair takes the adjudicated grade, so the lower-median aggregation
   yields it.
Usage: python data/judgments/tools/build_v2.py FILLED_V2.csv
"""

import csv
import json
import sys
from pathlib import Path

from releval.judgments import Manifest, judgment_line, load_version, write_version

REGRADES = {
    ("q036", "module:secrets"): (
        3,
        "regraded in v2: the page carries the full compare_digest text; "
        "the rubric judges a document on its own, not by which module hosts it",
    ),
    ("q045", "topic:id-classes"): (
        3,
        "regraded in v2: states that __names are private to the class and mangled, which is what the user needs to act",
    ),
    ("q020", "module:shutil"): (
        2,
        "regraded in v2: 'copy' alone most often means copying objects; shutil answers only the file reading",
    ),
    ("q025", "topic:truth"): (2, "regraded in v2: one parenthetical line; the user must read around it"),
}


def main(filled_v2: str) -> None:
    v1 = Path("data/judgments/v1")
    rows = [json.loads(line) for line in (v1 / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    for row in rows:
        change = REGRADES.get((row["query_id"], row["doc_id"]))
        if change:
            row["grade"], row["notes"] = change
    with open(filled_v2, newline="", encoding="utf-8") as fh:
        rows += [{**r, "grade": int(r["grade"])} for r in csv.DictReader(fh) if r["grade"].strip()]
    rows.sort(key=lambda r: (r["query_id"], r["doc_id"], r["annotator"]))
    data = "".join(judgment_line(r) + "\n" for r in rows).encode("utf-8")
    parent = load_version(v1).manifest
    manifest = Manifest(
        version="v2",
        parent="v1",
        date="2026-11-30",
        scale=parent.scale,
        rubric=parent.rubric,
        annotators=parent.annotators,
        judgments_sha256="",
        description="v1 + 12 harder queries (q101-q112, pooled and judged as v1) + "
        "4 adjudicated regrades (see data/judgments/tools/build_v2.py)",
    )
    sealed = write_version(Path("data/judgments/v2"), manifest, data)
    print(f"v2: {len(rows)} judgments, sha256 {sealed.judgments_sha256[:12]}")


if __name__ == "__main__":
    main(sys.argv[1])
