"""Evaluation cards and observations: derivation, strict validation, refusal to rank across cards."""

import copy
import json
import re

import polars as pl
import pytest

from releval.provenance import card as cards
from releval.errors import InputError, InputErrors
from support import ROOT
from support.commands import run
from support.projects import copy_project
from support.pydocs_mini import regrade_one_judgment

CONTRACT = {
    "aggregation": "arithmetic mean over evaluated queries",
    "collapse": "first",
    "dataset": "toy",
    "discount": "log2(rank+1)",
    "gain": "exponential",
    "holdout_queries_sealed": 1,
    "idcg": "all judged docs of the query by grade, cut at k",
    "judgments_sha256": "a" * 64,
    "judgments_version": "v1",
    "metrics": ["ndcg@10", "recall@100", "judged@10"],
    "missing_in_run": "zero",
    "no_relevant": "exclude",
    "primary": "ndcg@10",
    "queries": 3,
    "rel_threshold": 2,
    "split": "dev",
    "ties": "docid-asc",
    "unjudged": "grade 0",
}
DOCS = pl.DataFrame({"doc_id": ["d1", "d2"], "title": ["", ""], "text": ["alpha", "beta"], "sha256": ["s1", "s2"]})
QUERIES = pl.DataFrame(
    {"query_id": ["q1", "q2", "q3", "q4"], "text": ["a", "b", "c", "d"], "split": ["dev", "dev", "dev", "holdout"]}
)
QRELS = pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", "d2"], "grade": [2, 1]})
PROTOCOL = {
    "query_prompt": "",
    "document_prompt": "",
    "normalize": True,
    "max_seq_length": 256,
    "dtype": "float32",
    "trust_remote_code": False,
}


def make_card(contract=None, judgments_meta=None, queries=QUERIES, docs=DOCS, **extra):
    contract = contract or CONTRACT
    meta = judgments_meta or {
        "version": "v1",
        "source": "data/judgments/v1",
        "source_sha256": "a" * 64,
        "scale": {"0": "nothing", "1": "pointer", "2": "substantial", "3": "answers"},
        "annotators": ["alice", "bob"],
        "aggregation": "lower median of the annotators' grades",
        "rubric": "RUBRIC.md",
        "counts": {"judgments": 2},
    }
    return cards.build_card(
        contract=contract,
        dataset={"name": "toy"},
        judgments_params={"format": "releval", "version": "v1"},
        judgments_meta=meta,
        corpus={
            "id": "toy",
            "source": "corpus.jsonl",
            "format": "jsonl",
            "content_sha256": cards.corpus_content_sha256(docs),
            "documents": docs.height,
        },
        queries={
            "id": "toy",
            "source": "queries.jsonl",
            "format": "releval",
            "content_sha256": cards.queries_content_sha256(queries),
            "total": queries.height,
            "splits": {"dev": 3, "holdout": 1},
        },
        qrels_sha256=cards.qrels_content_sha256(QRELS),
        models={
            "minilm": {**PROTOCOL, "asymmetric": False, "batch_size": 32},
            "e5": {**PROTOCOL, "query_prompt": "query: ", "document_prompt": "passage: ", "asymmetric": True},
        },
        slices={"howto": 2},
        holdout={
            "openings": 0,
            "last_opening": None,
            "holdout_queries": 1,
            "sealed_queries": 1,
            "log": "reports/holdout_access.jsonl",
        },
        code={"commit": "0" * 40, "dirty": False, "dirty_paths": []},
        rubric={"path": "data/judgments/v1/RUBRIC.md", "sha256": "b" * 64, "summary": "Grade what the user can do."},
        **extra,
    )


def observe(card, config_id, ndcg, model="minilm", prompt="", kind="dense"):
    protocol = {**PROTOCOL, "query_prompt": prompt}
    models = {model: {"revision": "r1", "weights_sha256": "c" * 64, "protocol": protocol}}
    scores = {
        "ndcg@10": ndcg,
        "recall@100": 0.9,
        "judged@10": 0.4,
        "ops": {
            "chunks_per_s": 10.0,
            "dimension": 384,
            "index_bytes": 1000,
            "latency_ms_p95": 5.0,
            "truncation_rate": 0.1,
        },
        "counts": {"queries_evaluated": 3},
        "slices": {"howto": {"queries": 2, "mean": {"ndcg@10": ndcg / 2}}},
    }
    lineage = {"models": models, "inputs": [], "run_dir": f"data/work/runs/{config_id}", "run_sha256": "d" * 64}
    return cards.build_observation(card, config_id, scores, lineage, {"kind": kind, "model": model, "chunking": "c256"})


