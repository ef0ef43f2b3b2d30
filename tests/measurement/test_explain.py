"""`releval explain` and releval.measurement.explain: the queries where two configurations differ most,
each with both top-k lists (grades, titles, the best chunk's passage), on constructed runs, chunks,
documents and judgments; the sealed holdout never shown."""

from __future__ import annotations

import json

import polars as pl
import pytest

from releval.errors import InputError
from releval.measurement import explain
from releval.reporting.explain_text import explanation_to_dict, render_explanation
from releval.retrieval import runs
from support.scored_project import Project

DOCS = {
    f"d{i}": (f"Title {i}", f"Body of document {i}. " + " ".join(f"w{i}x{j}" for j in range(100))) for i in range(6)
}


def chunk_table() -> pl.DataFrame:
    """Two chunks per document: characters 0-40 and 40-400 of its text; text = title + " " + body."""
    rows = []
    for doc_id, (title, text) in DOCS.items():
        for start, end in ((0, 40), (40, 400)):
            rows.append((f"{doc_id}#{start}-{end}", doc_id, start, end, 10, f"{title} {text[start:end]}"))
    return pl.DataFrame(
        rows, schema=["chunk_id", "doc_id", "start", "end", "n_tokens", "text"], orient="row"
    ).with_columns(pl.col("start").cast(pl.Int64), pl.col("end").cast(pl.Int64), pl.col("n_tokens").cast(pl.Int64))


def docs_table() -> pl.DataFrame:
    return pl.DataFrame(
        {"doc_id": list(DOCS), "title": [t for t, _ in DOCS.values()], "text": [x for _, x in DOCS.values()]}
    )


def chunk_run(ranking: dict[str, list[tuple[str, float]]]) -> pl.DataFrame:
    """A chunk run: query -> (chunk id, score), best first (ranks follow)."""
    rows = [
        (q, chunk, chunk.split("#")[0], score, rank)
        for q, chunks in ranking.items()
        for rank, (chunk, score) in enumerate(chunks, 1)
    ]
    return pl.DataFrame(rows, schema=runs.RUN_SCHEMA, orient="row")


QRELS = pl.DataFrame(
    [("q1", "d1", 3), ("q1", "d2", 0), ("q2", "d3", 2), ("q2", "d4", 1), ("q3", "d5", 3)],
    schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64},
    orient="row",
)
QUERIES = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["first <query>", "second", "third"]})
# A finds d1 (grade 3) first on q1; B ranks it third, below an unjudged d0 and a non-relevant d2.
RUN_A = chunk_run(
    {
        "q1": [("d1#40-400", 0.9), ("d1#0-40", 0.8), ("d2#0-40", 0.7), ("d0#0-40", 0.6)],
        "q2": [("d3#0-40", 0.9), ("d4#0-40", 0.8)],
        "q3": [("d5#0-40", 0.9)],
    }
)
RUN_B = chunk_run(
    {
        "q1": [("d0#0-40", 0.9), ("d2#40-400", 0.8), ("d1#0-40", 0.7)],
        "q2": [("d4#40-400", 0.9), ("d3#0-40", 0.8)],
        "q3": [("d5#0-40", 0.9)],
    }
)
SCORES_A = {"q1": 1.0, "q2": 0.9}  # q3 is the sealed holdout: never scored
SCORES_B = {"q1": 0.5, "q2": 0.7}


@pytest.fixture
def chunk_file(tmp_path):
    path = tmp_path / "chunks" / "c1.parquet"
    path.parent.mkdir()
    chunk_table().write_parquet(path)
    return path


def pair(chunk_file, **options):
    a = explain.Configuration("a/c1", SCORES_A, RUN_A, chunk_file)
    b = explain.Configuration("b/c1", SCORES_B, RUN_B, chunk_file)
    return explain.explain_pairs([(a, b)], QRELS, QUERIES, docs_table(), "ndcg@10", **options)[0]


# --------------------------------------------------------------------------- which queries


def test_the_queries_that_differ_most_come_first_ties_by_id_and_no_difference_left_out():
    a = {"q1": 0.5, "q2": 0.5, "q3": 0.2, "q4": 0.9, "q5": 0.4}
    b = {"q1": 0.5, "q2": 0.8, "q3": 0.5, "q4": 0.1, "q5": 0.3}
    assert explain.differing_queries(a, b, 10) == ["q4", "q2", "q3", "q5"]  # q2 and q3 tie at 0.3: by id
    assert explain.differing_queries(a, b, 2) == ["q4", "q2"]
    assert explain.differing_queries(a, {**b, "q4": 0.9}, 10) == ["q2", "q3", "q5"]


