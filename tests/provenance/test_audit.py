"""`releval audit`: lineage of a reported number, and verification of every link.

Fast tests run on a tiny hand-built repository (no DVC run); the slow ones audit the shipped
default grid run by `dvc repro` on the embedded pydocs data (tests/conftest.py's `default_project`: MiniLM
and e5-small, two chunkings, BM25, RRF, a reranked run, and the `report` stage), then tamper with
one input at a time in a private copy.
"""

import gzip
import json
import re
import shutil
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from support.commands import run
from support.projects import copy_project
from support.pydocs_mini import ACTIVE_JUDGMENTS, regrade_one_judgment
from releval import io
from releval.provenance import archive, audit
from releval.retrieval import runs
from releval.errors import InputError
from releval.measurement import scoring
from releval.measurement.metrics import Contract, evaluate

# --------------------------------------------------------------------------- the real project

CORPUS = Path("data") / "pydocs" / "corpus.jsonl.gz"


def sh(cmd, cwd, check=True):
    return run(cmd, Path(cwd), check=check)


def audit_cli(cwd, *args):
    return sh([sys.executable, "-m", "releval.cli", "audit", *args], cwd, check=False)


# --------------------------------------------------------------------------- a tiny repository


def tiny_repo(root: Path) -> Path:
    """reports + data/work + dvc.lock as the pipeline lays them out, for one dense run."""
    work = root / "data" / "work"
    run_dir = work / "runs" / "model" / "m" / "c1"
    qrels = pl.DataFrame({"query_id": ["1", "1", "2", "3"], "doc_id": ["a", "b", "c", "a"], "grade": [2, 1, 3, 1]})
    queries = pl.DataFrame({"query_id": ["1", "2", "3"], "text": ["x", "y", "z"]})
    chunk_run = pl.DataFrame(
        {
            "query_id": ["1", "1", "1", "2", "2", "3", "3"],
            "chunk_id": ["b#0-9", "a#0-9", "a#9-20", "c#0-5", "a#0-9", "b#0-9", "a#9-20"],
            "doc_id": ["b", "a", "a", "c", "a", "b", "a"],
            "score": [0.9, 0.8, 0.95, 0.3, 0.7, 0.5, 0.4],  # a#9-20 outscores a#0-9 but ranks below it
            "rank": [1, 2, 3, 2, 1, 1, 2],
        },
        schema=runs.RUN_SCHEMA,
    )
    work.mkdir(parents=True)
    qrels.write_parquet(work / "qrels.parquet")
    queries.write_parquet(work / "queries.parquet")
    runs.write_run(
        run_dir,
        chunk_run,
        {
            "config_id": "m/c1",
            "kind": "dense",
            "model": "m",
            "chunking": "c1",
            "inputs": [],
            "ops": {"latency_ms_p95": 1.5},
            "models": {"m": {"revision": "r", "weights_sha256": "w", "protocol": {}}},
        },
    )
    (root / "qrels.txt").write_text("1 a 2\n1 b 1\n2 c 3\n3 a 1\n")
    (work / "judgments.json").write_text(
        json.dumps({"version": "v1", "source": "qrels.txt", "source_sha256": io.sha256_file(root / "qrels.txt")})
    )
    metrics = ["ndcg@10", "recall@100", "mrr@10", "map"]
    contract = Contract()
    doc_run = runs.collapse_to_documents(chunk_run)
    evaluation = evaluate(qrels, doc_run.select("query_id", "doc_id", "score"), metrics, contract)
    condensed = scoring.condensed_means(scoring.with_condensed(evaluation, doc_run, qrels))
    reports = root / "reports"
    reports.mkdir()
    full = {
        **contract.to_dict(),
        "metrics": metrics,
        "primary": "ndcg@10",
        "collapse": "first",
        "dataset": "tiny",
        "judgments_version": "v1",
        "judgments_sha256": "0" * 64,
        "queries": 3,
        "split": "all",
    }
    (reports / "metrics.json").write_text(
        json.dumps(
            {
                "contract": full,
                "configs": {
                    "m/c1": {
                        **evaluation.mean,
                        "condensed": condensed,
                        "ops": {"latency_ms_p95": 1.5},
                        "counts": evaluation.counts,
                        "slices": {},
                    }
                },
            }
        )
    )
    (reports / "lineage.json").write_text(
        json.dumps(
            {
                "m/c1": {
                    "models": {"m": {"revision": "r", "weights_sha256": "w", "protocol": {}}},
                    "inputs": [],
                    "run_dir": "data/work/runs/model/m/c1",
                    "run_sha256": io.sha256_file(run_dir / "run.parquet"),
                }
            }
        )
    )
    lock = {
        "schema": "2.0",
        "stages": {
            "queries": {
                "cmd": "python stages/queries.py",
                "deps": [{"path": "q.txt", "md5": "1"}],
                "outs": [{"path": "data/work/queries.parquet", "md5": "2"}],
            },
            "judgments": {
                "cmd": "python stages/judgments.py",
                "deps": [{"path": "qrels.txt", "md5": "3"}, {"path": "data/work/queries.parquet", "md5": "2"}],
                "params": {"params.yaml": {"judgments": {"version": "v1"}}},
                "outs": [
                    {"path": "data/work/judgments.json", "md5": "4"},
                    {"path": "data/work/qrels.parquet", "md5": "5"},
                ],
            },
            "other": {"cmd": "python other.py", "deps": [], "outs": [{"path": "data/work/other", "md5": "6.dir"}]},
            "retrieve@m-c1": {
                "cmd": "python stages/retrieve.py --model m --chunking c1",
                "deps": [{"path": "data/work/queries.parquet", "md5": "2"}],
                "outs": [{"path": "data/work/runs/model/m/c1", "md5": "7.dir", "nfiles": 2}],
            },
            "score": {
                "cmd": "python stages/score.py",
                "deps": [{"path": "data/work/runs", "md5": "8.dir"}, {"path": "data/work/qrels.parquet", "md5": "5"}],
                "outs": [{"path": "reports/metrics.json", "md5": "9"}],
            },
        },
    }
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))
    return root