# --------------------------------------------------------------------------- the card


def test_the_card_is_derived_and_validates_after_a_json_round_trip():
    card = make_card()
    cards.validate_card(card)
    again = json.loads(json.dumps(card))
    cards.validate_card(again)
    assert card["queries"]["count"] == 3 and card["queries"]["split"] == "dev"
    assert card["queries"]["version"] == "sha256:" + card["queries"]["content_sha256"][:12]
    assert card["contract"]["k"] == [10, 100]
    assert card["contract"]["policies"]["ties"] == "docid-asc"
    relevance = card["judgments"]["relevance"]
    assert relevance["threshold"] == 2
    assert "2 (substantial), 3 (answers) count as relevant" in relevance["definition"]
    assert "0 (nothing), 1 (pointer) do not" in relevance["definition"]
    assert "Grade what the user can do." in relevance["definition"]
    assert "alice, bob" in card["judgments"]["label_source"]
    assert card["representation_protocol"]["declared"]["e5"]["query_prompt"] == "query: "
    assert card["holdout"] == {
        "scored": False,
        "holdout_queries": 1,
        "sealed_queries": 1,
        "openings": 0,
        "last_opening": None,
        "log": "reports/holdout_access.jsonl",
    }


def test_content_hashes_ignore_row_order_but_not_content():
    assert cards.corpus_content_sha256(DOCS) == cards.corpus_content_sha256(DOCS.reverse())
    changed = DOCS.with_columns(pl.Series("sha256", ["s1", "s2-edited"]))
    assert cards.corpus_content_sha256(changed) != cards.corpus_content_sha256(DOCS)
    moved = QUERIES.with_columns(pl.Series("split", ["dev", "dev", "holdout", "holdout"]))
    assert cards.queries_content_sha256(moved) != cards.queries_content_sha256(QUERIES)
    regraded = QRELS.with_columns(pl.Series("grade", [2, 2]))
    assert cards.qrels_content_sha256(regraded) != cards.qrels_content_sha256(QRELS)


def test_validation_reports_every_problem_with_its_path():
    card = make_card()
    broken = copy.deepcopy(card)
    del broken["corpus"]["documents"]
    broken["queries"]["split"] = "test"
    broken["judgments"]["relevance"]["threshold"] = "2"
    broken["slices"]["howto"] = True
    broken["surprise"] = 1
    with pytest.raises(InputErrors) as err:
        cards.validate_card(broken, "reports/card.json")
    fields = {e.field for e in err.value.errors}
    assert fields == {"corpus.documents", "queries.split", "judgments.relevance.threshold", "slices.howto", "surprise"}
    assert all(e.file == "reports/card.json" for e in err.value.errors)


def test_a_hand_edited_card_is_caught_by_its_id():
    card = make_card()
    card["judgments"]["version"] = "v2"
    with pytest.raises(InputError, match="card_id"):
        cards.validate_card(card)


def test_the_card_id_follows_what_decides_comparability_only():
    base = make_card()
    assert make_card()["card_id"] == base["card_id"]
    later_code = make_card()
    later_code["code"]["commit"] = "1" * 40
    assert cards.card_id(later_code) == base["card_id"]  # a new commit alone does not change the evaluation
    assert make_card(contract={**CONTRACT, "gain": "linear"})["card_id"] != base["card_id"]
    assert (
        make_card(queries=QUERIES.with_columns(pl.Series("text", ["a", "b", "c", "z"])))["card_id"] != base["card_id"]
    )


# --------------------------------------------------------------------------- observations and ranking


