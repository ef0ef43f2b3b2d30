"""Cohen's kappa (unweighted, linearly weighted): by hand, against statsmodels, and the CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from releval.judging.agreement import agreement, common_chars, confusion_matrix, kappas, merged_ranges, span_agreement
from releval.cli import main
from releval.errors import InputError
from releval.judging.judgments import Manifest


def table(grades: list[int], *, ids: list[str] | None = None) -> pl.DataFrame:
    ids = ids or [f"d{i}" for i in range(len(grades))]
    return pl.DataFrame(
        {"query_id": ["q1"] * len(grades), "doc_id": ids, "grade": grades},
        schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64},
    )


def test_a_hand_computed_example():
    # A: 0 0 1 2 2 ; B: 0 1 1 2 0 over scale 0..2
    result = agreement(table([0, 0, 1, 2, 2]), table([0, 1, 1, 2, 0]), scale=[0, 1, 2])
    assert result.shared_pairs == 5
    assert result.confusion.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 1]]
    # p_o = 3/5; marginals A (2,1,2)/5, B (2,2,1)/5; p_e = (4 + 2 + 2)/25 = 8/25
    assert result.raw == pytest.approx(3 / 5)
    assert result.kappa == pytest.approx((3 / 5 - 8 / 25) / (1 - 8 / 25))  # = 7/17
    # disagreement weights |i-j|/2; observed: (0,1) 1/2, (2,0) 1 -> (0.5 + 1)/5 = 0.3
    # expected: sum_ij w_ij a_i b_j / 25 = [2*(2*.5 + 1*1) + 1*(2*.5 + 1*.5) + 2*(2*1 + 2*.5)]/25 = 11.5/25
    assert result.weighted_kappa == pytest.approx(1 - 0.3 / (11.5 / 25))


@pytest.mark.parametrize("seed", range(5))
def test_matches_statsmodels_on_random_data(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(30, 400))
    a = rng.integers(0, 4, n)
    b = np.clip(a + rng.integers(-2, 3, n), 0, 3)
    result = agreement(table(a.tolist()), table(b.tolist()), scale=[0, 1, 2, 3])
    # statsmodels: weights=None, wt=None is the simple kappa; wt="linear" uses scores 0..k-1.
    assert result.kappa == pytest.approx(cohens_kappa(result.confusion, return_results=False), abs=1e-9)
    assert result.weighted_kappa == pytest.approx(
        cohens_kappa(result.confusion, wt="linear", return_results=False), abs=1e-9
    )
    assert result.raw == pytest.approx(float(np.mean(a == b)), abs=1e-12)


def test_matches_sklearn_when_installed():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(11)
    a = rng.integers(0, 3, 250)
    b = np.where(rng.random(250) < 0.6, a, rng.integers(0, 3, 250))
    result = agreement(table(a.tolist()), table(b.tolist()), scale=[0, 1, 2])
    assert result.weighted_kappa == pytest.approx(
        sklearn_metrics.cohen_kappa_score(a, b, weights="linear", labels=[0, 1, 2]), abs=1e-9
    )
    assert result.kappa == pytest.approx(sklearn_metrics.cohen_kappa_score(a, b, labels=[0, 1, 2]), abs=1e-9)


def test_weights_use_grade_values_on_a_scale_with_a_gap():
    rng = np.random.default_rng(3)
    grades = np.array([0, 1, 3])
    a = grades[rng.integers(0, 3, 200)]
    b = grades[rng.integers(0, 3, 200)]
    result = agreement(table(a.tolist()), table(b.tolist()), scale=[0, 1, 3])
    expected = cohens_kappa(result.confusion, weights=grades, wt="linear", return_results=False)
    assert result.weighted_kappa == pytest.approx(expected, abs=1e-9)
    positional = cohens_kappa(result.confusion, wt="linear", return_results=False)
    assert result.weighted_kappa != pytest.approx(positional, abs=1e-6)


def test_unused_scale_grades_count_in_the_distances():
    a, b = table([0, 1, 1, 0]), table([1, 1, 0, 0])
    narrow = agreement(a, b)
    wide = agreement(a, b, scale=[0, 1, 2, 3])
    assert narrow.categories == (0, 1) and wide.categories == (0, 1, 2, 3)
    assert narrow.kappa == pytest.approx(wide.kappa)
    assert narrow.weighted_kappa == pytest.approx(narrow.kappa)  # two categories: weights are 0/1
    assert wide.weighted_kappa == pytest.approx(
        cohens_kappa(wide.confusion, wt="linear", return_results=False), abs=1e-12
    )


def test_only_shared_pairs_count():
    a = table([2, 2, 0], ids=["d1", "d2", "d3"])
    b = table([2, 1], ids=["d2", "d9"])
    result = agreement(a, b, scale=[0, 1, 2])
    assert (result.shared_pairs, result.only_a, result.only_b) == (1, 2, 1)
    assert result.confusion.sum() == 1 and result.raw == 1.0
    assert result.kappa is None  # one pair, one grade: chance agreement is 1, kappa is 0/0


def test_no_shared_pairs_and_off_scale_grades_are_errors():
    with pytest.raises(InputError, match="no shared pairs"):
        agreement(table([1], ids=["x"]), table([1], ids=["y"]))
    with pytest.raises(InputError, match="not on the scale"):
        agreement(table([5]), table([1]), scale=[0, 1, 2])


def test_perfect_agreement_is_one():
    result = agreement(table([0, 1, 2, 2]), table([0, 1, 2, 2]))
    assert result.kappa == pytest.approx(1.0) and result.weighted_kappa == pytest.approx(1.0)


def test_kappas_and_confusion_matrix_directly():
    matrix = confusion_matrix([0, 1, 1], [1, 1, 0], [0, 1])
    assert matrix.tolist() == [[0, 1], [1, 1]]
    raw, kappa, weighted = kappas(matrix, [0, 1])
    assert raw == pytest.approx(1 / 3) and kappa == pytest.approx(cohens_kappa(matrix, return_results=False))
    with pytest.raises(InputError):
        kappas(np.zeros((2, 2)), [0, 1])


# --------------------------------------------------------------------------- CLI


def write_set(root: Path, name: str, rows: list[tuple], annotators: tuple[str, ...]) -> Path:
    """A set of (query_id, doc_id, grade, annotator[, evidence]) rows."""
    directory = root / name
    directory.mkdir(parents=True)
    data = "".join(
        json.dumps({"query_id": q, "doc_id": d, "grade": g, "annotator": a, **({"evidence": e[0]} if e else {})}) + "\n"
        for q, d, g, a, *e in rows
    ).encode()
    (directory / "judgments.jsonl").write_bytes(data)
    (directory / "RUBRIC.md").write_text("rubric\n")
    manifest = Manifest(
        name,
        None,
        "2026-11-30",
        {0: "no", 1: "partly", 2: "yes"},
        "RUBRIC.md",
        annotators,
        hashlib.sha256(data).hexdigest(),
    )
    (directory / "manifest.yaml").write_text(manifest.to_yaml())
    return directory


ROWS = [
    ("q1", "d1", 2, "alice"),
    ("q1", "d1", 2, "bob"),
    ("q1", "d2", 0, "alice"),
    ("q1", "d2", 1, "bob"),
    ("q1", "d3", 1, "alice"),
    ("q1", "d3", 1, "bob"),
    ("q2", "d1", 0, "alice"),
    ("q2", "d1", 2, "bob"),
    ("q2", "d4", 2, "alice"),
]


def test_cli_one_set_two_annotators(tmp_path, capsys):
    directory = write_set(tmp_path, "v1", ROWS, ("alice", "bob"))
    assert main(["agreement", str(directory), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["shared_pairs"] == 4 and document["only_a"] == 1 and document["only_b"] == 0
    assert document["categories"] == [0, 1, 2]
    assert document["confusion"] == [[0, 1, 1], [0, 1, 0], [0, 0, 1]]
    expected = agreement(
        table([2, 0, 1, 0], ids=["a", "b", "c", "d"]), table([2, 1, 1, 2], ids=["a", "b", "c", "d"]), scale=[0, 1, 2]
    )
    assert document["linear_weighted_kappa"] == pytest.approx(expected.weighted_kappa)
    assert document["kappa"] == pytest.approx(expected.kappa) and document["raw_agreement"] == 0.5
    assert main(["agreement", str(directory), "--annotators", "alice,bob"]) == 0
    text = capsys.readouterr().out
    assert "shared pairs: 4" in text and "linear weighted kappa:" in text and "confusion matrix" in text


def test_cli_two_files(tmp_path, capsys):
    a = write_set(tmp_path, "va", [r for r in ROWS if r[3] == "alice"], ("alice",))
    b = write_set(tmp_path, "vb", [r for r in ROWS if r[3] == "bob"], ("bob",))
    assert main(["agreement", str(a / "judgments.jsonl"), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shared_pairs"] == 4


def test_cli_refuses_ambiguous_input(tmp_path, capsys):
    directory = write_set(tmp_path, "v1", ROWS + [("q3", "d1", 1, "carol")], ("alice", "bob", "carol"))
    assert main(["agreement", str(directory)]) == 2
    assert "3 annotators" in capsys.readouterr().err
    assert main(["agreement", str(directory), "--annotators", "alice,zed"]) == 2
    assert "no judgments by annotator 'zed'" in capsys.readouterr().err
    assert main(["agreement", str(directory), str(directory)]) == 2


# --------------------------------------------------------------------------- evidence spans (issue 31, item 3)


def spans_table(rows: list[tuple[str, str, list[dict] | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"query_id": q, "doc_id": d, "evidence": e} for q, d, e in rows],
        schema={
            "query_id": pl.Utf8,
            "doc_id": pl.Utf8,
            "evidence": pl.List(
                pl.Struct({"quote": pl.Utf8, "occurrence": pl.Int64, "start": pl.Int64, "end": pl.Int64})
            ),
        },
    )


def offsets(*ranges: tuple[int, int]) -> list[dict]:
    return [{"start": s, "end": e} for s, e in ranges]


def test_span_f1_by_hand():
    """(q1,d1): A [0,10) + [20,30), B [5,25): 10 characters in common of 20 and 20 -> F1 0.5.
    (q1,d2): the same 4 characters -> 1. (q1,d3): A [0,3), B [10,12): none in common -> 0.
    (q2,d1): only A marked; (q2,d2): neither; (q3,d1): judged by A alone, not shared.
    Micro F1 = 2 (10 + 4 + 0) / (20 + 20 + 4 + 4 + 3 + 2) = 28/53; the mean of the pairs' = 1.5/3."""
    a = spans_table(
        [
            ("q1", "d1", offsets((0, 10), (20, 30))),
            ("q1", "d2", offsets((0, 4))),
            ("q1", "d3", offsets((0, 3))),
            ("q2", "d1", offsets((0, 8))),
            ("q2", "d2", None),
            ("q3", "d1", offsets((0, 5))),
        ]
    )
    b = spans_table(
        [
            ("q1", "d1", offsets((5, 25))),
            ("q1", "d2", offsets((0, 2), (2, 4))),  # touching spans: the same 4 characters
            ("q1", "d3", offsets((10, 12))),
            ("q2", "d1", None),
            ("q2", "d2", None),
        ]
    )
    result = span_agreement(a, b)
    assert [(p.doc_id, p.chars_a, p.chars_b, p.overlap) for p in result.pairs] == [
        ("d1", 20, 20, 10),
        ("d2", 4, 4, 4),
        ("d3", 3, 2, 0),
    ]
    assert [p.f1 for p in result.pairs] == [0.5, 1.0, 0.0]
    assert result.micro_f1 == pytest.approx(28 / 53) and result.mean_f1 == pytest.approx(0.5)
    assert (result.only_a, result.only_b, result.neither) == (1, 0, 1)
    assert [(p.query_id, p.doc_id) for p in result.disjoint] == [("q1", "d3")]
    assert span_agreement(b, a).micro_f1 == result.micro_f1  # symmetric