CLEAN = ({}, {})  # what DVC's status says about an untouched repository


def test_refs_parse_as_two_words_or_a_path_into_metrics_json():
    assert audit.parse_ref(["minilm/c256", "ndcg@10"]) == audit.MetricRef("minilm/c256", "ndcg@10")
    assert audit.parse_ref(["configs.minilm/c256.ndcg@10"]) == audit.MetricRef("minilm/c256", "ndcg@10")
    assert audit.parse_ref(["configs.rrf(minilm,bm25)/c256.recall@100"]).config_id == "rrf(minilm,bm25)/c256"
    ops = audit.parse_ref(["configs.minilm/c256.ops.latency_ms_p95"])
    assert ops == audit.MetricRef("minilm/c256", "ops.latency_ms_p95") and ops.is_ops
    for bad in ([], ["a", "b", "c"], ["nodot"]):
        with pytest.raises(InputError):
            audit.parse_ref(bad)


def test_lineage_walks_dvc_lock_upstream_from_the_run(tmp_path):
    root = tiny_repo(tmp_path)
    lineage = audit.assemble(root, audit.MetricRef("m/c1", "ndcg@10"))
    assert [s.name for s in lineage.stages] == ["queries", "judgments", "retrieve@m-c1", "score"]  # not `other`
    assert lineage.written_by.name == "score" and lineage.run_stage == "retrieve@m-c1"
    assert lineage.judgments["version"] == "v1"
    assert lineage.models["m"]["weights_sha256"] == "w"
    assert lineage.packages["polars"] == pl.__version__
    retrieve = next(s for s in lineage.stages if s.name == "retrieve@m-c1")
    assert "data/work/runs/model/m/c1/run.json" in retrieve.sidecars
    text = audit.render_lineage(lineage)
    for expected in (
        "m/c1 ndcg@10 =",
        "written by stage score",
        "stage retrieve@m-c1",
        "md5 7.dir",
        "param   judgments =",
        "packages (installed now): releval",
    ):
        assert expected in text, expected


