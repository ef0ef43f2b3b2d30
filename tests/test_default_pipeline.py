"""The shipped default configuration, end to end, with the repository alone.

A real `dvc repro` in a temporary git repository runs the default grid's shapes on a small cut
of the embedded pydocs data (`support.pydocs_mini.write_pydocs_mini`): both default models (MiniLM and
the e5-small the `model` stage converts), two chunkings, BM25, RRF, the e5 reranker, score with
the query splits and slices, archive, rescore, report; then audit checks every number. Nothing
here needs ../shared.
"""

import json
import os
import re
from pathlib import Path

import polars as pl
import pytest

from releval import paths
from releval.measurement import holdout
from support.commands import ran_stages, run
from support.projects import copy_project, output_bytes
from support.pydocs_mini import DEFAULT_MODELS, MINI_CONFIGS, mini_queries

pytestmark = pytest.mark.slow

SPLITS = {name: mini_queries(name) for name in ("dev", "holdout")}


def test_every_stage_of_the_default_grid_ran(default_project):
    log = (default_project.parent / "repro.log").read_text()
    ran = ran_stages(log)
    assert "is empty" not in log  # DVC's warning about an empty dependency (the holdout log)
    expected = {
        "params",
        "externals",  # records the declared external runs (none by default)
        "ingest",
        "queries",
        "judgments",
        "chunk@c256",
        "chunk@c512",
        "rerank@minilm-c256-e5",
        "fuse-runs@splade_minilm",
        "score",
        "archive",
        "rescore",
        "report",
    }
    expected |= {f"model@{m}" for m in DEFAULT_MODELS}
    expected |= {
        f"{stage}@{m}-{c}"
        for stage in ("encode", "index", "retrieve")
        for m in DEFAULT_MODELS
        for c in ("c256", "c512")
    }
    expected |= {f"bm25@{c}" for c in ("c256", "c512")}
    expected |= {f"fuse@rrf-{m}-{c}" for m in DEFAULT_MODELS for c in ("c256", "c512")}
    assert ran == expected
    assert run(["dvc", "status"], default_project).stdout.strip() == "Data and pipelines are up to date."


def test_scores_carry_the_default_contract_splits_and_slices(default_project):
    metrics = json.loads((default_project / "reports" / "metrics.json").read_text())
    assert set(metrics["configs"]) == MINI_CONFIGS
    contract = metrics["contract"]
    assert (contract["dataset"], contract["judgments_version"], contract["split"]) == ("pydocs", "v2", "dev")
    assert contract["queries"] == len(SPLITS["dev"]) and contract["holdout_queries_sealed"] == len(SPLITS["holdout"])
    for cid, row in metrics["configs"].items():
        assert 0.0 < row["ndcg@10"] <= 1.0, cid
        assert row["counts"]["queries_evaluated"] == len(SPLITS["dev"]), cid
        assert {"navigational", "paraphrase", "howto", "tail", "hard"} <= set(row["slices"]), cid
    per_query = pl.read_parquet(default_project / "reports" / "per_query.parquet")
    assert set(per_query["query_id"]) == SPLITS["dev"]
    assert set(per_query["config_id"]) == MINI_CONFIGS


def test_each_model_ran_under_its_declared_protocol(default_project):
    lineage = json.loads((default_project / "reports" / "lineage.json").read_text())
    e5 = lineage["e5small/c256"]["models"]["e5small"]["protocol"]
    assert (e5["query_prompt"], e5["document_prompt"], e5["max_seq_length"]) == ("query: ", "passage: ", 512)
    minilm = lineage["minilm/c256"]["models"]["minilm"]["protocol"]
    assert (minilm["query_prompt"], minilm["document_prompt"], minilm["max_seq_length"]) == ("", "", 256)
    reranked = lineage["minilm/c256+rerank(e5)"]["models"]
    assert set(reranked) == {"minilm", "e5small"}