def test_observations_validate_and_state_the_protocol_they_ran_under():
    card = make_card()
    obs = observe(card, "e5/c256", 0.6, model="e5", prompt="query: ")
    cards.validate_observation(obs)
    cards.validate_observations({"card_id": card["card_id"], "observations": [obs]}, card)
    assert obs["protocol_applied"]["e5"] == {
        "query_prompt": "query: ",
        "document_prompt": "",
        "normalize": True,
        "max_seq_length": 256,
        "role": "first-stage",
        "truncation_rate": 0.1,
        "truncated_token_share": None,
    }
    assert obs["ops"]["memory_bytes"] is None and obs["ops"]["max_seq_length"] == 256
    assert obs["scores"]["slices"]["howto"] == {"queries": 2, "mean": {"ndcg@10": 0.3}}
    bad = copy.deepcopy(obs)
    bad["ops"]["dimension"] = "384"
    bad["scores"]["overall"]["ndcg@10"] = float("nan")
    with pytest.raises(InputErrors) as err:
        cards.validate_observation(bad)
    assert {e.field for e in err.value.errors} == {"ops.dimension", "scores.overall.ndcg@10"}


def test_a_reranker_is_named_as_such_and_carries_no_truncation_rate():
    card = make_card()
    obs = cards.build_observation(
        card,
        "minilm/c256+rerank(e5)",
        {"ndcg@10": 0.5, "ops": {"truncation_rate": 0.2}, "counts": {}},
        {
            "models": {
                "minilm": {"revision": "r", "weights_sha256": "w", "protocol": PROTOCOL},
                "e5": {"revision": "r", "weights_sha256": "v", "protocol": {**PROTOCOL, "query_prompt": "query: "}},
            },
            "inputs": ["minilm/c256"],
            "run_dir": "x",
            "run_sha256": "y",
        },
        {"kind": "reranked", "model": "minilm", "reranker": {"name": "e5", "model": "e5"}},
    )
    cards.validate_observation(obs)
    assert obs["protocol_applied"]["e5"]["role"] == "reranker"
    assert obs["protocol_applied"]["e5"]["truncation_rate"] is None
    assert obs["protocol_applied"]["minilm"]["truncation_rate"] == 0.2


def test_models_with_different_prompts_under_one_card_are_ranked():
    card = make_card()
    observations = [observe(card, "minilm/c256", 0.5), observe(card, "e5/c256", 0.6, model="e5", prompt="query: ")]
    ranked = cards.rank_observations(observations, [card], "ndcg@10")
    assert [r.config_id for r in ranked] == ["e5/c256", "minilm/c256"]
    assert [r.value for r in ranked] == [0.6, 0.5]


def test_ranking_across_cards_is_refused_naming_every_differing_field():
    card_a = make_card()
    other_queries = QUERIES.with_columns(pl.Series("text", ["a", "b", "c", "changed"]))
    card_b = make_card(
        contract={**CONTRACT, "judgments_version": "v2", "gain": "linear"},
        judgments_meta={"version": "v2", "source_sha256": "e" * 64, "scale": {}},
        queries=other_queries,
    )
    observations = [observe(card_a, "minilm/c256", 0.5), observe(card_b, "e5/c256", 0.6)]
    with pytest.raises(cards.CardMismatch) as err:
        cards.rank_observations(observations, [card_a, card_b], "ndcg@10")
    named = " ".join(err.value.differences)
    for field in (
        "judgments.version",
        "judgments.sha256",
        "queries.content_sha256",
        "contract.gain",
        "contract.judgments_version",
    ):
        assert field in named, field
    assert "corpus.content_sha256" not in named  # same corpus: not named
    assert "'v1' vs 'v2'" in str(err.value)


def test_ranking_needs_the_cards_and_the_metric():
    card = make_card()
    obs = observe(card, "minilm/c256", 0.5)
    with pytest.raises(InputError, match="unknown card"):
        cards.rank_observations([obs], [], "ndcg@10")
    with pytest.raises(InputError, match="no map score"):
        cards.rank_observations([obs], [card], "map")
    edited = copy.deepcopy(card)
    edited["queries"]["count"] = 99
    with pytest.raises(InputError, match="edited by hand"):
        cards.rank_observations([obs], [edited], "ndcg@10")
    assert cards.rank_observations([], [card], "ndcg@10") == []


