"""`releval audit --all` trusts nothing it audits, and auditing a revision never runs that revision's code.

One small real project (tests/support/audited_project.py: three configurations, every stage run by
`dvc repro`, about 20 s) is built once for the module; each test that changes anything works on a
copy. Each tamper below is followed by `dvc commit -f` where it applies, so that dvc.lock agrees
with the tampered files and only the audit's own checks can tell.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import shutil
import sys
from pathlib import Path

import polars as pl
import pytest
from dvc.repo import Repo

from releval import cli
from releval.provenance import archive
from support.audited_project import make_audited_project
from support.commands import run
from support.projects import copy_project

pytestmark = pytest.mark.slow

CONFIG = "wordllama/c256"  # the configuration the tampers touch
RUN = Path("data/work/runs/model/wordllama/c256")
JUDGMENTS = Path("data/judgments/v2/judgments.jsonl")


@pytest.fixture(scope="module")
def audited_project(tmp_path_factory) -> Path:
    return make_audited_project(tmp_path_factory.mktemp("audited") / "project")


def audit_cli(cwd: Path, *args: str):
    return run([sys.executable, "-m", "releval.cli", "audit", *args], cwd, check=False)


def broken_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if "BROKEN (" in line and not line.startswith("result:")]


# --------------------------------------------------------------------------- tampers


def _other_number(text: str) -> str:
    """The first 4-decimal number in ``text`` changed in its last digit."""
    match = re.search(r"\d\.\d{4}", text)
    assert match, text
    number = match.group(0)
    changed = number[:-1] + str((int(number[-1]) + 1) % 10)
    return text[: match.start()] + changed + text[match.end() :]


def _edit_table_row(path: Path, config_id: str) -> None:
    """Change one number in the table row of ``config_id`` (a markdown table)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    index = next(i for i, line in enumerate(lines) if line.startswith("|") and f"`{config_id}`" in line)
    lines[index] = _other_number(lines[index])
    path.write_text("\n".join(lines), encoding="utf-8")


def _edit_json(path: Path, edit) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    edit(document)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _edit_parquet(path: Path, column: str, where: pl.Expr, value) -> None:
    table = pl.read_parquet(path)
    first = where & (pl.int_range(pl.len()) == pl.int_range(pl.len()).filter(where).first())
    edited = table.with_columns(pl.when(first).then(pl.lit(value)).otherwise(pl.col(column)).alias(column))
    assert not edited.equals(table)
    edited.write_parquet(path)


def archived_run_score(project: Path) -> None:
    store = archive.Archive(project / "data" / "archive")
    entry = store.index().filter(pl.col("config_id") == CONFIG).row(0, named=True)
    _edit_parquet(store.docs_file(entry["docs_sha256"]), "score", pl.lit(True), -5.0)


def judgment_grade(project: Path) -> None:
    qrels = pl.read_parquet(project / "data" / "work" / "qrels.parquet")
    query_id, doc_id, grade = qrels.sort("query_id", "doc_id").row(0)
    path = project / JUDGMENTS
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for record in records:
        if (record["query_id"], record["doc_id"]) == (query_id, doc_id):
            record["grade"] = 0 if grade else 3
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def quality_json_value(project: Path) -> None:
    def edit(doc):
        doc["ndcg@10"][CONFIG] = round(doc["ndcg@10"][CONFIG] + 0.01, 4)

    _edit_json(project / "reports" / "quality.json", edit)


def grid_md_number(project: Path) -> None:
    _edit_table_row(project / "reports" / "grid.md", CONFIG)


def report_md_number(project: Path) -> None:
    _edit_table_row(project / "reports" / "report.md", CONFIG)


def per_query_value(project: Path) -> None:
    _edit_parquet(project / "reports" / "per_query.parquet", "ndcg@10", pl.col("config_id") == CONFIG, 0.123)