def test_an_untouched_number_is_recomputed_bit_for_bit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RELEVAL_PROGRESS", "line")
    root = tiny_repo(tmp_path)
    for metric in ("ndcg@10", "recall@100", "mrr@10", "map"):
        lineage = audit.assemble(root, audit.MetricRef("m/c1", metric))
        verification = audit.verify(root, lineage, status=CLEAN)
        assert verification.ok, audit.render_verification(verification)
        assert verification.links[0].check == "recompute" and "bit-for-bit" in verification.links[0].detail
    assert len(audit.verify_numbers(root)) == 4
    capsys.readouterr()
    every = audit.verify_all(root, status=CLEAN)
    assert re.fullmatch(r"audit --all: 1 configurations in \d+\.\d s( \(.*\))?\n", capsys.readouterr().err)
    assert not any(link.broken for link in every) and every[-1].check == "dvc.lock"
    # Without params.yaml, what the grid and the contract must be and where the inputs come from are not known.
    notes = {(link.check, link.subject) for link in every if link.status != "ok"}
    assert notes == {("grid", "params.yaml"), ("inputs", "data/work"), ("contract", "reports/metrics.json contract")}
    checked = {link.check for link in every if link.status == "ok"}
    assert {"recompute", "condensed", "counts", "ops", "lineage", "run file", "sidecar", "dvc.lock"} <= checked
    # Without DVC's status (this folder is no DVC repository) nothing in dvc.lock is verified: broken.
    unchecked = audit.verify_all(root)
    assert [(link.subject, link.status) for link in unchecked if link.broken] == [("dvc status", "missing")]


def test_a_number_that_differs_from_its_inputs_is_a_broken_link(tmp_path):
    root = tiny_repo(tmp_path)
    metrics_path = root / "reports" / "metrics.json"
    document = json.loads(metrics_path.read_text())
    document["configs"]["m/c1"]["map"] += 1e-12  # the smallest edit still breaks the chain
    metrics_path.write_text(json.dumps(document))
    verification = audit.verify(root, audit.assemble(root, audit.MetricRef("m/c1", "map")), status=CLEAN)
    assert [(link.check, link.status) for link in verification.broken] == [("recompute", "mismatch")]
    assert "result: BROKEN (1 link: m/c1 map mismatch)" in audit.render_verification(verification)
    statuses = {link.subject: link.status for link in audit.verify_all(root, status=CLEAN)}
    assert statuses["m/c1 map"] == "mismatch" and statuses["m/c1 ndcg@10"] == "ok"


def test_slice_means_may_differ_in_the_last_bits_only():
    exact = audit._slice_link("c slice s ndcg@10", 0.1 + 0.2, 0.1 + 0.2)
    assert exact.status == "ok" and "equal to" not in exact.detail
    last_bit = audit._slice_link("c slice s ndcg@10", 0.30000000000000004, 0.3)
    assert last_bit.status == "ok" and "equal to 1e-12" in last_bit.detail
    assert audit._slice_link("c slice s ndcg@10", 0.3, 0.3 + 1e-9).status == "mismatch"
    assert audit._slice_link("c slice s ndcg@10", 0.3, None).status == "mismatch"


def test_a_changed_run_file_breaks_the_run_link(tmp_path):
    root = tiny_repo(tmp_path)
    path = root / "data" / "work" / "runs" / "model" / "m" / "c1" / "run.parquet"
    table = pl.read_parquet(path)
    table.with_columns(pl.col("score") * 1.0).sort("score").write_parquet(path)  # same rows, other bytes
    verification = audit.verify(root, audit.assemble(root, audit.MetricRef("m/c1", "ndcg@10")), status=CLEAN)
    assert [(link.check, link.status) for link in verification.broken] == [("run file", "mismatch")]


def test_operational_figures_are_checked_against_the_run_sidecar(tmp_path):
    root = tiny_repo(tmp_path)
    ref = audit.parse_ref(["configs.m/c1.ops.latency_ms_p95"])
    assert audit.verify(root, audit.assemble(root, ref), status=CLEAN).ok
    sidecar = root / "data" / "work" / "runs" / "model" / "m" / "c1" / "run.json"
    meta = json.loads(sidecar.read_text())
    meta["ops"]["latency_ms_p95"] = 2.0
    sidecar.write_text(json.dumps(meta))
    broken = audit.verify(root, audit.assemble(root, ref), status=CLEAN).broken
    assert [(link.check, link.status) for link in broken] == [("recompute", "mismatch")]


