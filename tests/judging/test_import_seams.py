"""`releval pool --import` at the seams a new user walks into (issue 27, seams 5, 7, 14b and 15):
the ids are checked against the dataset the configuration names wherever its files live, a failed
import leaves nothing behind, a version scores were reported from is never appended to, and the
advice the commands print is the command that works."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from releval.cli import main
from releval.judging import judgments as jmod
from releval.judging.pool import import_advice, next_version_name

REPO = Path(__file__).parents[2]
CORPUS = REPO / "tests" / "data" / "corpus" / "beir" / "corpus.jsonl"
QUERIES = [
    {"query_id": "q1", "text": "shock waves in supersonic flow", "split": "dev"},
    {"query_id": "q2", "text": "slip flow in a tube", "split": "dev"},
]
POOL_HEADER = "query_id,query,doc_id,title,snippet,grade,annotator,notes\n"


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A project (the working directory) whose dataset `helpdesk` keeps its corpus and queries outside
    data/, in corpora/helpdesk/, as `releval init-dataset` records them."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "conf", root / "conf", ignore=shutil.ignore_patterns("recorded.yaml"))
    (root / "corpora" / "helpdesk").mkdir(parents=True)
    shutil.copy(CORPUS, root / "corpora" / "helpdesk" / "corpus.jsonl")
    queries = root / "corpora" / "helpdesk" / "queries.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    monkeypatch.chdir(root)
    argv = ["init-dataset", "helpdesk", "--corpus", "corpora/helpdesk/corpus.jsonl", "--queries", str(queries)]
    assert main([*argv, "--annotator", "ann"]) == 0
    assert main(["params", "dataset=helpdesk"]) == 0
    return root


def pool_file(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path.write_text(POOL_HEADER + "".join(f"{q},text,{d},title,snippet,{g},ann,\n" for q, d, g in rows))
    return path


def test_ids_are_checked_against_the_configured_dataset_wherever_it_lives(project, capsys):
    """Seam 5: with the corpus and queries outside data/, a row naming document NOPE_DOC and query 999
    imported with exit 0 ("ids checked against nothing") and validate then said ok."""
    bad = pool_file(project / "bad.csv", [("999", "doc-a", "1"), ("q1", "NOPE_DOC", "2")])
    before = snapshot(project)
    capsys.readouterr()
    assert main(["pool", "--import", str(bad), "--into", "data/helpdesk/judgments/v1"]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:2: field 'query_id': unknown query '999'" in out
    assert f"{bad}:3: field 'doc_id': unknown document 'NOPE_DOC'" in out
    assert snapshot(project) == before
    good = pool_file(project / "good.csv", [("q1", "doc-a", "1"), ("q2", "doc-b", "0")])
    assert main(["pool", "--import", str(good), "--into", "data/helpdesk/judgments/v1"]) == 0
    out = capsys.readouterr().out
    assert (
        "ids checked against dataset 'helpdesk', named by its manifest: queries corpora/helpdesk/queries.jsonl "
        "and corpus corpora/helpdesk/corpus.jsonl"
    ) in out
    assert main(["validate"]) == 0
    assert "ids checked against dataset 'helpdesk'" in capsys.readouterr().out


def test_a_revision_outside_the_dataset_folder_carries_its_rubric_and_a_failed_import_writes_nothing(
    project, tmp_path, capsys
):
    """Seam 7: a failed import printed "nothing was written" and left judgments.jsonl and a manifest in the
    new version's folder; a revision written outside its parent's folder lost its `../RUBRIC.md`."""
    good = pool_file(project / "good.csv", [("q1", "doc-a", "1")])
    assert main(["pool", "--import", str(good), "--into", "data/helpdesk/judgments/v1"]) == 0
    elsewhere = tmp_path / "review" / "v2"
    more = pool_file(project / "more.csv", [("q2", "doc-b", "2")])
    argv = ["pool", "--import", str(more), "--into", str(elsewhere), "--parent", "data/helpdesk/judgments/v1"]
    assert main([*argv, "--annotator", "ann"]) == 0
    revision = jmod.load_version(elsewhere)
    assert revision.manifest.rubric == "RUBRIC.md" and (elsewhere / "RUBRIC.md").is_file()
    assert revision.manifest.dataset == "helpdesk" and revision.manifest.parent == "v1"
    assert revision.manifest.description == "revision of v1: 1 judgments added by ann"
    # A rubric that cannot be found from the new set is refused before anything is written.
    (project / "data" / "helpdesk" / "judgments" / "RUBRIC.md").unlink()
    target = project / "data" / "helpdesk" / "judgments" / "v3"
    capsys.readouterr()
    argv = ["pool", "--import", str(more), "--into", str(target), "--parent", "data/helpdesk/judgments/v1"]
    assert main([*argv, "--annotator", "ann"]) == 1
    assert "nothing was written" in capsys.readouterr().err
    assert not target.exists() and not list(target.parent.glob(".releval-tmp-*"))


def test_a_version_scores_were_reported_from_is_not_appended_to(project, capsys):
    """Seam 14b: `pool --import --into` the active, already-reported version appended and re-sealed it
    without a word; scores reported from it would no longer match its judgments."""
    good = pool_file(project / "good.csv", [("q1", "doc-a", "1")])
    v1 = project / "data" / "helpdesk" / "judgments" / "v1"
    assert main(["pool", "--import", str(good), "--into", str(v1)]) == 0
    sealed = jmod.load_version(v1).manifest.judgments_sha256
    reports = project / "reports" / "helpdesk"
    reports.mkdir(parents=True)
    (reports / "metrics.json").write_text(json.dumps({"contract": {"judgments_sha256": sealed}, "configs": {}}))
    assert import_advice(v1, "debt.csv") == (
        f"releval pool --import debt.csv --into {v1.parent / 'v2'} --parent {v1}, then score with it: "
        f"releval params judgments.version=v2 judgments.path={(v1.parent / 'v2').as_posix()} && dvc repro"
    )
    more = pool_file(project / "more.csv", [("q2", "doc-b", "2")])
    before = snapshot(project)
    capsys.readouterr()
    assert main(["pool", "--import", str(more), "--into", str(v1)]) == 1
    out = capsys.readouterr().out
    assert f"reported from v1 as it is (reports/helpdesk/metrics.json, judgments_sha256 {sealed[:12]})" in out
    assert f"--into {v1.parent / 'v2'} --parent {v1}" in out
    assert snapshot(project) == before


def test_the_advice_appends_while_nothing_was_reported(project):
    v1 = Path("data/helpdesk/judgments/v1")
    assert import_advice(v1, "pool.csv") == f"releval pool --import pool.csv --into {v1}"
    assert [next_version_name(v) for v in ("v3", "helpdesk-v1", "first", "v09")] == [
        "v4",
        "helpdesk-v2",
        "first-2",
        "v10",
    ]