def ops_json_value(project: Path) -> None:
    def edit(doc):
        doc["configs"][CONFIG]["latency_ms_p95"] /= 2

    _edit_json(project / "reports" / "ops.json", edit)


def history_md_value(project: Path) -> None:
    _edit_table_row(project / "reports" / "history.md", CONFIG)


def history_parquet_value(project: Path) -> None:
    _edit_parquet(project / "reports" / "history.parquet", "ndcg@10", pl.col("config_id") == CONFIG, 0.123)


def configuration_removed(project: Path) -> None:
    _edit_json(project / "reports" / "metrics.json", lambda doc: doc["configs"].pop(CONFIG))


def metrics_value(project: Path) -> None:
    def edit(doc):
        doc["configs"][CONFIG]["map"] += 1e-12

    _edit_json(project / "reports" / "metrics.json", edit)


def metrics_ops_figure(project: Path) -> None:
    def edit(doc):
        doc["configs"][CONFIG]["ops"]["index_bytes"] += 1

    _edit_json(project / "reports" / "metrics.json", edit)


def metrics_slice_mean(project: Path) -> None:
    def edit(doc):
        block = next(iter(doc["configs"][CONFIG]["slices"].values()))
        block["mean"]["ndcg@10"] = 0.5

    _edit_json(project / "reports" / "metrics.json", edit)


def run_row(project: Path) -> None:
    _edit_parquet(project / RUN / "run.parquet", "score", pl.lit(True), -5.0)


def qrels_grade(project: Path) -> None:
    _edit_parquet(project / "data" / "work" / "qrels.parquet", "grade", pl.col("grade") >= 1, 0)


def lineage_run_hash(project: Path) -> None:
    def edit(doc):
        doc[CONFIG]["run_sha256"] = "0" * 64

    _edit_json(project / "reports" / "lineage.json", edit)


def corpus_word(project: Path) -> None:
    path = project / "data" / "pydocs" / "corpus.jsonl.gz"
    with gzip.open(path, "rb") as fh:
        text = fh.read()
    edited = text.replace(b"Python", b"PYTHON", 1)
    assert edited != text
    with gzip.GzipFile(path, "wb", mtime=0) as fh:
        fh.write(edited)


def run_deleted(project: Path) -> None:
    shutil.rmtree(project / RUN)


REPORT_FILES = (
    "quality.json",
    "per_query.parquet",
    "grid.md",
    "observations.json",
    "report.md",
    "history.parquet",
    "idcg_changes.parquet",
    "score_changes.parquet",
    "history.md",
    "idcg_changes.md",
)
MACHINE_FILES = ("ops.json", "ops.md")


def test_an_untouched_project_holds_every_check_here_and_in_a_fresh_clone(audited_project, tmp_path):
    result = audit_cli(audited_project, "--all")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "BROKEN" not in out and out.splitlines()[-1] == "result: OK"
    assert re.search(r"^releval audit --all: (\d+) of \1 numbers in reports/metrics.json recomputed bit-for-bit", out)
    assert "OK                   grid       3 configurations: the grid in params.yaml, reports/metrics.json" in out
    assert "OK                   inputs     data/work inputs: documents, queries, qrels and judgments.json equal" in out
    for name in (*REPORT_FILES, *MACHINE_FILES):
        assert f"OK                   report     reports/{name}: " in out, (name, out)
    for check in ("recompute", "condensed", "counts", "ops", "lineage", "run file", "archive", "sidecar", "contract"):
        assert re.search(rf"^  OK +{check} ", out, re.M), (check, out)

    verbose = audit_cli(audited_project, "--all", "--verbose").stdout  # every link, none folded
    assert len(verbose.splitlines()) > len(out.splitlines())
    for config_id in ("bm25/c256", "rrf(wordllama,bm25)/c256", CONFIG):
        assert f"OK                   recompute  {config_id} ndcg@10: " in verbose
        assert f"OK                   ops        {config_id} ops.index_bytes: " in verbose

    # A clone without the DVC cache: runs from the archive, inputs rebuilt, every report file still checked.
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(audited_project), str(clone)], tmp_path)
    result = audit_cli(clone, "--rev", "HEAD", "--all")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "rebuilt from the committed sources by this checkout's code" in out
    assert "3 of 3 configurations: runs read from the committed archive" in out
    assert "not available here   run file   3 links" in out
    for name in REPORT_FILES:
        assert f"OK                   report     reports/{name}: " in out, (name, out)
    for name in MACHINE_FILES:  # the archive keeps a run's first run.json, not a rerun's timings
        assert f"not available here   report     reports/{name}: machine figures of 3 configurations" in out
    assert out.splitlines()[-1].startswith("result: OK (") and "not available here, none broken)" in out


