"""Property tests (hypothesis) on the metric engine and the parsers.

Metric engine (``releval.measurement.metrics.evaluate``), on random graded qrels and runs (finite scores, ties
likely, full-range floats included, random contracts):

* every metric lies in [0, 1] except dcg (>= 0), and ceiling@k >= ndcg@k;
* permuting the input rows never changes any number (per query, mean, counts);
* an ideal run (all judged documents, sorted by grade) scores ndcg@k = ceiling@k = 1 for every
  query with a relevant document;
* adding a non-relevant document (grade 0 or unjudged) at the bottom never changes nDCG@k;
* appending any documents below rank k never changes p@k, hit@k or ndcg@k;
* the tie rule is deterministic: docid-asc (score desc, then doc_id ascending by code point) and
  trec_eval (float32 score desc, then doc_id descending).

Parsers (round trips through real files):

* ``write_trec_run`` then ``read_run`` gives the same table (scores bit for bit);
* TREC qrels text (any whitespace between fields, LF/CRLF, blank lines) through ``read_qrels``;
* the JSONL corpus reader (plain or .gz, BOM or not, LF/CRLF, ASCII-escaped or raw JSON) keeps
  arbitrary Unicode titles and texts (U+2028, emoji, control characters other than NUL).

Each property runs up to 100 examples (the reference machine has 2 shared cores).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from releval.inputs.corpus import EmptyTextWarning, read_corpus
from releval.errors import InputError
from releval.measurement.metrics import (
    GAINS,
    MISSING_IN_RUN_POLICIES,
    NO_RELEVANT_POLICIES,
    TIE_RULES,
    Contract,
    evaluate,
)
from releval.inputs.trec import read_qrels, read_run, write_trec_run

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

QUERIES = ["q1", "q2", "q3", "Q1", "q10"]
# Ids whose code-point order differs from "natural" order: upper before lower, "10" before "9", non-ASCII last.
DOCS = ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "D1", "10", "9", "a", "é", "z", "日本", "😀"]
CUTOFFS = (1, 2, 3, 5, 10)


def metric_names(k: int) -> list[str]:
    return [
        f"ndcg@{k}",
        f"dcg@{k}",
        f"recall@{k}",
        f"p@{k}",
        f"hit@{k}",
        f"judged@{k}",
        f"ceiling@{k}",
        f"mrr@{k}",
        f"map@{k}",
    ]


ALL_METRICS = ["rprec", "mrr", "map"] + [name for k in CUTOFFS for name in metric_names(k)]

# Finite scores: a few values that tie (and -0.0, which ties with 0.0), plus the whole float range
# (subnormals; magnitudes beyond float32, which the engine's single-precision key cannot hold).
SCORES = st.one_of(st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0, -1.0]), st.floats(allow_nan=False, allow_infinity=False))
SMALL_SCORES = st.integers(-40, 40).map(lambda n: n / 4)  # exact, tie-prone, with room below the minimum

CONTRACTS = st.builds(
    Contract,
    gain=st.sampled_from(GAINS),
    ties=st.sampled_from(TIE_RULES),
    rel_threshold=st.integers(1, 3),
    no_relevant=st.sampled_from(NO_RELEVANT_POLICIES),
    missing_in_run=st.sampled_from(MISSING_IN_RUN_POLICIES),
)


def qrels_frame(grades: dict[tuple[str, str], int]) -> pl.DataFrame:
    return pl.DataFrame(
        [(q, d, g) for (q, d), g in grades.items()],
        schema={"query_id": pl.String, "doc_id": pl.String, "grade": pl.Int64},
        orient="row",
    )


def run_frame(scores: dict[tuple[str, str], float]) -> pl.DataFrame:
    return pl.DataFrame(
        [(q, d, s) for (q, d), s in scores.items()],
        schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64},
        orient="row",
    )


@st.composite
def collections(draw, scores=SCORES):
    """(grades, scores): judged pairs with grades 0..3 and run pairs with scores; at least one run pair
    is judged 3, so some query is evaluated under every contract."""
    pair = st.tuples(st.sampled_from(QUERIES), st.sampled_from(DOCS))
    run = draw(st.dictionaries(pair, scores, min_size=1, max_size=40))
    grades = draw(st.dictionaries(pair, st.integers(0, 3), max_size=30))
    grades[draw(st.sampled_from(sorted(run)))] = 3
    return grades, run


def per_query(evaluation) -> dict[str, dict[str, float]]:
    return evaluation.to_dict()["per_query"]


# --- the metric engine --------------------------------------------------------------------------


@SETTINGS
@given(collections(), CONTRACTS)
def test_every_metric_is_in_the_unit_interval_except_dcg(collection, contract):
    grades, scores = collection
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # float32 overflow of huge scores in the sort key
        evaluation = evaluate(qrels_frame(grades), run_frame(scores), ALL_METRICS, contract)
    for query, values in per_query(evaluation).items():
        for name, value in values.items():
            assert math.isfinite(value), (query, name, value)
            if name.startswith("dcg@"):
                assert value >= 0.0, (query, name, value)
            else:
                assert 0.0 <= value <= 1.0 + 1e-12, (query, name, value)
        for k in CUTOFFS:
            assert values[f"ceiling@{k}"] >= values[f"ndcg@{k}"] - 1e-12, (query, k)
    for name, value in evaluation.mean.items():
        assert value >= 0.0 and (name.startswith("dcg@") or value <= 1.0 + 1e-12), (name, value)


@SETTINGS
@given(collections(), CONTRACTS, st.randoms(use_true_random=False))
def test_permuting_input_rows_never_changes_any_number(collection, contract, rng):
    grades, scores = collection
    qrels_rows, run_rows = list(grades.items()), list(scores.items())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = evaluate(qrels_frame(grades), run_frame(scores), ALL_METRICS, contract).to_dict()
        rng.shuffle(qrels_rows)
        rng.shuffle(run_rows)
        shuffled = evaluate(qrels_frame(dict(qrels_rows)), run_frame(dict(run_rows)), ALL_METRICS, contract).to_dict()
    assert shuffled == expected  # exact: per query, means, counts and contract


@SETTINGS
@given(
    st.dictionaries(
        st.tuples(st.sampled_from(QUERIES), st.sampled_from(DOCS)), st.integers(0, 3), min_size=1, max_size=40
    ),
    st.sampled_from(GAINS),
    st.sampled_from(TIE_RULES),
    st.sampled_from(CUTOFFS),
)
def test_an_ideal_run_scores_one(grades, gain, ties, k):
    assume(any(grade >= 1 for grade in grades.values()))
    # All judged documents, scored by grade: a run sorted by grade (equal grades tie; any order of them is ideal).
    run = {pair: float(grade) for pair, grade in grades.items()}
    evaluation = evaluate(
        qrels_frame(grades), run_frame(run), [f"ndcg@{k}", f"ceiling@{k}"], Contract(gain=gain, ties=ties)
    )
    with_relevant = {q for (q, _), grade in grades.items() if grade >= 1}
    values = per_query(evaluation)
    assert set(values) == with_relevant
    for query in with_relevant:
        assert values[query][f"ndcg@{k}"] == pytest.approx(1.0, abs=1e-12), query
        assert values[query][f"ceiling@{k}"] == pytest.approx(1.0, abs=1e-12), query


@SETTINGS
@given(
    collections(scores=SMALL_SCORES),
    st.sampled_from(GAINS),
    st.sampled_from(TIE_RULES),
    st.sampled_from(["unjudged", "grade 0"]),
    st.data(),
)
def test_a_non_relevant_document_at_the_bottom_never_changes_ndcg(collection, gain, ties, kind, data):
    grades, scores = collection
    judged_queries = {q for q, _ in grades}
    candidates = sorted({q for q, _ in scores} & judged_queries)
    query = data.draw(st.sampled_from(candidates))
    taken = {d for q, d in scores if q == query} | {d for q, d in grades if q == query}
    new_doc = data.draw(st.sampled_from([d for d in DOCS + ["new", "0", "zz"] if d not in taken]))
    bottom = min(s for (q, _), s in scores.items() if q == query) - 1.0
    names = [f"ndcg@{k}" for k in CUTOFFS] + ["ndcg@1000"]
    contract = Contract(gain=gain, ties=ties)
    before = evaluate(qrels_frame(grades), run_frame(scores), names, contract)
    more_grades = {**grades, (query, new_doc): 0} if kind == "grade 0" else grades
    after = evaluate(qrels_frame(more_grades), run_frame({**scores, (query, new_doc): bottom}), names, contract)
    assert per_query(after) == per_query(before)
    assert after.mean == before.mean


@SETTINGS
@given(collections(scores=SMALL_SCORES), st.sampled_from(CUTOFFS), CONTRACTS, st.data())
def test_appending_documents_below_rank_k_never_changes_p_hit_ndcg_at_k(collection, k, contract, data):
    grades, scores = collection
    by_query: dict[str, list[float]] = {}
    for (query, _), score in scores.items():
        by_query.setdefault(query, []).append(score)
    long_enough = sorted(q for q, values in by_query.items() if len(values) >= k)
    assume(long_enough)
    extended = dict(scores)
    for query in data.draw(st.lists(st.sampled_from(long_enough), min_size=1, unique=True)):
        unretrieved = [d for d in DOCS + ["new1", "new2"] if (query, d) not in scores]
        # Any documents: judged relevant ones included (the qrels do not change).
        appended = data.draw(st.lists(st.sampled_from(unretrieved), min_size=1, max_size=4, unique=True))
        floor = min(by_query[query])
        for offset, doc in enumerate(appended, start=1):
            extended[(query, doc)] = floor - offset
    names = [f"p@{k}", f"hit@{k}", f"ndcg@{k}"]
    qrels = qrels_frame(grades)
    try:
        before = evaluate(qrels, run_frame(scores), names, contract)
    except InputError as exc:  # e.g. rel_threshold 3 and missing_in_run=exclude leave nothing
        assert "no query left to evaluate" in str(exc)
        assume(False)
    after = evaluate(qrels, run_frame(extended), names, contract)
    assert per_query(after) == per_query(before)
    assert after.mean == before.mean


DOC_IDS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=4)


@SETTINGS
@given(
    st.lists(
        st.tuples(DOC_IDS, st.sampled_from([0.0, 1.0, 2.0, -0.0, 1.0 + 2**-30])),
        min_size=1,
        max_size=12,
        unique_by=lambda row: row[0],
    ),
    st.data(),
    st.sampled_from(TIE_RULES),
)
def test_the_tie_rule_is_deterministic(rows, data, ties):
    """The rank of the one relevant document equals the rank the documented rule gives it."""
    relevant = data.draw(st.sampled_from([doc for doc, _ in rows]))
    scores = {("q", doc): score for doc, score in rows}
    if ties == "docid-asc":
        # score descending (full precision), then doc_id ascending (code points = UTF-8 bytes).
        order = sorted(rows, key=lambda row: (-row[1], row[0]))
    else:
        # scores compared as float32 (1 + 2**-30 ties with 1), then doc_id descending.
        order = sorted(rows, key=lambda row: (-float(np.float32(row[1])), [-ord(c) for c in row[0]] + [1]))
    expected_rank = [doc for doc, _ in order].index(relevant) + 1
    qrels = qrels_frame({("q", relevant): 1})
    contract = Contract(ties=ties)
    first = evaluate(qrels, run_frame(scores), ["mrr"], contract)
    again = evaluate(qrels, run_frame(dict(reversed(list(scores.items())))), ["mrr"], contract)
    assert first.mean["mrr"] == again.mean["mrr"] == 1.0 / expected_rank


# --- round trips through files ------------------------------------------------------------------

# What the TREC writer and reader treat as a field separator: Unicode White_Space (Rust's \s).
WHITE_SPACE = "\t\n\x0b\x0c\r\x85"
TREC_ID = st.text(
    st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp"), blacklist_characters=WHITE_SPACE),
    min_size=1,
    max_size=6,
)


@SETTINGS
@given(
    st.dictionaries(
        st.tuples(TREC_ID, TREC_ID), st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=25
    ),
    st.text(st.characters(whitelist_categories=("L", "N", "P")), min_size=1, max_size=8),
)
def test_write_trec_run_then_read_run_gives_the_same_table(scores, tag):
    run = run_frame(scores)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.trec"
        write_trec_run(path, run, tag=tag)
        back = read_run(path)
        assert [p.name for p in Path(tmp).iterdir()] == ["run.trec"]
    assert back.schema == run.schema
    written = {(q, d): s for q, d, s in back.iter_rows()}
    assert written.keys() == scores.keys()
    for pair, score in scores.items():
        # Bit for bit (repr round trip); -0.0 may come back as 0.0 or -0.0, and both equal 0.0.
        assert written[pair] == score, (pair, score, written[pair])


SEPARATORS = st.sampled_from([" ", "\t", "  ", " \t ", "\x0b", "\x0c"])


@SETTINGS
@given(
    st.lists(
        st.tuples(
            TREC_ID,
            st.sampled_from(["0", "Q0", "1", "iter"]),
            TREC_ID,
            st.integers(0, 2**40),
            st.integers(0, 3),
            st.lists(SEPARATORS, min_size=5, max_size=5),
            st.sampled_from(["\n", "\r\n", "\n\n", "\r\n  \r\n", " \t\n"]),
        ),
        min_size=1,
        max_size=25,
        unique_by=lambda row: (row[0], row[2]),
    ),
    st.booleans(),
)
def test_trec_qrels_text_round_trips(rows, final_newline):
    lines = []
    for query_id, iteration, doc_id, grade, zeros, (lead, s1, s2, s3, trail), end in rows:
        lead = lead if lead.strip(" \t") == "" else ""  # leading blanks only (no \v or \f before an id)
        lines.append(f"{lead}{query_id}{s1}{iteration}{s2}{doc_id}{s3}{'0' * zeros}{grade}{trail}{end}")
    text = "".join(lines)
    if not final_newline:
        text = text.rstrip("\r\n \t")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "qrels.txt"
        path.write_bytes(text.encode("utf-8"))
        qrels = read_qrels(path)
    assert qrels.rows() == [(q, d, g) for q, _, d, g, *_ in rows]


TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
    st.lists(
        st.sampled_from(
            [
                "\u2028",
                "\u2029",
                "\x85",
                "😀",
                "👩\u200d👩\u200d👧",
                "\r",
                "\r\n",
                "\n",
                "\t",
                "\x01",
                "\x1f",
                "\x7f",
                "\ufeff",
                "\\",
                '"',
                "é",
                "e\u0301",
                " ",
                "日本語",
            ]
        ),
        max_size=8,
    ).map("".join),
)
CORPUS_ID = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1, max_size=8)


@SETTINGS
@given(
    st.lists(
        st.tuples(CORPUS_ID, TEXT, TEXT, st.sampled_from(["key", "absent", "null"])),
        min_size=1,
        max_size=8,
        unique_by=lambda row: row[0],
    ),
    st.booleans(),
    st.sampled_from([".jsonl", ".jsonl.gz"]),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
    st.sampled_from(["_id", "doc_id", "id"]),
)
def test_jsonl_corpus_round_trips_unicode(docs, ascii_only, suffix, newline, bom, id_key):
    lines = []
    for doc_id, title, text, title_style in docs:
        record = {id_key: doc_id, "text": text}
        if title_style == "key" or title:
            record["title"] = title
        elif title_style == "null":
            record["title"] = None
        lines.append(json.dumps(record, ensure_ascii=ascii_only) + newline)
    data = ("\ufeff" if bom else "").encode() + "".join(lines).encode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"corpus{suffix}"
        path.write_bytes(gzip.compress(data, mtime=0) if suffix.endswith(".gz") else data)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = read_corpus(path, "jsonl")
    assert frame.rows() == [
        (doc_id, title, text, hashlib.sha256(f"{title}\n{text}".encode()).hexdigest())
        for doc_id, title, text, _ in docs
    ]
    empty = [doc_id for doc_id, _, text, _ in docs if not text.strip()]
    warned = [w for w in caught if issubclass(w.category, EmptyTextWarning)]
    assert bool(warned) == bool(empty)
    if empty:
        assert f" {len(empty)} documents with an empty text kept" in str(warned[0].message)