def test_character_unions_against_sets_of_positions():
    rng = np.random.default_rng(5)
    for _ in range(300):
        a = [tuple(sorted(rng.integers(0, 60, 2))) for _ in range(rng.integers(0, 4))]
        b = [tuple(sorted(rng.integers(0, 60, 2))) for _ in range(rng.integers(0, 4))]
        a, b = [r for r in a if r[0] < r[1]], [r for r in b if r[0] < r[1]]
        chars_a = {i for s, e in a for i in range(s, e)}
        chars_b = {i for s, e in b for i in range(s, e)}
        merged_a, merged_b = merged_ranges(a), merged_ranges(b)
        assert sum(e - s for s, e in merged_a) == len(chars_a)
        assert common_chars(merged_a, merged_b) == len(chars_a & chars_b)


TEXT = "Use sorted(d.items()) to sort. Then print it. sorted(d.items()) again."


def test_cli_prints_span_agreement_beside_kappa_placing_anchors_in_the_corpus(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"_id": "d1", "title": "sorting", "text": TEXT})
        + "\n"
        + json.dumps({"_id": "d2", "text": "x y"})
        + "\n"
    )
    at = TEXT.index("sorted(d.items()) again")
    rows = [
        ("q1", "d1", 2, "alice", [{"quote": "sorted(d.items())", "occurrence": 2}]),  # [at, at + 17)
        ("q1", "d1", 2, "bob", [{"start": at, "end": at + 23}]),  # 17 of its 23 in common
        ("q1", "d2", 1, "alice", [{"quote": "x"}]),
        ("q1", "d2", 0, "bob"),
        ("q2", "d1", 0, "alice"),
        ("q2", "d1", 0, "bob"),
    ]
    directory = write_set(tmp_path, "v1", rows, ("alice", "bob"))
    assert main(["agreement", str(directory), "--annotators", "alice,bob", "--corpus", str(corpus)]) == 0
    text = capsys.readouterr().out
    assert "linear weighted kappa" in text
    assert "evidence spans: 1 of the 3 shared pairs have spans from both (from A only: 1, from B only: 0" in text
    assert f"micro-averaged: {2 * 17 / 40:.4f} (17 characters in common; A 17, B 23)" in text
    assert "pairs sharing no character: 0" in text and "q1     d1" in text
    assert main(["agreement", str(directory), "--corpus", str(corpus), "--json"]) == 0
    spans = json.loads(capsys.readouterr().out)["spans"]
    assert spans["pairs"] == [
        {"query_id": "q1", "doc_id": "d1", "chars_a": 17, "chars_b": 23, "overlap": 17, "f1": 34 / 40}
    ]
    assert (spans["only_a"], spans["only_b"], spans["neither"]) == (1, 0, 1)
    # Anchors need the corpus; without spans, nothing is said about them.
    assert main(["agreement", str(directory)]) == 2
    assert "--corpus FILE" in capsys.readouterr().err
    plain = write_set(tmp_path, "v2", ROWS, ("alice", "bob"))
    assert main(["agreement", str(plain)]) == 0 and "evidence spans" not in capsys.readouterr().out