# (tamper, `dvc commit -f` after it, what a BROKEN line of `audit --all` must name)
TAMPERS = [
    # what `audit --all` let through before
    (archived_run_score, True, "data/archive/docs/"),
    (judgment_grade, True, JUDGMENTS.parent.as_posix()),
    (quality_json_value, True, "reports/quality.json"),
    (grid_md_number, True, "reports/grid.md"),
    (report_md_number, True, "reports/report.md"),
    (per_query_value, True, "reports/per_query.parquet"),
    (history_md_value, True, "reports/history.md"),
    (history_parquet_value, True, "reports/history.parquet"),
    (configuration_removed, True, CONFIG),
    (lineage_run_hash, True, f"{RUN.as_posix()}/run.parquet"),
    (metrics_ops_figure, True, f"{CONFIG} ops.index_bytes"),
    (ops_json_value, True, "reports/ops.json"),
    # what it caught already
    (metrics_value, True, f"{CONFIG} map"),
    (metrics_slice_mean, True, f"{CONFIG} slice"),
    (run_row, True, f"{CONFIG} "),
    (qrels_grade, True, "recompute"),
    (corpus_word, False, "data/pydocs/corpus.jsonl.gz"),
    (run_deleted, False, RUN.as_posix()),
]


@pytest.mark.parametrize("tamper,commit,named", TAMPERS, ids=[t[0].__name__ for t in TAMPERS])
def test_every_tamper_makes_audit_all_exit_1_naming_the_broken_link(
    audited_project, tmp_path, capsys, tamper, commit, named
):
    project = copy_project(audited_project, tmp_path / "tampered")
    tamper(project)
    # `dvc commit -f` and `releval audit --all`, in this process (no interpreter start per tamper:
    # the revision test below runs the command as a process)
    with contextlib.chdir(project):
        if commit:
            with Repo(str(project)) as repo:
                repo.commit(force=True)
                assert repo.status() == {}  # DVC sees nothing wrong
        capsys.readouterr()
        code = cli.main(["audit", "--all"])
    out = capsys.readouterr().out
    assert code == 1, out
    broken = broken_lines(out)
    assert any(named in line for line in broken), (named, broken, out)
    assert "result: BROKEN" in out


# --------------------------------------------------------------------------- auditing a revision runs none of its code


def _plant(project: Path, marker: Path) -> None:
    """Code that appends to ``marker`` wherever a revision could smuggle it into an audit: every
    stage script, the package the stages import, the interpreter's start-up hooks, a pytest
    conftest, and every command of dvc.yaml."""
    line = f"import pathlib; pathlib.Path({str(marker)!r}).open('a').write(__file__ + '\\n')\n"
    for script in sorted((project / "stages").glob("*.py")):
        script.write_text(line + script.read_text(encoding="utf-8"), encoding="utf-8")
    package = project / "stages" / "releval" / "__init__.py"
    package.write_text(package.read_text(encoding="utf-8") + line, encoding="utf-8")
    for name in ("sitecustomize.py", "usercustomize.py", "conftest.py", "stages/sitecustomize.py", "stages/evil.pth"):
        (project / name).write_text(line if name.endswith(".py") else line.rstrip("\n") + "\n", encoding="utf-8")
    dvc_yaml = project / "dvc.yaml"
    command = f'python -c "import pathlib; pathlib.Path({str(marker)!r}).write_text(\'dvc.yaml\')" && '
    dvc_yaml.write_text(dvc_yaml.read_text(encoding="utf-8").replace("cmd: ", "cmd: " + command), encoding="utf-8")