def test_a_query_asked_for_must_be_scored_by_both_and_the_holdout_is_refused():
    assert explain.differing_queries(SCORES_A, SCORES_B, 5, "q2") == ["q2"]
    with pytest.raises(InputError, match="'q3' is not among the scored queries of A and B.*sealed holdout"):
        explain.differing_queries(SCORES_A, SCORES_B, 5, "q3")
    with pytest.raises(InputError, match="of B"):
        explain.differing_queries(SCORES_A, {"q1": 0.1}, 5, "q2")
    with pytest.raises(InputError, match=">= 1"):
        explain.differing_queries(SCORES_A, SCORES_B, 0)


# --------------------------------------------------------------------------- the lists


def test_a_document_stands_at_its_best_chunk_and_ties_follow_the_contract():
    top = explain.ranked_documents(RUN_A, "q1", 10)
    assert top["doc_id"].to_list() == ["d1", "d2", "d0"]
    assert top["chunk_id"].to_list() == ["d1#40-400", "d2#0-40", "d0#0-40"]  # d1's best chunk, not its second
    tied = chunk_run({"q": [("b#0-1", 0.5), ("a#0-1", 0.5), ("c#0-1", 0.9)]})
    assert explain.ranked_documents(tied, "q", 10)["doc_id"].to_list() == ["c", "a", "b"]  # docid-asc
    assert explain.ranked_documents(tied, "q", 10, "trec_eval")["doc_id"].to_list() == ["c", "b", "a"]
    assert explain.ranked_documents(tied, "q", 2)["doc_id"].to_list() == ["c", "a"]
    documents = pl.DataFrame({"query_id": ["q"], "doc_id": ["x"], "score": [1.0]})  # an external run
    assert explain.ranked_documents(documents, "q", 10)["chunk_id"].to_list() == [None]


def test_each_list_has_grades_unjudged_marked_titles_other_ranks_and_passages(chunk_file):
    explanation = pair(chunk_file)
    assert (explanation.a, explanation.b, explanation.metric, explanation.queries) == ("a/c1", "b/c1", "ndcg@10", 2)
    assert (explanation.wins, explanation.losses, explanation.ties) == (0, 2, 0)
    assert explanation.mean_a == pytest.approx(0.95) and explanation.mean_b == pytest.approx(0.6)
    first, second = explanation.contrasts
    assert (first.query_id, first.text, first.a, first.b, first.relevant) == ("q1", "first <query>", 1.0, 0.5, 1)
    assert first.difference == pytest.approx(-0.5) and second.query_id == "q2" and second.relevant == 2
    a1, a2, a3 = first.top_a
    assert (a1.rank, a1.doc_id, a1.grade, a1.title, a1.other_rank) == (1, "d1", 3, "Title 1", 3)
    assert (a2.doc_id, a2.grade, a2.other_rank) == ("d2", 0, 2)
    assert (a3.doc_id, a3.grade, a3.other_rank) == ("d0", None, 1)  # unjudged: None, counted as grade 0
    # the passage is the chunk's body (the document's text at its offsets), the title not repeated
    assert a1.chunk_id == "d1#40-400" and a1.passage.startswith(" ".join(DOCS["d1"][1][40:80].split()))
    assert not a1.passage.startswith("Title")
    assert a2.passage == " ".join(DOCS["d2"][1][:40].split())
    b1 = first.top_b[0]
    assert (b1.doc_id, b1.grade, b1.other_rank) == ("d0", None, 3)
    assert [d.doc_id for d in second.top_b] == ["d4", "d3"] and second.top_b[0].grade == 1


def test_passages_are_cut_at_a_word_and_the_holdout_never_appears(chunk_file):
    explanation = pair(chunk_file, passage_chars=60, n=5)
    passages = [d.passage for c in explanation.contrasts for d in (*c.top_a, *c.top_b)]
    long = [p for p in passages if p.endswith(" …")]
    assert long and all(len(p) <= 62 for p in passages)
    assert all(not p[:-2].endswith(("w", "x")) or p.endswith(" …") for p in long)
    assert "q3" not in {c.query_id for c in explanation.contrasts}
    with pytest.raises(InputError, match="sealed holdout"):
        pair(chunk_file, query="q3")
    assert [c.query_id for c in pair(chunk_file, query="q2").contrasts] == ["q2"]
    assert [len(c.top_a) for c in pair(chunk_file, depth=1).contrasts] == [1, 1]


