"""Judgment-set versions: loading, the multi-annotator rule, IDCG and the change report, writing."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import polars as pl
import pytest

from releval.judging import judgments as jm
from releval.errors import InputError, InputErrors
from releval.measurement.metrics import evaluate
from releval.inputs.schemas import Record

INV_LOG2_3 = 0.6309297535714575  # 1 / log2(3): the discount at rank 2
INV_LOG2_4 = 0.5  # 1 / log2(4): the discount at rank 3


def qrels(*rows: tuple[str, str, int]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=jm.QRELS_SCHEMA, orient="row")


def judgments(*rows: tuple[str, str, int, str]) -> pl.DataFrame:
    return pl.DataFrame(
        [(*r, None, None, None, i + 1) for i, r in enumerate(rows)],
        schema={
            "query_id": pl.Utf8,
            "doc_id": pl.Utf8,
            "grade": pl.Int64,
            "annotator": pl.Utf8,
            "span_start": pl.Int64,
            "span_end": pl.Int64,
            "notes": pl.Utf8,
            "line": pl.Int64,
        },
        orient="row",
    )


def write_set(
    root: Path, name: str, rows: list[dict], *, parent: str | None = None, annotators=("alice", "bob", "carol")
) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (directory / "judgments.jsonl").write_bytes(data)
    (directory / "RUBRIC.md").write_text("# grade 0..3\n")
    manifest = jm.Manifest(
        name,
        parent,
        "2026-11-30",
        {0: "not", 1: "partial", 2: "relevant", 3: "highly"},
        "RUBRIC.md",
        tuple(annotators),
        hashlib.sha256(data).hexdigest(),
    )
    (directory / "manifest.yaml").write_text(manifest.to_yaml())
    return directory


# --------------------------------------------------------------------------- aggregation


def test_one_annotator_gives_its_grade():
    out = jm.aggregate(judgments(("q1", "d1", 2, "alice"), ("q1", "d2", 0, "alice")))
    assert out.rows() == [("q1", "d1", 2), ("q1", "d2", 0)]
    assert out.schema == jm.QRELS_SCHEMA


def test_two_annotators_give_the_lower_grade():
    out = jm.aggregate(judgments(("q1", "d1", 3, "alice"), ("q1", "d1", 1, "bob")))
    assert out.rows() == [("q1", "d1", 1)]


def test_three_annotators_give_the_middle_grade_whatever_the_order():
    rows = [("q1", "d1", 3, "alice"), ("q1", "d1", 0, "bob"), ("q1", "d1", 2, "carol")]
    assert jm.aggregate(judgments(*rows)).rows() == [("q1", "d1", 2)]
    assert jm.aggregate(judgments(*reversed(rows))).rows() == [("q1", "d1", 2)]


def test_four_annotators_give_the_lower_of_the_two_middle_grades():
    rows = [("q1", "d1", 3, "a"), ("q1", "d1", 1, "b"), ("q1", "d1", 2, "c"), ("q1", "d1", 3, "d")]
    assert jm.aggregate(judgments(*rows)).rows() == [("q1", "d1", 2)]  # sorted 1,2,3,3 -> 2


def test_empty_judgments_give_empty_qrels():
    assert jm.aggregate(judgments()).height == 0


# --------------------------------------------------------------------------- IDCG


def test_ideal_dcg_by_hand():
    table = qrels(("q1", "d1", 3), ("q1", "d2", 1), ("q1", "d3", 0), ("q2", "d4", 0))
    exp = jm.ideal_dcg(table, [1, 3], "exponential")
    assert exp.rows() == [("q1", 1, 7.0), ("q1", 3, pytest.approx(7 + INV_LOG2_3)), ("q2", 1, 0.0), ("q2", 3, 0.0)]
    lin = jm.ideal_dcg(table, [2], "linear")
    assert lin.rows() == [("q1", 2, pytest.approx(3 + INV_LOG2_3)), ("q2", 2, 0.0)]


def test_ideal_dcg_agrees_with_the_metric_engine():
    table = qrels(("q1", "d1", 1), ("q1", "d2", 3), ("q1", "d3", 2), ("q1", "d4", 2), ("q2", "d1", 1))
    ideal_run = pl.DataFrame(
        {"query_id": ["q1"] * 4 + ["q2"], "doc_id": ["d2", "d3", "d4", "d1", "d1"], "score": [4.0, 3.0, 2.0, 1.0, 1.0]}
    )
    engine = evaluate(table, ideal_run, ["dcg@3"]).to_dict(per_query=True)["per_query"]
    ours = {q: v for q, k, v in jm.ideal_dcg(table, [3]).rows()}
    assert ours == {q: pytest.approx(engine[q]["dcg@3"], abs=1e-12) for q in engine}


def test_bad_k_or_gain_is_refused():
    with pytest.raises(InputError):
        jm.ideal_dcg(qrels(("q", "d", 1)), [0])
    with pytest.raises(InputError, match="unknown gain 'quadratic'; expected one of exponential, linear"):
        jm.idcg_change_report(qrels(("q", "d", 1)), qrels(("q", "d", 1)), [1], gain="quadratic")
    with pytest.raises(InputError, match="unknown gain 'quadratic'"):
        jm.ideal_dcg(qrels(("q", "d", 1)), [1], "quadratic")


def test_gains_are_the_metric_engines():
    assert [jm.gain_value(g, "exponential") for g in range(4)] == [0.0, 1.0, 3.0, 7.0]
    assert [jm.gain_value(g, "linear") for g in range(4)] == [0.0, 1.0, 2.0, 3.0]


# --------------------------------------------------------------------------- change report

OLD = qrels(("q1", "d1", 3), ("q1", "d2", 1), ("q1", "d3", 0), ("q2", "d4", 2), ("q3", "d5", 1))
NEW = qrels(
    ("q1", "d1", 3),
    ("q1", "d2", 2),
    ("q1", "d3", 0),
    ("q1", "d6", 1),  # d2 regraded 1->2, d6 added
    ("q2", "d4", 2),
    ("q2", "d7", 0),  # grade-0 addition: no change
    ("q4", "d8", 1),
)  # q3 gone, q4 new


def test_change_report_by_hand():
    report = jm.idcg_change_report(OLD, NEW, [1, 3], "exponential")
    assert report.schema == jm.CHANGE_REPORT_SCHEMA
    rows = {(r["query_id"], r["k"]): r for r in report.iter_rows(named=True)}
    # q1@1: the top grade is 3 both times (IDCG 7 -> 7): not listed. q2 does not move at all.
    assert set(rows) == {("q1", 3), ("q3", 1), ("q3", 3), ("q4", 1), ("q4", 3)}
    q1 = rows[("q1", 3)]
    # old: gains 7, 1, 0 -> 7 + 1/log2(3); new: gains 7, 3, 1 -> 7 + 3/log2(3) + 1/log2(4)
    assert q1["old_idcg"] == pytest.approx(7 + INV_LOG2_3, abs=1e-12)
    assert q1["new_idcg"] == pytest.approx(7 + 3 * INV_LOG2_3 + INV_LOG2_4, abs=1e-12)
    assert q1["change"] == pytest.approx(2 * INV_LOG2_3 + INV_LOG2_4, abs=1e-12)
    assert q1["docs_added"] == ["d6"] and q1["docs_removed"] == [] and q1["grades_changed"] == ["d2: 1->2"]
    assert q1["reason"] == "added d6 (grade 1); regraded d2 1->2"
    q3 = rows[("q3", 1)]
    assert (q3["old_idcg"], q3["new_idcg"], q3["docs_removed"]) == (1.0, 0.0, ["d5"])
    assert q3["reason"] == "query no longer judged; removed d5 (grade 1)"
    q4 = rows[("q4", 3)]
    assert (q4["old_idcg"], q4["new_idcg"], q4["docs_added"]) == (0.0, 1.0, ["d8"])
    assert q4["reason"].startswith("query newly judged")
    assert report.select("query_id", "k").rows() == sorted(rows)


def test_change_report_with_linear_gain():
    report = jm.idcg_change_report(OLD, NEW, [3], "linear")
    q1 = report.filter(pl.col("query_id") == "q1").row(0, named=True)
    assert q1["old_idcg"] == pytest.approx(3 + INV_LOG2_3, abs=1e-12)
    assert q1["new_idcg"] == pytest.approx(3 + 2 * INV_LOG2_3 + INV_LOG2_4, abs=1e-12)


def test_identical_qrels_report_nothing():
    assert jm.idcg_change_report(OLD, OLD.sample(fraction=1.0, shuffle=True, seed=1), [1, 5, 10]).height == 0


def test_a_regrade_below_the_cutoff_does_not_move_idcg_at_1():
    old = qrels(("q1", "a", 3), ("q1", "b", 1))
    new = qrels(("q1", "a", 3), ("q1", "b", 2))
    report = jm.idcg_change_report(old, new, [1, 2])
    assert report.select("query_id", "k").rows() == [("q1", 2)]
    assert math.isclose(report["change"][0], (3 - 1) * INV_LOG2_3)


# --------------------------------------------------------------------------- loading and writing sets

ROWS = [
    {"query_id": "q1", "doc_id": "d1", "grade": 3, "annotator": "alice"},
    {"query_id": "q1", "doc_id": "d1", "grade": 1, "annotator": "bob"},
    {"query_id": "q1", "doc_id": "d2", "grade": 2, "annotator": "alice"},
]


def test_load_version_and_qrels(tmp_path):
    judgment_set = jm.load_version(write_set(tmp_path, "v1", ROWS))
    assert judgment_set.version == "v1" and judgment_set.manifest.annotators == ("alice", "bob", "carol")
    assert judgment_set.rubric_sha256 == hashlib.sha256(b"# grade 0..3\n").hexdigest()
    assert judgment_set.qrels().rows() == [("q1", "d1", 1), ("q1", "d2", 2)]


def test_load_version_raises_every_problem(tmp_path):
    rows = ROWS + [{"query_id": "q1", "doc_id": "d3", "grade": 9, "annotator": "dave"}]
    directory = write_set(tmp_path, "v1", rows)
    with pytest.raises(InputErrors) as caught:
        jm.load_version(directory, query_ids=["q1"], doc_lengths={"d1": 5, "d2": 5})
    assert sorted((e.line, e.field) for e in caught.value.errors) == [(4, "annotator"), (4, "doc_id"), (4, "grade")]


def test_manifest_yaml_round_trips(tmp_path):
    directory = write_set(tmp_path, "v1", ROWS, parent="v0")
    manifest, errors = jm.read_manifest(directory / "manifest.yaml", expected_version="v1")
    assert errors == [] and manifest.parent == "v0" and manifest.date == "2026-11-30"
    assert manifest.to_yaml() == (directory / "manifest.yaml").read_text()


def test_write_version_seals_and_replaces_atomically(tmp_path):
    directory = write_set(tmp_path, "v1", ROWS)
    base = jm.load_version(directory)
    data = (
        directory / "judgments.jsonl"
    ).read_bytes() + b'{"query_id": "q2", "doc_id": "d1", "grade": 0, "annotator": "carol"}\n'
    sealed = jm.write_version(directory, base.manifest, data, jm.set_files(directory))
    assert sealed.judgments_sha256 == hashlib.sha256(data).hexdigest()
    assert jm.load_version(directory).judgments.height == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v1"]  # no temporary left behind


def test_add_judgments_makes_a_new_version_and_leaves_the_parent_alone(tmp_path):
    parent = write_set(tmp_path, "v1", ROWS)
    before = {p.name: p.read_bytes() for p in parent.iterdir()}
    records = [
        Record(2, {"query_id": "q1", "doc_id": "d3", "grade": 2, "annotator": "erin"}),
        Record(3, {"query_id": "q2", "doc_id": "d1", "grade": 0, "annotator": "erin"}),
    ]
    judgment_set, added = jm.add_judgments(records, "pool.csv", tmp_path / "v2", parent=parent, date="2026-12-01")
    assert added == 2
    manifest = judgment_set.manifest
    assert (manifest.version, manifest.parent, manifest.date) == ("v2", "v1", "2026-12-01")
    assert manifest.annotators == ("alice", "bob", "carol", "erin")
    assert judgment_set.judgments.height == 5
    assert (tmp_path / "v2" / "RUBRIC.md").read_text() == "# grade 0..3\n"
    assert {p.name: p.read_bytes() for p in parent.iterdir()} == before
    report = jm.idcg_change_report(jm.load_version(parent).qrels(), judgment_set.qrels(), [10])
    assert report["query_id"].to_list() == ["q1"]  # d3 added with grade 2; q2's only doc is grade 0
    assert report["docs_added"].to_list() == [["d3"]]


def test_add_judgments_writes_nothing_when_any_record_is_bad(tmp_path):
    directory = write_set(tmp_path, "v1", ROWS)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    records = [
        Record(2, {"query_id": "q1", "doc_id": "d9", "grade": 1, "annotator": "bob"}),
        Record(3, {"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"}),  # already judged
        Record(4, {"query_id": "q1", "doc_id": "d8", "grade": "two", "annotator": "bob"}),
    ]
    with pytest.raises(InputErrors) as caught:
        jm.add_judgments(records, "pool.csv", directory)
    assert [(e.file, e.line, e.field) for e in caught.value.errors] == [
        ("pool.csv", 3, "doc_id"),
        ("pool.csv", 4, "grade"),
    ]
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v1"]


def test_a_new_version_needs_a_parent(tmp_path):
    with pytest.raises(InputError, match="parent"):
        jm.add_judgments([], "x", tmp_path / "v9")


def test_compare_versions(tmp_path):
    write_set(tmp_path, "v1", ROWS)
    write_set(tmp_path, "v2", ROWS[:2], parent="v1")
    report = jm.compare_versions(tmp_path / "v1", tmp_path / "v2", [1, 2])
    assert report.select("query_id", "k", "docs_removed").rows() == [("q1", 1, ["d2"]), ("q1", 2, ["d2"])]
    # v1's ideal ranking: d2 (grade 2, gain 3), d1 (lower median of 3 and 1 = 1, gain 1); v2: d1 only
    assert report["old_idcg"].to_list() == pytest.approx([3.0, 3 + 1 * INV_LOG2_3])
    assert report["new_idcg"].to_list() == pytest.approx([1.0, 1.0])


def test_beir_judgments_given_as_the_dataset_directory():
    """The documented BEIR form: `path:` is the dataset directory; its qrels/test.tsv is read and hashed."""
    from releval.inputs.corpus import read_corpus, read_queries
    from support import TEST_DATA

    root = TEST_DATA / "corpus" / "beir"
    docs = read_corpus(root, "beir")
    query_ids = read_queries(root, "beir")["query_id"]
    active = jm.active_judgments({"format": "beir", "path": str(root), "version": "x"}, {}, docs, query_ids)
    assert active.qrels.sort("query_id", "doc_id").rows() == [
        ("q-1", "doc-a", 2),
        ("q-1", "doc-c", 0),
        ("q-2", "doc-b", 1),
    ]
    qrels_file = root / "qrels" / "test.tsv"
    assert active.provenance["source_sha256"] == hashlib.sha256(qrels_file.read_bytes()).hexdigest()