def test_auditing_a_revision_never_imports_or_runs_its_code(audited_project, tmp_path):
    project = copy_project(audited_project, tmp_path / "project")
    marker = tmp_path / "the-revision-ran"
    main = run(["git", "rev-parse", "--abbrev-ref", "HEAD"], project).stdout.strip()
    run(["git", "checkout", "-q", "-b", "pull-request"], project)
    _plant(project, marker)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "a pull request"], project)
    run(["git", "checkout", "-q", main], project)
    assert not marker.exists()

    # A clone without the DVC cache: every input the numbers were scored on has to be rebuilt.
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    run(["git", "branch", "pull-request", "origin/pull-request"], clone)
    assert not (clone / ".dvc" / "cache").exists()
    for where, args in (
        (clone, ["--rev", "pull-request", "--all"]),
        (clone, ["--rev", "pull-request", CONFIG, "ndcg@10"]),
        (project, ["--rev", "pull-request", "--all"]),  # here the DVC cache restores data/work
    ):
        result = audit_cli(where, *args)
        assert not marker.exists(), (args, marker.read_text(), result.stdout, result.stderr)
        assert result.returncode in (0, 1), result.stdout + result.stderr
        head = re.search(r"^\(revision pull-request, commit [0-9a-f]{12}: a temporary clone", result.stdout, re.M)
        assert head, result.stdout + result.stderr
        assert re.search(r"^ *audited with the releval code of commit [0-9a-f]{12}", result.stdout, re.M), result.stdout
        assert "no code of the audited tree was imported or run" in result.stdout


def test_reports_written_by_other_code_are_held_to_every_number_not_to_their_layout(audited_project, tmp_path, capsys):
    """A revision audited with newer code (or a checkout whose code moved on): the score stage's
    recorded code differs from this checkout's. Its markdown may be laid out differently and its
    records may hold a field this code does not write: notes. A number that differs is still broken."""
    project = copy_project(audited_project, tmp_path / "older-code")
    markdown = project / "stages" / "releval" / "reporting" / "markdown.py"
    markdown.write_text(markdown.read_text(encoding="utf-8") + "# an older version of the rendering code\n")
    grid = project / "reports" / "grid.md"
    grid.write_text(grid.read_text(encoding="utf-8").replace("# Retrieval grid", "# The grid", 1), encoding="utf-8")
    _edit_json(project / "reports" / "quality.json", lambda doc: doc.update(written_by="older code"))

    def audit_all() -> tuple[int, str]:
        with contextlib.chdir(project):
            with Repo(str(project)) as repo:
                repo.commit(force=True)
            capsys.readouterr()
            code = cli.main(["audit", "--all"])
        return code, capsys.readouterr().out

    code, out = audit_all()
    assert code == 0, out
    other = r"stage score ran other code than this checkout's \(stages/releval/reporting/markdown.py\)"
    layout = r"every number as the verified numbers give it; the layout differs: "
    assert re.search(rf"^  note +report +reports/grid.md: {layout}{other}", out, re.M), out
    assert re.search(rf"^  note +report +reports/quality.json: every field both hold equals .*{other}", out, re.M)

    grid_md_number(project)  # a number: broken, whatever code wrote the file
    quality_json_value(project)
    code, out = audit_all()
    assert code == 1, out
    broken = broken_lines(out)
    assert any("reports/grid.md: differs from what the verified numbers render: line" in line for line in broken)
    assert any("reports/quality.json: differs from what the score stage makes" in line for line in broken), out