def test_archive_and_rescore_keep_every_run_under_the_active_version(default_project):
    history = pl.read_parquet(default_project / "reports" / "history.parquet")
    assert set(history["config_id"]) == MINI_CONFIGS
    assert history["judgments_version"].unique().to_list() == ["v2"]
    idcg = (default_project / "reports" / "idcg_changes.md").read_text()
    # v1 → v2 regraded q020 and added q101; both are among the dev queries here.
    assert "q020" in idcg and "q101" in idcg


def test_report_card_and_audit_hold_on_the_default_grid(default_project):
    card = json.loads((default_project / "reports" / "card.json").read_text())
    assert card["judgments"]["version"] == "v2"
    observations = json.loads((default_project / "reports" / "observations.json").read_text())
    assert len(observations["observations"]) == len(MINI_CONFIGS)
    assert "minilm/c256" in (default_project / "reports" / "report.md").read_text()
    audit = run(["releval", "audit", "--all"], default_project, check=False)
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]


# --------------------------------------------------------------------------- the sealed holdout

# queries.parquet keeps every query's text and split (the holdout command reads it); holding a
# query's text is not holding its judgments or its results.
QUERY_TABLE = "data/work/queries.parquet"


def written_files(project: Path) -> list[Path]:
    """Every file the default stages wrote: data/work, data/archive, reports (the access log aside)."""
    roots = [project / "data" / "work", project / "data" / "archive", project / "reports"]
    found = [p for root in roots for p in root.rglob("*") if p.is_file()]
    return sorted(p for p in found if p.name != "holdout_access.jsonl")


# Outputs that hold numbers or pixels, never ids: vectors, the HNSW index, plot images. (Read as
# text, their bytes can spell an id by chance.) Every other file must be text or parquet.
BINARY_SUFFIXES = {".npy", ".usearch", ".png"}


def holdout_mentions(path: Path, holdout_ids: set[str]) -> list[str]:
    """Where a holdout query id appears in a written file (a parquet cell, or a word of text)."""
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        hits = []
        for column, dtype in frame.schema.items():
            if dtype == pl.Utf8:
                values = set(frame[column].drop_nulls().unique().to_list())
                hits += [f"{column}={v}" for v in sorted(values & holdout_ids)]
        return hits
    if path.suffix in BINARY_SUFFIXES:
        return []
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise AssertionError(f"{path}: a binary output of a kind this check does not read") from None
    words = set(re.findall(r"[A-Za-z0-9_]+", text))
    return sorted(words & holdout_ids)


def test_no_file_a_default_stage_writes_holds_a_holdout_judgment_or_run_line(default_project):
    files = written_files(default_project)
    names = {p.relative_to(default_project).as_posix() for p in files}
    # The check reaches the files that matter: judgments, runs, TREC exports, per-query scores.
    for must in (
        "data/work/qrels.parquet",
        "data/work/runs/bm25/c256/run.parquet",
        "data/work/runs/rerank/minilm-c256-e5/run.parquet",
        "data/work/trec/bm25__c256.trec",
        "reports/per_query.parquet",
        "reports/metrics.json",
        "reports/history.parquet",
        "reports/card.json",
        "reports/report.md",
    ):
        assert must in names, must
    assert any(n.startswith("data/archive/") for n in names)
    leaks = {
        p.relative_to(default_project).as_posix(): hits
        for p in files
        if p.relative_to(default_project).as_posix() != QUERY_TABLE and (hits := holdout_mentions(p, SPLITS["holdout"]))
    }
    assert leaks == {}
    # The checker itself finds holdout ids where they are: the query table holds them all.
    assert len(holdout_mentions(default_project / QUERY_TABLE, SPLITS["holdout"])) == len(SPLITS["holdout"])
    # The log holds no opening: nothing above opened it.
    assert holdout.read_log(default_project / "reports" / "holdout_access.jsonl") == []