def test_a_run_at_document_level_shows_each_documents_opening(chunk_file):
    documents = runs.collapse_to_documents(RUN_B).select("query_id", "doc_id", "score")
    a = explain.Configuration("a/c1", SCORES_A, RUN_A, chunk_file)
    b = explain.Configuration("external/prod", SCORES_B, documents, None)
    (explanation,) = explain.explain_pairs([(a, b)], QRELS, QUERIES, docs_table(), "ndcg@10", passage_chars=30)
    shown = explanation.contrasts[0].top_b[0]
    assert shown.chunk_id is None and shown.passage.startswith("Body of document 0.")


def test_every_chunk_file_is_read_once_for_all_pairs(chunk_file, monkeypatch):
    read = []
    scan = pl.scan_parquet
    monkeypatch.setattr(explain.pl, "scan_parquet", lambda path, *a, **k: read.append(path) or scan(path, *a, **k))
    a = explain.Configuration("a/c1", SCORES_A, RUN_A, chunk_file)
    b = explain.Configuration("b/c1", SCORES_B, RUN_B, chunk_file)
    explained = explain.explain_pairs([(a, b), (b, a), (a, a)], QRELS, QUERIES, docs_table(), "ndcg@10")
    assert read == [chunk_file] and len(explained) == 3 and explained[2].contrasts == ()


def test_a_missing_chunk_file_is_named(tmp_path):
    a = explain.Configuration("a/c1", SCORES_A, RUN_A, tmp_path / "c1.parquet")
    with pytest.raises(InputError, match="c1.parquet"):
        explain.explain_pairs([(a, a), (a, explain.Configuration("b", SCORES_B, RUN_B, None))], QRELS, None, None, "m")


def test_the_text_puts_both_lists_side_by_side_and_the_json_holds_every_field(chunk_file):
    explanation = pair(chunk_file)
    text = render_explanation(explanation)
    lines = text.splitlines()
    assert lines[0] == "explain: B b/c1 against A a/c1 on ndcg@10, 2 scored queries"
    assert "B higher on 0, lower on 2, equal on 0" in lines[1]
    assert all(len(line) <= 120 for line in lines)
    q1 = lines.index("q1  ndcg@10 1.0000 → 0.5000  Δ -0.5000  (1 relevant judged)")
    row = next(line for line in lines[q1:] if line.lstrip().startswith("1  [3]"))
    assert "Title 1" in row and "=3" in row and "[?] Title 0" in row  # A's d1 beside B's unjudged d0
    assert "first <query>" in text
    data = json.loads(json.dumps(explanation_to_dict(explanation)))
    assert data["contrasts"][0]["difference"] == -0.5 and data["contrasts"][0]["top_a"][2]["grade"] is None


# --------------------------------------------------------------------------- the command


def test_the_command_finds_runs_and_chunks_from_the_configuration_and_keeps_the_holdout_sealed(tmp_path, capsys):
    project = Project(tmp_path / "proj")
    project.write_reports({"a/c1": {"ndcg@10": [1.0, 0.9]}, "b/c1": {"ndcg@10": [0.5, 0.7]}}, ["q1", "q2"], None)
    project.write_queries(["q1", "q2"], holdout={"q3"})
    project.write_qrels(list(QRELS.iter_rows()))
    work = project.root / "data" / "work"
    docs_table().write_parquet(work / "docs.parquet")
    (work / "chunks").mkdir()
    chunk_table().write_parquet(work / "chunks" / "c1.parquet")
    for config_id, run in (("a/c1", RUN_A), ("b/c1", RUN_B)):
        folder = work / "runs" / config_id.replace("/", "-")  # a name nothing is guessed from
        runs.write_run(folder, run, {"config_id": config_id, "chunking": "c1", "ops": {}})
    code, out, err = project.cli(capsys, "explain", "a/c1", "b/c1")
    assert code == 0, err
    assert out.startswith("explain: B b/c1 against A a/c1 on ndcg@10, 2 scored queries")
    assert "Title 1" in out and "q3" not in out
    code, out, err = project.cli(capsys, "explain", "a/c1", "b/c1", "--query", "q3")
    assert code == 2 and "sealed holdout" in err
    code, out, _ = project.cli(capsys, "explain", "a/c1", "b/c1", "--json", "--n", "1", "--depth", "2")
    data = json.loads(out)
    assert [c["query_id"] for c in data["contrasts"]] == ["q1"]
    assert data["contrasts"][0]["top_a"][0]["chunk_id"] == "d1#40-400" and len(data["contrasts"][0]["top_b"]) == 2
    code, _, err = project.cli(capsys, "explain", "a/c1", "nope/c1")
    assert code == 2 and "nope/c1" in err