def test_dvc_status_entries_become_named_links(tmp_path):
    root = tiny_repo(tmp_path)
    lineage = audit.assemble(root, audit.MetricRef("m/c1", "ndcg@10"))
    status = {
        "judgments": [{"changed deps": {"qrels.txt": "modified"}}],
        "queries": [{"changed outs": {"data/work/queries.parquet": "deleted"}}],
        "retrieve@m-c1": [{"changed outs": {"data/work/runs/model/m/c1": "modified"}}, "changed command"],
        "other": [{"changed outs": {"data/work/other": "modified"}}],
        "score": [{"changed params": {"params.yaml": {"metric.gain": "modified"}}}],
    }
    data = {"uncommitted": {"modified": ["data/work/runs/model/m/c1/", "data/work/runs/model/m/c1/run.parquet"]}}
    links = audit.verify(root, lineage, status=(status, data)).links
    found = {(link.subject, link.status) for link in links if link.check == "dvc.lock"}
    assert ("qrels.txt", "stale") in found
    assert ("data/work/queries.parquet", "missing") in found
    assert ("data/work/runs/model/m/c1", "modified") in found
    assert ("stage retrieve@m-c1", "stale") in found
    assert ("stage score", "stale") in found
    assert ("data/work/other", "note") in found  # outside this number's lineage: reported, not broken
    modified = next(link for link in links if link.subject == "data/work/runs/model/m/c1")
    assert "data/work/runs/model/m/c1/run.parquet modified" in modified.detail and "md5 7.dir" in modified.detail


def test_a_change_in_another_run_only_is_a_note_for_this_number(tmp_path):
    root = tiny_repo(tmp_path)
    lineage = audit.assemble(root, audit.MetricRef("m/c1", "ndcg@10"))
    elsewhere = (
        {"score": [{"changed deps": {"data/work/runs": "modified"}}]},
        {"uncommitted": {"modified": ["data/work/runs/bm25/c1/run.parquet"]}},
    )
    verification = audit.verify(root, lineage, status=elsewhere)
    assert verification.ok
    assert any(link.status == "note" and "other runs only" in link.detail for link in verification.links)
    here = (
        {"score": [{"changed deps": {"data/work/runs": "modified"}}]},
        {"uncommitted": {"modified": ["data/work/runs/model/m/c1/run.parquet"]}},
    )
    assert not audit.verify(root, lineage, status=here).ok
    unknown = ({"score": [{"changed deps": {"data/work/runs": "modified"}}]}, {})
    assert not audit.verify(root, lineage, status=unknown).ok  # cannot tell which file: broken


def archive_the_run(root: Path) -> archive.Archive:
    """Put tiny_repo's run into its committed archive, as the archive stage would."""
    run_dir = root / "data" / "work" / "runs" / "model" / "m" / "c1"
    item = archive.RunFiles(
        "data/work/runs/model/m/c1", (run_dir / "run.parquet").read_bytes(), (run_dir / "run.json").read_bytes()
    )
    store = archive.Archive(root / "data" / "archive")
    store.add([item], archive.Provenance(commit="c" * 40), dataset="tiny")
    return store


def test_a_run_that_is_not_here_is_recomputed_from_the_committed_archive(tmp_path):
    root = tiny_repo(tmp_path)
    store = archive_the_run(root)
    ref = audit.MetricRef("m/c1", "map")
    here = audit.verify(root, audit.assemble(root, ref), status=CLEAN)
    assert here.ok
    (copy,) = [link for link in here.links if link.check == "archive"]
    assert copy.status == "ok" and "equals the run collapsed to documents" in copy.detail

    # A clone without the DVC cache: no run folder. The number comes from the archive; the run is "not here".
    shutil.rmtree(root / "data" / "work" / "runs")
    lineage = audit.assemble(root, ref)
    verification = audit.verify(root, lineage, status=CLEAN)
    assert verification.ok, audit.render_verification(verification)
    links = {link.check: link for link in verification.links}
    assert (
        links["recompute"].status == "ok"
        and "from the committed archive (data/archive/docs/" in links["recompute"].detail
    )
    assert links["run file"].status == "unavailable" and not links["run file"].broken
    assert links["archive"].status == "ok" and "sha256 matches its name" in links["archive"].detail
    text = audit.render_verification(verification)
    assert "not available here   run file" in text and "result: OK (1 link not available here, none broken)" in text
    every = audit.verify_numbers(root)
    assert [link.status for link in every if link.check == "recompute"] == ["ok"] * 4
    assert any(link.check == "archive" and link.subject == "1 of 1 configurations" for link in every)
    # Operational figures: checked against the archive's copy of run.json.
    ops = audit.verify(root, audit.assemble(root, audit.parse_ref(["configs.m/c1.ops.latency_ms_p95"])), status=CLEAN)
    assert ops.ok and "data/archive/meta/" in ops.links[0].detail

    # An edited archive file breaks the chain; a run in neither place is missing.
    docs = store.docs_file(store.index()["docs_sha256"][0])
    table = pl.read_parquet(docs).with_columns(pl.col("score") * 2)
    table.write_parquet(docs)
    broken = audit.verify(root, audit.assemble(root, ref), status=CLEAN).broken
    assert {(link.check, link.status) for link in broken} == {("recompute", "missing"), ("archive", "mismatch")}
    shutil.rmtree(root / "data" / "archive")
    broken = audit.verify(root, audit.assemble(root, ref), status=CLEAN).broken
    assert {(link.check, link.status) for link in broken} == {("recompute", "missing"), ("run file", "missing")}
    assert "the committed archive (data/archive) has no entry of this run" in broken[0].detail


