"""How data/judgments/v3 was made (kept for the record): judgments of corpus edition v3.

Corpus v3 (data/pydocs/v3) has whole pages, 109 documents; queries data/pydocs/v3/queries.jsonl
(113: 65 of v2's 76 kept word for word, 48 new q201-q248 written from the corpus alone).

1. Carried over from v2, unchanged: every row of a kept query on a document whose title and
   text are byte-identical in v2 and v3. A document that was cut in v2 is a different text now
   and is judged again. One exception: (q025, topic:truth), regraded 3 -> 2 in v2 after v1
   scores existed, takes its v1 rows and goes to blind adjudication against the v2 regrade.
2. The pool: every pair in the top 10 documents of every configuration of the default grid
   (24 configurations, all 113 queries, dev and holdout) plus the documents the query writer
   listed as expected for the new queries, less the carried pairs (`releval pool --missing`
   gives the grid part). The pipeline retrieves dev queries only; the holdout queries' runs were
   made in a scratch copy of the project with every query labelled dev, by the retrieval stages
   alone (no score stage ran: no holdout score was computed or seen), and deleted afterwards.
   Judged document by document: a judge reads the whole page once and grades every pooled query
   for it against RUBRIC.md, shown query texts and the page only
   (ids sorted, no system, score or rank), with a one-line reason per grade (annotator
   claude-a; first-pass files out_a_*.jsonl).
3. Double judging: 31 queries (27%, chosen per slice by a hash of the id, half new, half kept)
   had every pooled pair judged again, independently, by a different judge instance than the
   first pass of that document (annotator claude-b; out_b_*.jsonl).
4. Every disagreement was adjudicated blind (the 11 of the new double judging, the v2 regrade
   above, and the one disagreement of v1's double judging carried with its page, q039 on
   topic:atom-literals, which v1 had settled by the lower median): the adjudicator saw the query, the page and the
   two grades with their reasons (unattributed), never a system or score, and chose a grade
   between the two; the row (annotator adjudicator) records the decision and both reasons.
   With three rows the lower-median aggregation yields the adjudicated grade.
Usage: python data/judgments/tools/build_v3.py JUDGE_DIR   (the folder of out_*.jsonl files)
"""

import glob
import gzip
import json
import sys
from pathlib import Path

from releval.judging.judgments import Manifest, judgment_line, load_version, write_version

CONTESTED = {("q025", "topic:truth")}


def _corpus(path: str) -> dict[str, dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return {d["_id"]: d for d in map(json.loads, fh)}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def carried_rows() -> list[dict]:
    old, new = _corpus("data/pydocs/corpus.jsonl.gz"), _corpus("data/pydocs/v3/corpus.jsonl.gz")
    same = {i for i in new if i in old and (old[i]["title"], old[i]["text"]) == (new[i]["title"], new[i]["text"])}
    kept = {q["query_id"] for q in _rows(Path("data/pydocs/v3/queries.jsonl")) if q["query_id"] < "q201"}
    keep = lambda r: r["query_id"] in kept and r["doc_id"] in same  # noqa: E731
    rows = [
        r
        for r in _rows(Path("data/judgments/v2/judgments.jsonl"))
        if keep(r) and (r["query_id"], r["doc_id"]) not in CONTESTED
    ]
    rows += [r for r in _rows(Path("data/judgments/v1/judgments.jsonl")) if (r["query_id"], r["doc_id"]) in CONTESTED]
    return rows


def judged_rows(judge_dir: Path) -> list[dict]:
    rows = []
    for pattern, annotator in (
        ("out_a_*.jsonl", "claude-a"),
        ("out_b_*.jsonl", "claude-b"),
        ("adjudicated*.jsonl", "adjudicator"),
    ):
        for file in sorted(glob.glob(str(judge_dir / pattern))):
            for r in _rows(Path(file)):
                rows.append(
                    {
                        "query_id": r["query_id"],
                        "doc_id": r["doc_id"],
                        "grade": int(r["grade"]),
                        "annotator": annotator,
                        "notes": r.get("note") or r.get("notes"),
                    }
                )
    return rows


def main(judge_dir: str) -> None:
    rows = carried_rows() + judged_rows(Path(judge_dir))
    rows.sort(key=lambda r: (r["query_id"], r["doc_id"], r["annotator"]))
    data = "".join(judgment_line(r) + "\n" for r in rows).encode("utf-8")
    parent = load_version(Path("data/judgments/v2")).manifest
    manifest = Manifest(
        version="v3",
        parent=None,
        date="2026-12-01",
        scale=parent.scale,
        rubric=parent.rubric,
        annotators=("adjudicator", "claude-a", "claude-b"),
        judgments_sha256="",
        description=(
            "corpus edition v3 (whole pages), 113 queries; pooled at depth 10 from all 24 default "
            "configurations plus the query writer's expected documents; judges are LLM agents (Claude) "
            "reading each whole page against RUBRIC.md, shown no system, score or rank; rows of v2 kept "
            "for unchanged pages; 31 queries double-judged (claude-b), disagreements adjudicated blind "
            "(adjudicator); parent null: a different corpus (see data/judgments/tools/build_v3.py)"
        ),
    )
    sealed = write_version(Path("data/judgments/v3"), manifest, data)
    print(f"v3: {len(rows)} judgments, sha256 {sealed.judgments_sha256[:12]}")


if __name__ == "__main__":
    main(sys.argv[1])