@pytest.mark.heavy  # every stage script again on the holdout queries (about 80 s)
def test_opening_the_holdout_is_logged_first_then_scored_apart(default_project, tmp_path):
    project = copy_project(default_project, tmp_path / "opened")
    log = project / "reports" / "holdout_access.jsonl"
    # Killed at its very first write (the holdout judgments): the opening is already on record.
    killed = run(
        ["releval", "holdout"],
        project,
        check=False,
        env_extra={"RELEVAL_FAULT": "before-rename@holdout-opening/qrels.parquet"},
    )
    assert killed.returncode == 1
    entries = holdout.read_log(log)
    assert len(entries) == 1 and entries[0]["split"] == "holdout"
    assert set(entries[0]["configs"]) == MINI_CONFIGS and entries[0]["who"] == "releval tests"
    assert not (project / "reports" / "holdout").exists()
    # A whole opening: logged once more (one line per opening), scored into reports/holdout only.
    opened = run(["releval", "holdout"], project)
    assert "holdout opened" in opened.stdout
    assert len(holdout.read_log(log)) == 2
    metrics = json.loads((project / "reports" / "holdout" / "metrics.json").read_text())
    assert set(metrics["configs"]) == MINI_CONFIGS
    assert (metrics["contract"]["split"], metrics["contract"]["queries"]) == ("holdout", len(SPLITS["holdout"]))
    per_query = pl.read_parquet(project / "reports" / "holdout" / "per_query.parquet")
    assert set(per_query["query_id"]) == SPLITS["holdout"]
    # The default outputs are untouched and still sealed; the scratch folder is gone. Only the
    # report, which counts the openings on the card, is behind the log.
    assert not (project / "data" / "work" / "holdout-opening").exists()
    assert set(pl.read_parquet(project / "data" / "work" / "qrels.parquet")["query_id"]) <= SPLITS["dev"]
    assert ran_stages(run(["dvc", "repro"], project).stdout) == {"report"}
    card = json.loads((project / "reports" / "card.json").read_text())
    assert card["holdout"]["openings"] == 2 and card["holdout"]["sealed_queries"] == len(SPLITS["holdout"])


# --------------------------------------------------------------------------- faults at the write


# Machine figures (load, latency) are measured again by a rerun: the only files allowed to move.
MACHINE_FILES = {paths.OPS, paths.OPS_MD}


def assert_same_outputs(before: dict[str, bytes], after: dict[str, bytes]) -> None:
    assert sorted(after) == sorted(before)
    assert [name for name in before if after[name] != before[name] and name not in MACHINE_FILES] == []


@pytest.mark.parametrize(
    "stage, fault",
    [
        ("judgments", "before-rename@data/work/qrels.parquet"),
        ("score", "mid-write@reports/per_query.parquet"),
        ("score", "before-rename@reports/grid.md"),
    ],
)
def test_a_stage_killed_inside_the_writer_is_redone_byte_for_byte(default_project, tmp_path, stage, fault):
    project = copy_project(default_project, tmp_path / "faulted")
    before = output_bytes(project)
    killed = run(
        ["dvc", "repro", "--force", "--single-item", stage], project, check=False, env_extra={"RELEVAL_FAULT": fault}
    )
    assert killed.returncode != 0
    target = fault.split("@", 1)[1]
    leftovers = [p for p in (project / target).parent.glob(f".releval-tmp-{Path(target).name}.*")]
    assert leftovers, "the fault point was not reached inside the writer"
    if fault.startswith("mid-write"):
        assert 0 < leftovers[0].stat().st_size < len(before[target])
    status = run(["dvc", "status"], project).stdout
    assert stage in status  # DVC knows the stage did not finish
    # The next plain `dvc repro` completes (rerunning the stage, or restoring its cached outputs)...
    run(["dvc", "repro"], project)
    assert_same_outputs(before, output_bytes(project))
    assert run(["dvc", "status"], project).stdout.strip() == "Data and pipelines are up to date."
    # ...and running the stage itself again writes exactly those bytes.
    assert ran_stages(run(["dvc", "repro", "--force", "--single-item", stage], project).stdout) == {stage}
    assert_same_outputs(before, output_bytes(project))
    assert "RELEVAL_FAULT" not in os.environ