def test_paths_nothing_here_can_restore_are_not_available_here_not_broken(tmp_path):
    root = tiny_repo(tmp_path)
    lineage = audit.assemble(root, audit.MetricRef("m/c1", "ndcg@10"))
    status = {
        "queries": [{"changed outs": {"data/work/queries.parquet": "deleted"}}],
        "score": [{"changed deps": {"data/work/runs": "modified"}}],
    }
    data = {"uncommitted": {"deleted": ["data/work/runs/model/m/c1/"]}}
    unavailable = {"data/work/queries.parquet": "2", "data/work/runs/model/m/c1": "7.dir"}
    (root / "data" / "work" / "queries.parquet").unlink()
    shutil.rmtree(root / "data" / "work" / "runs" / "model" / "m" / "c1")
    links, _ = audit.check_lock(root, ["queries", "score"], status=(status, data), unavailable=unavailable)
    found = {(link.subject, link.status) for link in links}
    assert ("data/work/queries.parquet", "unavailable") in found
    assert ("data/work/runs", "unavailable") in found  # holds only what is not here
    assert not any(link.broken for link in links) and "2 not available here" in links[-1].detail
    # A file that is here and changed stays broken, even inside a folder that also lacks outputs.
    data = {"uncommitted": {"deleted": ["data/work/runs/model/m/c1/"], "modified": ["data/work/runs/bm25/run.parquet"]}}
    links, _ = audit.check_lock(root, ["score"], status=(status, data), unavailable=unavailable)
    assert ("data/work/runs", "stale") in {(link.subject, link.status) for link in links}
    # Without `unavailable` (a workspace whose cache has them), a deleted output is missing, as before.
    verification = audit.verify(root, lineage, status=(status, {}))
    assert ("data/work/queries.parquet", "missing") in {(link.subject, link.status) for link in verification.links}


def test_bad_references_exit_2_naming_what_exists(tmp_path):
    root = tiny_repo(tmp_path)
    result = audit_cli(root, "nope/c1", "ndcg@10")
    assert result.returncode == 2 and "m/c1" in result.stderr
    result = audit_cli(root, "m/c1", "ndcg@99")
    assert result.returncode == 2 and "ndcg@10" in result.stderr
    result = audit_cli(root)
    assert result.returncode == 2 and "METRIC_REF" in result.stderr


