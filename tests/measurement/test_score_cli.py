"""`releval score`: output shapes, bad input (exit 2), and trec_eval agreement on a real TREC run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from releval.cli import main
from support import TEST_DATA

DATA = TEST_DATA / "trec"
QRELS = DATA / "robust04-subset.qrels"
RUN = DATA / "robust04-rm3-subset.run"
COMPARED = {
    "ndcg@10": "ndcg_cut_10",
    "ndcg@100": "ndcg_cut_100",
    "map": "map",
    "map@10": "map_cut_10",
    "recall@100": "recall_100",
    "p@5": "P_5",
    "p@20": "P_20",
    "mrr": "recip_rank",
    "rprec": "Rprec",
    "hit@1": "success_1",
    "hit@10": "success_10",
}
TREC_EVAL_MEASURES = {
    "ndcg_cut.10,100",
    "map",
    "map_cut.10",
    "recall.100",
    "P.5,20",
    "recip_rank",
    "Rprec",
    "success.1,10",
}


def score(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["score", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def trec_eval(qrels_path: Path, run_path: Path) -> dict[str, dict[str, float]]:
    with open(qrels_path) as qrels_file, open(run_path) as run_file:
        qrels, run = pytrec_eval.parse_qrel(qrels_file), pytrec_eval.parse_run(run_file)
    return pytrec_eval.RelevanceEvaluator(qrels, TREC_EVAL_MEASURES).evaluate(run)


def assert_reproduces_trec_eval(document: dict, reference: dict[str, dict[str, float]]) -> None:
    assert set(document["per_query"]) == set(reference)
    for query, values in reference.items():
        for ours, theirs in COMPARED.items():
            assert document["per_query"][query][ours] == pytest.approx(values[theirs], abs=1e-9), (query, ours)
    for ours, theirs in COMPARED.items():
        expected = np.mean([values[theirs] for values in reference.values()])
        assert document["mean"][ours] == pytest.approx(expected, abs=1e-9), ours


def test_trec_eval_compat_reproduces_trec_eval_on_a_real_robust04_run(capsys):
    code, out, _ = score(
        capsys, "--qrels", QRELS, "--run", RUN, "--trec-eval-compat", "--per-query", "--metrics", ",".join(COMPARED)
    )
    assert code == 0
    document = json.loads(out)
    assert_reproduces_trec_eval(document, trec_eval(QRELS, RUN))
    counts = document["counts"]
    assert counts["queries_without_judgments_ids"] == ["672"]  # in the run, never judged: ignored
    assert counts["queries_missing_from_run_ids"] == ["673"]  # judged, not in the run: trec_eval skips it
    assert counts["queries_evaluated"] == 5


def test_trec_eval_compat_reproduces_trec_eval_with_tied_scores(capsys, tmp_path):
    rounded = tmp_path / "rounded.run"
    lines = []
    for line in RUN.read_text().splitlines():
        query, q0, doc, rank, value, tag = line.split()
        lines.append(f"{query} {q0} {doc} {rank} {float(value):.1f} {tag}")
    rounded.write_text("\n".join(lines) + "\n")
    code, out, _ = score(
        capsys, "--qrels", QRELS, "--run", rounded, "--trec-eval-compat", "--per-query", "--metrics", ",".join(COMPARED)
    )
    document = json.loads(out)
    assert code == 0 and document["counts"]["queries_with_tied_scores"]["@10"] == 5
    assert_reproduces_trec_eval(document, trec_eval(QRELS, rounded))


def test_default_contract_scores_missing_queries_zero(capsys):
    code, out, _ = score(capsys, "--qrels", QRELS, "--run", RUN, "--metrics", "ndcg@10,map", "--per-query")
    document = json.loads(out)
    assert code == 0
    assert document["contract"]["gain"] == "exponential" and document["contract"]["ties"] == "docid-asc"
    assert document["per_query"]["673"] == {"ndcg@10": 0.0, "map": 0.0}
    assert document["counts"]["queries_evaluated"] == 6
    values = [query["map"] for query in document["per_query"].values()]
    assert document["mean"]["map"] == pytest.approx(sum(values) / 6)


def test_json_output_shape(capsys):
    code, out, err = score(capsys, "--qrels", QRELS, "--run", RUN, "--metrics", "ndcg@10")
    document = json.loads(out)
    assert (code, err) == (0, "")
    assert set(document) == {"contract", "mean", "counts"}
    assert document["contract"]["metrics"] == ["ndcg@10"]
    for term in ("gain", "ties", "rel_threshold", "no_relevant", "missing_in_run", "discount"):
        assert term in document["contract"]


def test_contract_options_are_recorded(capsys):
    code, out, _ = score(
        capsys,
        "--qrels",
        QRELS,
        "--run",
        RUN,
        "--metrics",
        "p@10",
        "--gain",
        "linear",
        "--ties",
        "trec_eval",
        "--rel-threshold",
        "2",
        "--no-relevant",
        "zero",
        "--missing-in-run",
        "exclude",
    )
    contract = json.loads(out)["contract"]
    assert code == 0
    assert (
        contract["gain"],
        contract["ties"],
        contract["rel_threshold"],
        contract["no_relevant"],
        contract["missing_in_run"],
    ) == ("linear", "trec_eval", 2, "zero", "exclude")


def test_tsv_output(capsys):
    code, out, _ = score(
        capsys, "--qrels", QRELS, "--run", RUN, "--metrics", "ndcg@10,map", "--format", "tsv", "--per-query"
    )
    lines = out.splitlines()
    assert code == 0
    assert '# contract gain="exponential"' in lines and '# contract metrics=["ndcg@10", "map"]' in lines
    table = [line.split("\t") for line in lines if not line.startswith("#")]
    assert table[0] == ["query_id", "ndcg@10", "map"]
    assert [row[0] for row in table[1:]] == ["618", "653", "671", "673", "676", "692", "all"]


def test_output_file_is_written(capsys, tmp_path):
    target = tmp_path / "scores" / "result.json"
    code, out, _ = score(capsys, "--qrels", QRELS, "--run", RUN, "--metrics", "map", "--output", target)
    assert (code, out) == (0, "")
    assert json.loads(target.read_text())["contract"]["metrics"] == ["map"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--metrics", "ndcg@10,bogus@3"], "unknown metric 'bogus@3'"),
        (["--metrics", "ndcg@0"], "whole number > 0"),
        (["--rel-threshold", "0"], "field 'rel_threshold'"),
        (["--trec-eval-compat", "--gain", "exponential"], "field '--gain': 'exponential' contradicts"),
        (["--trec-eval-compat", "--ties", "docid-asc"], "field '--ties'"),
    ],
)
def test_bad_options_exit_2(capsys, args, message):
    code, out, err = score(capsys, "--qrels", QRELS, "--run", RUN, *args)
    assert (code, out) == (2, "")
    assert message in err


def test_bad_run_line_exits_2_naming_file_line_and_field(capsys, tmp_path):
    run = tmp_path / "run.txt"
    run.write_text("618 Q0 FBIS3-1 1 12.5 t\n618 Q0 FBIS3-2 2 twelve t\n")
    code, out, err = score(capsys, "--qrels", QRELS, "--run", run)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {run}:2: field 'score': expected a number")


def test_duplicate_qrels_line_exits_2(capsys, tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("618 0 FBIS3-1 1\n618 0 FBIS3-1 0\n")
    code, _, err = score(capsys, "--qrels", qrels, "--run", RUN)
    assert code == 2
    assert f"{qrels}:2: field 'doc_id': duplicate" in err and "lines 1 and 2" in err


def test_run_sharing_no_query_exits_2(capsys, tmp_path):
    run = tmp_path / "run.txt"
    run.write_text("999 Q0 FBIS3-1 1 1.0 t\n")
    code, _, err = score(capsys, "--qrels", QRELS, "--run", run, "--trec-eval-compat")
    assert code == 2 and "no query left to evaluate" in err
