"""The shipped default benchmark (pydocs edition v3, judgments v3, active as v4: the same grades with
evidence spans) keeps the promises its manifest makes.

These read the committed files only: the corpus, the queries, the judgment set and the results
that `make repro` wrote and the repository commits.
"""

from __future__ import annotations

import json
from collections import defaultdict

import polars as pl
import pytest

from releval.inputs.corpus import read_corpus
from releval.inputs.schemas import load_queries
from releval.judging.judgments import load_version
from releval.judging.overlap import COPIED_RUN, longest_run, query_overlaps, words
from support import ROOT

QUERIES = ROOT / "data" / "pydocs" / "v3" / "queries.jsonl"
CORPUS = ROOT / "data" / "pydocs" / "v3" / "corpus.jsonl.gz"
V3 = ROOT / "data" / "judgments" / "v3"
V4 = ROOT / "data" / "judgments" / "v4"
SLICES = ("navigational", "paraphrase", "howto", "hard", "tail")
NEW_QUERIES = "q201"  # ids from here on were written for v3


@pytest.fixture(scope="module")
def queries() -> pl.DataFrame:
    return load_queries(QUERIES)


@pytest.fixture(scope="module")
def judgments():
    return load_version(V3)


def test_the_params_default_is_this_benchmark():
    params = (ROOT / "params.yaml").read_text(encoding="utf-8")
    assert "path: data/pydocs/v3/corpus.jsonl.gz" in params and "path: data/judgments/v4" in params


def test_the_active_set_v4_keeps_v3_s_grades_and_adds_spans(judgments):
    """v4 changed no grade: document-level figures under it are v3's, and every span sits on a relevant pair."""
    v4 = load_version(V4)
    columns = ["query_id", "doc_id", "grade"]
    assert v4.qrels().select(columns).sort(columns[:2]).equals(judgments.qrels().select(columns).sort(columns[:2]))
    with_spans = v4.judgments.filter(pl.col("evidence").list.len() > 0)
    assert with_spans.height > 300 and with_spans["grade"].min() >= 1


def test_at_least_100_queries_in_every_slice_and_both_splits(queries):
    assert queries.height >= 100
    for kind in SLICES:
        part = queries.filter(pl.col("slices").list.contains(kind))
        assert set(part["split"]) == {"dev", "holdout"}, kind


def test_every_query_has_a_relevant_document_and_a_third_have_three(queries, judgments):
    relevant = judgments.qrels().filter(pl.col("grade") >= 1).group_by("query_id").len()
    counts = dict(relevant.iter_rows())
    assert all(counts.get(q, 0) >= 1 for q in queries["query_id"])
    assert sum(counts.get(q, 0) >= 3 for q in queries["query_id"]) * 3 >= queries.height


def test_no_query_copies_a_fragment_of_its_answer(queries, judgments):
    docs = read_corpus(CORPUS, "jsonl")
    texts = {d: f"{t} {x}" for d, t, x in docs.select("doc_id", "title", "text").iter_rows()}
    rows = query_overlaps(queries, judgments.qrels(), texts, SLICES)
    assert len(rows) == queries.height
    copied = [(r.query_id, r.run) for r in rows if r.run >= COPIED_RUN]
    assert not copied


def test_longest_run_by_hand():
    query = words("Fraction.from_float(0.3) == Fraction(3, 10)?")
    assert query == ["fraction", "from_float", "0", "3", "fraction", "3", "10"]
    assert longest_run(query, words("the exact value of Fraction.from_float(0.3) is not 3/10")) == 4
    assert longest_run(query, words("nothing shared here")) == 0
    assert longest_run(["a", "b", "a", "b", "c"], ["x", "a", "b", "c", "y"]) == 3


def test_a_quarter_of_the_queries_double_judged_across_every_slice_and_new_queries(queries, judgments):
    rows = judgments.judgments.filter(pl.col("annotator").is_in(["claude-a", "claude-b"]))
    per_pair = rows.group_by("query_id", "doc_id").agg(pl.col("annotator").n_unique().alias("n"))
    doubled = set(per_pair.filter(pl.col("n") == 2)["query_id"])
    fully = {q for q in doubled if per_pair.filter(pl.col("query_id") == q)["n"].min() == 2}
    assert len(fully) * 4 >= queries.height
    tagged = queries.filter(pl.col("query_id").is_in(sorted(fully)))
    for kind in SLICES:
        assert tagged.filter(pl.col("slices").list.contains(kind)).height, kind
    assert any(q >= NEW_QUERIES for q in fully) and any(q < NEW_QUERIES for q in fully)


def test_every_disagreement_is_adjudicated_between_the_two_grades(judgments):
    grades: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for q, d, g, who in judgments.judgments.select("query_id", "doc_id", "grade", "annotator").iter_rows():
        grades[(q, d)][who] = g
    qrels = {(q, d): g for q, d, g in judgments.qrels().select("query_id", "doc_id", "grade").iter_rows()}
    disputed = {k: v for k, v in grades.items() if "claude-b" in v and v.get("claude-a") != v["claude-b"]}
    assert disputed
    for pair, by in disputed.items():
        low, high = sorted((by["claude-a"], by["claude-b"]))
        assert "adjudicator" in by and low <= by["adjudicator"] <= high, pair
        assert qrels[pair] == by["adjudicator"], pair


def test_every_default_configuration_is_judged_to_depth_10():
    metrics = json.loads((ROOT / "reports" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["contract"]["judgments_version"] == "v4"
    judged = {cid: row["judged@10"] for cid, row in metrics["configs"].items()}
    assert len(judged) == 24
    assert min(judged.values()) >= 0.98, sorted(judged.items(), key=lambda kv: kv[1])[:3]