def test_one_number_fits_one_screen_and_names_its_datasets_own_reports_folder(tmp_path):
    """A dataset other than the default writes reports/<name>/ (params.yaml's reports_dir): the
    audit reads and names that folder's files; the default output is one screen, --verbose has the rest."""
    root = tiny_repo(tmp_path)
    folder = root / "reports" / "tiny"
    folder.mkdir()
    for name in ("metrics.json", "lineage.json"):
        (root / "reports" / name).rename(folder / name)
    lock = root / "dvc.lock"
    lock.write_text(lock.read_text().replace("reports/metrics.json", "reports/tiny/metrics.json"))
    (root / "params.yaml").write_text("reports_dir: reports/tiny\n")

    result = audit_cli(root, "m/c1", "ndcg@10")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr  # not a DVC repository: dvc.lock cannot be checked
    lines = out.splitlines()
    assert len(lines) <= 20, out
    assert "value      reports/tiny/metrics.json configs['m/c1']['ndcg@10']" in out
    assert "reports/metrics.json" not in out
    for expected in (
        "releval audit: m/c1 ndcg@10 = ",
        "  run        data/work/runs/model/m/c1/run.parquet sha256 ",
        "(stage retrieve@m-c1)",
        "  judgments  v1 (qrels.txt, sha256 ",
        "  model      m: revision 'r'",
        "  commit     (none)",
        "audited with ",
        "BROKEN (missing)     dvc.lock   dvc status: DVC could not check the recorded hashes",
        "result: BROKEN (1 link: dvc status missing)",
        "--verbose",
    ):
        assert expected in out, (expected, out)
    assert "lineage (dvc.lock, upstream first)" not in out and "packages (installed now)" not in out

    verbose = audit_cli(root, "m/c1", "ndcg@10", "--verbose").stdout
    for expected in (
        "value      reports/tiny/metrics.json configs['m/c1']['ndcg@10']",
        "(stage retrieve@m-c1, reports/tiny/lineage.json)",
        "written by stage score",
        "lineage (dvc.lock, upstream first):",
        "  stage retrieve@m-c1:",
        "packages (installed now): releval",
        "OK                   recompute  m/c1 ndcg@10",
    ):
        assert expected in verbose, (expected, verbose)
    assert len(verbose.splitlines()) > len(lines)

    unknown = audit_cli(root, "nope/c1", "ndcg@10")
    assert unknown.returncode == 2 and "reports/tiny/metrics.json" in unknown.stderr, unknown.stderr
    assert "m/c1" in unknown.stderr


# --------------------------------------------------------------------------- on a real pipeline


@pytest.mark.slow
def test_untouched_project_every_number_recomputes_and_every_link_holds(default_project):
    project = default_project
    metrics = json.loads((project / "reports" / "metrics.json").read_text())
    expected = sum(
        len(metrics["contract"]["metrics"]) + sum(len(s["mean"]) for s in (row.get("slices") or {}).values())
        for row in metrics["configs"].values()
    )
    result = audit_cli(project, "--all")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{expected} of {expected} numbers in reports/metrics.json recomputed" in result.stdout
    assert "result: OK" in result.stdout
    data = json.loads(audit_cli(project, "--all", "--json").stdout)
    assert (
        data["ok"]
        and sum(link["check"] == "recompute" and link["status"] == "ok" for link in data["links"]) == expected
    )

    result = audit_cli(project, "minilm/c256", "ndcg@10", "--verbose")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    value = metrics["configs"]["minilm/c256"]["ndcg@10"]
    assert f"minilm/c256 ndcg@10 = {value!r}" in out
    for stage in (
        "ingest",
        "queries",
        "judgments",
        "chunk@c256",
        "model@minilm",
        "encode@minilm-c256",
        "index@minilm-c256",
        "retrieve@minilm-c256",
        "score",
    ):
        assert f"stage {stage}:" in out, stage
    for stage in ("bm25@c256", "model@e5small", "chunk@c512"):
        assert f"stage {stage}:" not in out, stage  # not inputs of this number
    for expected_text in (
        "sidecar data/work/emb/minilm/c256/encode.json",
        "sidecar data/work/index/minilm/c256/index.json",
        "sidecar data/work/chunks/c256.json",
        "judgments  v2 (source data/judgments/v2",
        "weights sha256",
        "md5 ",
        ".dir",
        "param   chunkings.c256",
        "packages (installed now): releval",
        "git: commit",
        "bit-for-bit",
        "result: OK",
    ):
        assert expected_text in out, expected_text
    path_form = audit_cli(project, "configs.rrf(minilm,bm25)/c256.recall@100", "--lineage")
    assert path_form.returncode == 0 and "stage fuse@rrf-minilm-c256:" in path_form.stdout
    assert "stage bm25@c256:" in path_form.stdout and "stage retrieve@minilm-c256:" in path_form.stdout


def _edit_judgment(project: Path) -> None:
    regrade_one_judgment(project, seal=False)


def _edit_run(project: Path) -> None:
    path = project / "data" / "work" / "runs" / "model" / "minilm" / "c256" / "run.parquet"
    table = pl.read_parquet(path)
    table.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(-5.0).otherwise(pl.col("score")).alias("score")
    ).write_parquet(path)


