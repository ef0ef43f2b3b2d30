"""How data/judgments/v4 was made (kept for the record): v3's grades, plus evidence spans.

v4 revises v3 (same corpus edition, same queries, every grade unchanged: its qrels equal v3's)
and adds **evidence spans**: for every pair graded 2 or 3, and every grade-1 pair where one passage
points the way, the passage(s) of the page that carry what earns the grade, quoted exactly from the
page's text (never its title), by the rule in RUBRIC-v4.md (v3's rubric plus an "Evidence spans"
section, written and committed before any span was marked).

1. The pairs: the 263 pairs of v3 graded >= 1 (118 graded 3, 40 graded 2, 105 graded 1) over 87
   pages, grouped by page and split into six batches of similar text length. Each batch file holds,
   per page, its title and text and, per pooled query, the query text and the pair's settled grade:
   no system, score, rank, chunk or run.
2. First pass: three judge instances (annotators claude-span-a, claude-span-b, claude-span-c, two
   batches each) read every page whole against each of its queries and the rubric only, and wrote
   per pair its spans (quotes, with an occurrence index where a quote repeats; none, written as an
   empty list, for a grade-1 pair where no passage points the way) and a one-line reason; each quote
   was checked to occur in the page's text before it was written (out_batch_*.jsonl).
3. Double judging: 28 of the 113 queries (25%, drawn with random.Random(4)), 55 pairs, were marked
   again, independently, by two other instances (claude-span-d, claude-span-e; out_second_*.jsonl)
   that saw neither the first pass nor each other.
4. Adjudication: the 4 double-judged pairs whose two judges share no character (or one gave none)
   went to a blind adjudicator (span-adjudicator; out_adjudicated.jsonl), who saw the query, the page
   and both judges' spans and reasons (unattributed), never a system, and settled the spans;
   evidence.evidence_spans reads an adjudicator's spans as the pair's and merges the judges'
   overlapping spans otherwise.

Agreement on the 55 double-judged pairs: character-overlap F1 of the two judges' spans 0.910 micro
(0.903 mean per pair) on the 51 pairs both gave spans for; whether a pair gets a span at all,
54 of 55 agree (Cohen's kappa 0.848); 3 pairs shared no character and 1 had spans from one judge
only: those 4 were adjudicated. Result: 370 spans over 247 pairs, every one of the 113 queries
holds evidence (grade 3: 210 spans, 2: 69, 1: 91).

Every span row carries the pair's settled grade: a span does not change a grade (the lower median
of the grades is unchanged by adding copies of it), so v4's qrels are v3's, which this script checks.
Judges' doubts about a grade are in the rows' notes; none was acted on (changing a grade needs a
blind adjudication of the grade, which would be a later version).

Usage: python data/judgments/tools/build_v4.py JUDGE_DIR   (the folder of out_*.jsonl files)
"""

import datetime as dt
import glob
import json
import sys
from pathlib import Path

from releval.judging.judgments import judgment_line, load_version, write_version
from releval.inputs.schemas import evidence_json

PASSES = (
    ("out_batch_1.jsonl", "claude-span-a"),
    ("out_batch_2.jsonl", "claude-span-a"),
    ("out_batch_3.jsonl", "claude-span-b"),
    ("out_batch_4.jsonl", "claude-span-b"),
    ("out_batch_5.jsonl", "claude-span-c"),
    ("out_batch_6.jsonl", "claude-span-c"),
    ("out_second_1.jsonl", "claude-span-d"),
    ("out_second_2.jsonl", "claude-span-e"),
    ("out_adjudicated.jsonl", "span-adjudicator"),
)


def span_rows(judge_dir: Path, grades: dict[tuple[str, str], int]) -> list[dict]:
    rows = []
    for name, annotator in PASSES:
        for line in (judge_dir / name).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            out = json.loads(line)
            pair = (out["query_id"], out["doc_id"])
            if grades.get(pair) != out["grade"]:
                raise SystemExit(f"{name}: {pair} has grade {out['grade']}, v3 settled {grades.get(pair)}")
            # evidence [] records that the judge looked and no passage carries it (grade-1 pairs)
            row = {"query_id": pair[0], "doc_id": pair[1], "grade": out["grade"], "annotator": annotator}
            row["evidence"] = evidence_json(out["evidence"])
            row["notes"] = out["notes"]
            rows.append(row)
    return rows


def main(judge_dir: str) -> None:
    v3 = load_version("data/judgments/v3")
    grades = {(q, d): g for q, d, g in v3.qrels().select("query_id", "doc_id", "grade").iter_rows()}
    added = span_rows(Path(judge_dir), grades)
    base = Path("data/judgments/v3/judgments.jsonl").read_bytes()
    text = base + "".join(judgment_line(r) + "\n" for r in added).encode("utf-8")
    annotators = list(v3.manifest.annotators) + sorted({r["annotator"] for r in added} - set(v3.manifest.annotators))
    manifest = v3.manifest.__class__(
        version="v4",
        parent="v3",
        date=dt.date.today().isoformat(),
        scale=v3.manifest.scale,
        rubric="../RUBRIC-v4.md",
        annotators=tuple(annotators),
        judgments_sha256="0" * 64,
        description=(
            "v3's grades unchanged plus evidence spans (RUBRIC-v4.md) on every pair graded 2-3 and the grade-1 "
            "pairs where one passage points the way, marked blind by three judges, 25% of queries marked again by "
            "two others, the 4 pairs sharing no character adjudicated blind (see data/judgments/tools/build_v4.py)"
        ),
        dataset=v3.manifest.dataset,
        completeness=v3.manifest.completeness,
    )
    write_version("data/judgments/v4", manifest, text)
    v4 = load_version("data/judgments/v4")
    if not v4.qrels().equals(v3.qrels()):
        raise SystemExit("v4's qrels differ from v3's: a span row changed a grade")
    print(f"v4: {len(added)} span rows added to v3's {v3.judgments.height}; qrels equal v3's")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not glob.glob(str(Path(sys.argv[1]) / "out_*.jsonl")):
        raise SystemExit("usage: python data/judgments/tools/build_v4.py JUDGE_DIR")
    main(sys.argv[1])