def test_an_observations_file_under_another_card_is_refused():
    card = make_card()
    other = make_card(contract={**CONTRACT, "rel_threshold": 1})
    doc = {"card_id": card["card_id"], "observations": [observe(other, "minilm/c256", 0.5)]}
    with pytest.raises(InputErrors) as err:
        cards.validate_observations(doc, card)
    assert any("observations[0].card_id" == e.field for e in err.value.errors)


def test_slice_means_and_the_markdown_summary():
    per_query = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "ndcg@10": [1.0, 0.5, 0.0]})
    means = cards.slice_means(per_query, {"howto": ["q1", "q2"], "rare": ["q9"]}, ["ndcg@10"])
    assert means == {"howto": {"queries": 2, "mean": {"ndcg@10": 0.75}}, "rare": {"queries": 0, "mean": {}}}
    text = cards.card_markdown(make_card())
    assert make_card()["card_id"] in text and "howto (2)" in text and "sealed (not scored)" in text


def test_the_cards_code_state_is_about_the_inputs_not_the_outputs_being_written(tmp_path):
    """Clean while the report stage writes reports/, dvc.lock and the archive; the commit stays the
    one whose inputs made the results when a later commit only adds those results."""
    from releval.reporting.card_inputs import code_state

    repo = tmp_path / "repo"
    for path in ("stages/s.py", "conf/config.yaml", "params.yaml", "data/judgments/v2/judgments.jsonl"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("1\n")
    run(["git", "init", "-q"], repo)
    run(["git", "add", "-A"], repo)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "inputs"], repo)
    inputs = run(["git", "rev-parse", "HEAD"], repo).stdout.strip()
    (repo / "dvc.lock").write_text("stages:\n  x:\n    outs:\n    - path: data/other/out.bin\n      md5: '1'\n")
    for path in ("reports/card.json", "data/archive/index/p.parquet", "data/other/out.bin", "data/.gitignore"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("written\n")
    assert code_state(repo) == {"commit": inputs, "dirty": False, "dirty_paths": []}
    run(["git", "add", "-A"], repo)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results"], repo)
    assert code_state(repo)["commit"] == inputs  # a clone of the results commit says the same
    (repo / "data" / "judgments" / "v2" / "judgments.jsonl").write_text("2\n")
    assert code_state(repo) == {"commit": inputs, "dirty": True, "dirty_paths": ["data/judgments/v2/judgments.jsonl"]}


# --------------------------------------------------------------------------- on a real pipeline


def _corpus_documents(project) -> int:
    """Documents in the project's corpus file, counted from the input itself."""
    import gzip

    with gzip.open(project / "data" / "pydocs" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip())


@pytest.mark.slow
def test_report_stage_writes_valid_card_and_observations_and_refuses_cross_card_ranking(default_project, tmp_path):
    base = default_project
    card = json.loads((base / "reports" / "card.json").read_text())
    observations = json.loads((base / "reports" / "observations.json").read_text())
    cards.validate_card(card)
    cards.validate_observations(observations, card)
    metrics = json.loads((base / "reports" / "metrics.json").read_text())
    assert {o["config_id"] for o in observations["observations"]} == set(metrics["configs"])
    assert card["corpus"]["documents"] == _corpus_documents(base)
    assert card["queries"]["count"] == metrics["contract"]["queries"]
    assert card["judgments"]["version"] == "v2"
    head = run(["git", "rev-parse", "HEAD~1"], base).stdout.strip()  # the commit the repro ran on
    assert card["code"] == {"commit": head, "dirty": False, "dirty_paths": []}
    by_id = {o["config_id"]: o for o in observations["observations"]}
    # e5small runs with a query prompt, minilm without: a legitimate protocol difference under one card
    assert by_id["e5small/c256"]["protocol_applied"]["e5small"]["query_prompt"] == "query: "
    assert by_id["minilm/c256"]["protocol_applied"]["minilm"]["query_prompt"] == ""
    ranked = cards.rank_observations(observations["observations"], [card], "ndcg@10")
    assert len(ranked) == len(metrics["configs"])

    # Regrade one judgment and rerun: a new card; ranking old and new observations together is refused.
    project = copy_project(default_project, tmp_path / "regraded")
    regrade_one_judgment(project)
    run(["dvc", "repro"], project)
    new_card = json.loads((project / "reports" / "card.json").read_text())
    new_observations = json.loads((project / "reports" / "observations.json").read_text())["observations"]
    assert new_card["card_id"] != card["card_id"]
    mixed = [by_id["minilm/c256"], next(o for o in new_observations if o["config_id"] == "bm25/c256")]
    with pytest.raises(cards.CardMismatch) as err:
        cards.rank_observations(mixed, [card, new_card], "ndcg@10")
    assert any(d.startswith("judgments.sha256") for d in err.value.differences)
    assert any(d.startswith("judgments.qrels_sha256") for d in err.value.differences)
    assert not any(d.startswith("corpus.") for d in err.value.differences)


# --------------------------------------------------------------------------- the stage, on a tiny scored repository


def tiny_scored_repo(root):
    """What `dvc repro` leaves before the report stage, for 2 configurations over 5 queries of
    which one is sealed holdout, with slices; no DVC needed."""
    import shutil

    from releval import io
    from releval.measurement import holdout
    from releval.retrieval import runs
    from releval.measurement.metrics import Contract, evaluate

    work = root / "data" / "work"
    work.mkdir(parents=True)
    docs = pl.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(8)],
            "title": [""] * 8,
            "text": [f"text {i}" for i in range(8)],
            "sha256": [f"h{i}" for i in range(8)],
        }
    )
    queries = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(5)],
            "text": [f"query {i}" for i in range(5)],
            "split": ["dev", "dev", "dev", "dev", "holdout"],
            "slices": [["howto"], ["howto", "rare"], [], ["rare"], ["howto"]],
            "must_never_break": [False] * 5,
        }
    )
    qrels = pl.DataFrame(
        {
            "query_id": ["q0", "q1", "q1", "q2", "q3", "q4"],
            "doc_id": ["d0", "d1", "d2", "d3", "d4", "d5"],
            "grade": [2, 1, 3, 2, 1, 2],
        }
    )
    docs.write_parquet(work / "docs.parquet")
    queries.write_parquet(work / "queries.parquet")
    qrels.write_parquet(work / "qrels.parquet")
    (root / "qrels.txt").write_text("whatever\n")
    (work / "judgments.json").write_text(
        json.dumps(
            {
                "version": "v1",
                "source": "qrels.txt",
                "source_sha256": io.sha256_file(root / "qrels.txt"),
                "scale": {"0": "nothing", "1": "pointer", "2": "substantial", "3": "answers"},
                "counts": {"judgments": 6},
            }
        )
    )
    metrics = ["ndcg@10", "recall@100", "hit@10", "judged@10"]
    contract = Contract()
    scored = holdout.select_queries(queries)
    dev_ids = scored["query_id"].to_list()
    slices = {q: s for q, s in scored.select("query_id", "slices").iter_rows() if len(s)}
    configs, lineage, per_query = {}, {}, []
    for cid, kind, shift in (("m/c1", "dense", 0), ("bm25/c1", "bm25", 3)):
        rows = [
            (q, f"d{(int(q[1]) + j + shift) % 8}#0-4", f"d{(int(q[1]) + j + shift) % 8}", 1.0 - j / 10, j + 1)
            for q in queries["query_id"].to_list()
            for j in range(6)
        ]
        run = pl.DataFrame(rows, schema=runs.RUN_SCHEMA, orient="row")
        run_dir = work / "runs" / kind / "c1"
        models = (
            {
                "m": {
                    "revision": "r1",
                    "weights_sha256": "w" * 64,
                    "protocol": {
                        "query_prompt": "q: ",
                        "document_prompt": "",
                        "normalize": True,
                        "max_seq_length": 128,
                        "dtype": "float32",
                        "trust_remote_code": False,
                    },
                }
            }
            if kind == "dense"
            else {}
        )
        ops = (
            {
                "chunks_per_s": 50.0,
                "dimension": 8,
                "index_bytes": 4096,
                "latency_ms_p50": 1.0,
                "latency_ms_p95": 2.0,
                "truncation_rate": 0.25,
            }
            if kind == "dense"
            else {"index_bytes": 1024}
        )
        runs.write_run(
            run_dir,
            run,
            {
                "config_id": cid,
                "kind": kind,
                "model": "m" if kind == "dense" else None,
                "chunking": "c1",
                "inputs": [],
                "ops": ops,
                "models": models,
            },
        )
        doc_run = holdout.restrict(runs.collapse_to_documents(run), dev_ids)
        evaluation = evaluate(
            holdout.restrict(qrels, dev_ids),
            doc_run.select("query_id", "doc_id", "score"),
            metrics,
            contract,
            slices=slices,
        )
        configs[cid] = {**evaluation.mean, "ops": ops, "counts": evaluation.counts, "slices": evaluation.slices}
        lineage[cid] = {
            "models": models,
            "inputs": [],
            "run_dir": str(run_dir.relative_to(root)),
            "run_sha256": io.sha256_file(run_dir / "run.parquet"),
        }
        per_query.append(evaluation.per_query.with_columns(pl.lit(cid).alias("config_id")))
    full = {
        **contract.to_dict(),
        "metrics": metrics,
        "primary": "ndcg@10",
        "collapse": "first",
        "dataset": "tiny",
        "judgments_version": "v1",
        "judgments_sha256": "x",
        "queries": 4,
        "split": "dev",
        "holdout_queries_sealed": 1,
    }
    reports = root / "reports"
    reports.mkdir()
    (reports / "metrics.json").write_text(json.dumps({"contract": full, "configs": configs}))
    (reports / "lineage.json").write_text(json.dumps(lineage))
    pl.concat(per_query).select("config_id", pl.exclude("config_id")).write_parquet(reports / "per_query.parquet")
    holdout.append_opening(
        reports / "holdout_access.jsonl",
        holdout.opening(["m/c1"], "python stages/score.py --split holdout", who="Ada", when="2026-11-01T09:00:00Z"),
    )
    (root / "params.yaml").write_text(
        json.dumps(
            {
                "dataset": {
                    "name": "tiny",
                    "corpus": {"path": "corpus.jsonl", "format": "jsonl"},
                    "queries": {"path": "queries.jsonl", "format": "releval"},
                    "subset": {"docs": None},
                },
                "judgments": {"version": "v1", "path": "qrels.txt", "format": "trec"},
                "models": {
                    "m": {"query_prompt": "q: ", "document_prompt": "", "normalize": True, "max_seq_length": 128}
                },
                "grid": {"baseline": "m/c1"},
            }
        )
    )
    shutil.copytree(ROOT / "dvc_plots", root / "dvc_plots")
    return root