def _edit_corpus(project: Path) -> None:
    """Upper-case one word of one document: the corpus changes, its gzip framing does not."""
    path = project / CORPUS
    with gzip.open(path, "rb") as fh:
        text = fh.read()
    edited = text.replace(b"Python", b"PYTHON", 1)
    assert edited != text
    with gzip.GzipFile(path, "wb", mtime=0) as fh:
        fh.write(edited)


def _delete_qrels(project: Path) -> None:
    (project / "data" / "work" / "qrels.parquet").unlink()


@pytest.mark.slow
@pytest.mark.parametrize(
    "tamper,names",
    [
        (
            _edit_judgment,
            [
                "BROKEN (stale)",
                f"{ACTIVE_JUDGMENTS.as_posix()}: modified since stage judgments ran",
                f"BROKEN (modified)    sidecar    {ACTIVE_JUDGMENTS.as_posix()}",
            ],
        ),
        (
            _edit_run,
            [
                "BROKEN (mismatch)    recompute",
                "BROKEN (mismatch)    run file",
                "output of stage retrieve@minilm-c256 was modified",
                "[data/work/runs/model/minilm/c256/run.parquet modified]",
            ],
        ),
        (_edit_corpus, ["BROKEN (stale)", f"{CORPUS.as_posix()}: modified since stage ingest ran"]),
        (_delete_qrels, ["BROKEN (missing)", "data/work/qrels.parquet"]),
    ],
    ids=["judgment", "run-row", "corpus", "deleted-qrels"],
)
def test_tampering_names_the_broken_link_and_exits_1(default_project, tmp_path, tamper, names):
    copy = copy_project(default_project, tmp_path / "tampered")
    assert audit_cli(copy, "minilm/c256", "ndcg@10").returncode == 0
    tamper(copy)
    result = audit_cli(copy, "minilm/c256", "ndcg@10")
    assert result.returncode == 1, result.stdout + result.stderr
    verification = result.stdout[result.stdout.index("verification:") :]
    for text in names:
        assert text in verification, (text, verification)
    assert "result: BROKEN" in verification
    assert audit_cli(copy, "--all").returncode == 1


@pytest.mark.slow
def test_a_change_to_another_configuration_leaves_this_number_intact(default_project, tmp_path):
    copy = copy_project(default_project, tmp_path / "other-run")
    _edit_run(copy)  # minilm/c256's run; bm25/c256 does not read it
    result = audit_cli(copy, "bm25/c256", "map", "--verbose")
    assert result.returncode == 0, result.stdout
    assert "in other runs only" in result.stdout and "result: OK" in result.stdout


@pytest.mark.slow
@pytest.mark.heavy  # repeats part of the pipeline (30-85 s); make test-heavy
def test_audit_at_an_earlier_revision_restores_its_data_from_the_cache(default_project, tmp_path):
    copy = copy_project(default_project, tmp_path / "history")
    old = json.loads((copy / "reports" / "metrics.json").read_text())["configs"]["minilm/c256"]
    regrade_one_judgment(copy)
    sh(["dvc", "repro"], copy)
    sh(["git", "add", "-A"], copy)
    sh(["git", "commit", "-qm", "regrade one judgment"], copy)
    new = json.loads((copy / "reports" / "metrics.json").read_text())["configs"]["minilm/c256"]
    metric = next(m for m in ("ndcg@10", "map", "mrr@10", "p@10", "recall@100") if old[m] != new[m])
    before = (
        sh(["git", "status", "--porcelain"], copy).stdout,
        sh(["git", "worktree", "list"], copy).stdout,
        sh(["git", "branch", "-a"], copy).stdout,
    )

    result = audit_cli(copy, "minilm/c256", metric, "--rev", "HEAD~1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"minilm/c256 {metric} = {old[metric]!r}" in result.stdout and "result: OK" in result.stdout
    current = audit_cli(copy, "minilm/c256", metric)
    assert current.returncode == 0 and f"= {new[metric]!r}" in current.stdout
    after = (
        sh(["git", "status", "--porcelain"], copy).stdout,
        sh(["git", "worktree", "list"], copy).stdout,
        sh(["git", "branch", "-a"], copy).stdout,
    )
    assert after == before  # the audited repository is not touched
    bad = audit_cli(copy, "minilm/c256", metric, "--rev", "no-such-rev")
    assert bad.returncode == 2 and "--rev" in bad.stderr
