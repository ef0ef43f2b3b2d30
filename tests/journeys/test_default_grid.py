"""J1 (the default grid), J5 (iterate), J6 (the Python API) and J7 (a teammate's clone), in one clone
of HEAD, each step the block of the docs its id names (`make test-journeys`).

J1 is a newcomer's first hour: `make repro` on a fresh clone, then every command the docs give for
reading, comparing, gating, auditing and validating what it produced, and opening the holdout. J5
changes a parameter, reruns, commits and compares across commits. J6 runs the docs' Python example
and checks it gives the command line's verdict. J7 clones the committed result as a teammate would.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from support.doc_blocks import step
from support.journey import Shell, fresh_clone, newcomer_environment


def fresh_clone_of(origin: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(origin), str(dest)], check=True)
    return dest


@pytest.fixture(scope="module")
def shell(tmp_path_factory) -> Shell:
    root = tmp_path_factory.mktemp("j1")
    clone = fresh_clone(root / "releval")
    return Shell(clone, root / "logs", newcomer_environment())


def test_make_repro_on_a_fresh_clone(shell):
    ran = shell.run("default/repro", timeout=5400)
    assert "Running stage 'report'" in ran.output
    # make repro ends with the judging-debt summary, silent when every configuration is judged deeply enough
    assert "WARNING: judged@" not in ran.output
    assert (shell.cwd / "reports" / "metrics.json").is_file()


def test_releval_and_dvc_are_on_path_once_activated(shell):
    before = shell.run_text("no-activation", "releval --help", expect=None)
    assert before.code == 127 and "releval: command not found" in before.output
    ran = shell.run("default/activate")
    assert "compare" in ran.output and shell.activated


def test_compare_and_power(shell):
    ran = shell.run("default/compare")
    assert "1. candidate rrf(minilm,bm25)/c256 vs baseline minilm/c256" in ran.output
    result = next(line for line in ran.output.splitlines() if line.startswith("4. result:"))
    assert result.endswith("→ INCONCLUSIVE"), result
    assert "grid: ndcg@10 vs baseline minilm/c256 on 85 queries" in ran.output
    assert "queries" in ran.output.strip().splitlines()[-1]  # releval power's answer


def test_the_gate_in_both_directions_passes_and_names_the_sealed_queries(shell):
    ran = shell.run("default/gate")
    verdicts = [line for line in ran.output.splitlines() if line.startswith("gate: ")]
    assert len(verdicts) == 2 and all(v.startswith("gate: PASS") for v in verdicts), verdicts
    assert ran.output.count("sealed holdout query not checked (q011)") == 2


def test_the_gate_with_a_margin_fails_a_drop_it_cannot_rule_out(shell):
    ran = shell.run("default/gate-margin", expect=1)
    assert "gate: FAIL — not shown non-inferior" in ran.output


def test_chunk_size_compared_at_an_equal_budget(shell):
    """docs/how-to/chunk-size.md: v4's evidence spans give every chunking passage-level figures, compared
    paired at a token budget over the queries whose judgments carry spans; report.md has the section."""
    ran = shell.run("default/chunk-size")
    assert "1. candidate minilm/c512 vs baseline minilm/c256" in ran.output
    result = next(line for line in ran.output.splitlines() if line.startswith("4. result:"))
    assert result.startswith("4. result: evidence_recall@1024tok "), result
    assert re.search(r"\d+ queries compared of \d+", ran.output), ran.tail()
    report = (shell.cwd / "reports" / "report.md").read_text()
    assert "## Chunk size at equal budgets" in report and "| `minilm` | 1,024 tokens | c256 " in report


def test_judgments_validate_and_the_debt_is_paid(shell):
    ran = shell.run("default/judgments")
    assert "ok: dataset pydocs-v3 (params.yaml)" in ran.output
    assert "judgment set v1: 1717 judgments" in ran.output and "judgment set v3: 5328 judgments" in ran.output
    assert "total: 0 distinct pairs" in ran.output and "nothing to judge: debt.csv not written" in ran.output


def test_audit_one_number_and_all_of_them(shell):
    ran = shell.run("default/audit")
    assert "minilm/c256 ndcg@10" in ran.output
    assert "BROKEN" not in ran.output


def test_open_the_holdout(shell):
    ran = shell.run("default/holdout")
    log = [json.loads(line) for line in (shell.cwd / "reports" / "holdout_access.jsonl").read_text().splitlines()]
    assert log and log[-1]["split"] in ("holdout", "all") or log
    assert (shell.cwd / "reports" / "holdout" / "metrics.json").is_file(), ran.tail()


# --------------------------------------------------------------------------- J6: the Python API


def line4_figures(text: str) -> tuple[str, str, str]:
    """(Δ, interval, verdict) of a compare report's line 4."""
    line = next(x for x in text.splitlines() if x.startswith("4. result:"))
    found = re.search(r"Δ ([+-]\d\.\d{4}), 95% CI \[([+-]\d\.\d{4}), ([+-]\d\.\d{4})\].*→ (\w[\w-]*)", line)
    assert found, line
    return found[1], f"[{found[2]}, {found[3]}]", found[4].lower()


def test_the_python_api_gives_the_command_line_s_verdict(shell):
    code = step("api/compare").text
    ran = shell.run_text("api/compare", f"python - <<'PY'\n{code}PY\n")
    figures, verdict = ran.output.splitlines()[1], ran.output.splitlines()[2].split(" ")[0]
    delta, interval = figures.split(" ")[0], re.search(r"\[[^\]]+\]", figures)[0]
    cli = shell.run_text("api/cli", "releval compare minilm/c256 'rrf(minilm,bm25)/c256'")
    assert (delta, interval, verdict) == line4_figures(cli.output)


# --------------------------------------------------------------------------- J5: iterate


def test_change_rerun_commit_and_compare_across_commits(shell):
    ran = shell.run("iterate/change", timeout=3600)
    assert "fusions.rrf.k" in ran.output  # dvc params diff
    assert "1. candidate rrf(minilm,bm25)/c256 vs baseline HEAD~1:rrf(minilm,bm25)/c256" in ran.output
    assert "BROKEN" not in ran.output
    ran_stages = re.findall(r"Running stage '([^']+)'", ran.output)
    assert ran_stages and not any(s.startswith(("encode", "index", "chunk", "retrieve")) for s in ran_stages)


# --------------------------------------------------------------------------- J7: a teammate's clone


def test_a_teammate_sees_and_audits_the_committed_numbers(shell, tmp_path_factory):
    teammate = fresh_clone_of(shell.cwd, tmp_path_factory.mktemp("j7") / "teammate")
    other = Shell(teammate, shell.logs / "teammate", newcomer_environment())
    ran = other.run("teammate/see", timeout=3600)
    assert "reports/quality.json" in ran.output
    assert "rrf(minilm,bm25)/c256" in ran.output
    assert "BROKEN" not in ran.output and "not available here" in ran.output


def test_every_step_was_timed(shell):
    """The figures the closing notes quote come from these logs: each step's wall time."""
    lines = [f"{name}: {seconds:.1f} s" for name, seconds in shell.timings.items()]
    (shell.logs / "timings.txt").write_text("\n".join(lines) + "\n")
    assert Path(shell.logs / "timings.txt").read_text()