def test_report_stage_on_a_tiny_repository_with_holdout_and_slices(tmp_path):
    import subprocess
    import sys

    root = tiny_scored_repo(tmp_path)
    result = subprocess.run(
        [sys.executable, str(ROOT / "stages" / "report.py"), "--resamples", "200"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    card = json.loads((root / "reports" / "card.json").read_text())
    cards.validate_card(card)
    assert card["queries"]["count"] == 4 and card["queries"]["splits"] == {"dev": 4, "holdout": 1}
    assert card["slices"] == {"howto": 2, "rare": 2}  # over the scored (dev) queries only
    assert card["holdout"]["openings"] == 1 and card["holdout"]["last_opening"]["who"] == "Ada"
    assert card["holdout"]["sealed_queries"] == 1 and card["holdout"]["scored"] is False
    assert card["code"]["commit"] is None  # not a git repository: said so, not invented
    observations = json.loads((root / "reports" / "observations.json").read_text())
    cards.validate_observations(observations, card)
    dense = next(o for o in observations["observations"] if o["config_id"] == "m/c1")
    assert dense["protocol_applied"]["m"]["query_prompt"] == "q: " and dense["ops"]["truncation_rate"] == 0.25
    assert set(dense["scores"]["slices"]) == {"howto", "rare"}
    report = (root / "reports" / "report.md").read_text()
    assert "| configuration | howto (2) | rare (2) |" in report
    assert "opened 1 time(s); last 2026-11-01T09:00:00Z by Ada" in report
    assert "25.0% of chunks were truncated at m's max_seq_length (128 tokens)" in report
    assert "1. candidate bm25/c1 vs baseline m/c1" in report
    assert "q4" not in report.split("## Worst queries")[1].split("## Evaluation card")[0]  # holdout stays sealed
    page = (root / "reports" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4
    per_query_view = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page.split('id="per-query"')[1])
    assert "q4" not in per_query_view  # the holdout stays sealed on the page too
