"""J8 (the team workflow), in one fresh clone, each step the docs' block its id names (`make test-journeys`):
the CI recipe of docs/how-to/gate-in-ci.md and the S3 remote of docs/how-to/share.md.

A small grid (WordLlama, BM25 and their fusion on the default data) is committed, a change is
committed on top, and `make ci-gate` gates it against the commit before, as a pull request's job
does: the verdict and report.md go to the summary file. Then the workflow itself,
.github/workflows/eval.yml, has its shell steps run as GitHub runs them on a pull request of that
change into a branch at the commit before it. Last, the results are pushed to an S3 remote (moto's server on
loopback, as the how-to starts it) and pulled into a teammate's clone, which sees the same bytes and
audits every link.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from support.commands import ran_stages
from support.doc_blocks import all_blocks, step
from support.journey import Shell, fresh_clone, newcomer_environment
from support.projects import output_bytes

FUSION = "rrf(wordllama,bm25)/c256"
S3_PORT = 9199  # the port docs/how-to/share.md starts moto's server on
WORKFLOW = Path(".github") / "workflows" / "eval.yml"
# What the repository's variables hold in the simulated pull request (docs/how-to/gate-in-ci.md, ci/gate-rule).
REPOSITORY_VARIABLES = {
    "RELEVAL_BASELINE_CONFIG": FUSION,
    "RELEVAL_CANDIDATE": "",
    "RELEVAL_GATE_ARGS": "--must-rank 10",
}


def params(shell: Shell) -> dict:
    return yaml.safe_load((shell.cwd / "params.yaml").read_text())


def git(shell: Shell, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=shell.cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def shell(tmp_path_factory) -> Shell:
    root = tmp_path_factory.mktemp("team")
    clone = fresh_clone(root / "releval")
    user = Shell(clone, root / "logs", newcomer_environment())
    user.run_text("setup", "make setup && source .venv/bin/activate", timeout=3600)  # the README's install
    return user


# --------------------------------------------------------------------------- docs/how-to/gate-in-ci.md


def test_a_small_grid_committed(shell):
    ran = shell.run("ci/first-commit", timeout=3600)
    grid = params(shell)["grid"]
    assert (grid["models"], grid["chunkings"], grid["fused"], grid["reranked"], grid["baseline"]) == (
        ["wordllama"],
        ["c256"],
        {},
        {},
        "bm25/c256",
    )
    assert "Running stage 'fuse@rrf-wordllama-c256'" in ran.output, ran.tail()
    assert not git(shell, "status", "--porcelain")


def test_the_change_a_pull_request_brings(shell):
    ran = shell.run("ci/change", timeout=3600)
    stages = ran_stages(ran.output)
    assert "fuse@rrf-wordllama-c256" in stages and not any(s.startswith(("encode", "bm25", "chunk")) for s in stages)
    assert params(shell)["fusions"]["rrf"]["k"] == 30
    assert not git(shell, "status", "--porcelain")


def test_the_gate_fails_a_broken_must_never_break_query_and_summarizes(shell):
    summary = shell.cwd / "summary.md"
    ran = shell.run("ci/gate", expect=2)  # make turns the gate's 1 into its own 2
    assert f"releval gate --baseline 'HEAD~1:{FUSION}' --candidate '{FUSION}'" in ran.output
    assert "metric: passes (inconclusive)" in ran.output, ran.tail()
    assert re.search(
        r"^gate: FAIL — \d+ must-never-break quer(y|ies) without a relevant document in the top 3", ran.output, re.M
    )
    assert "ci-gate: releval gate exited 1 (fail: worse, or a must-never-break query broken)" in ran.output
    text = summary.read_text()
    assert text.startswith("## releval gate: FAIL — ") and "(exit 1: " in text.splitlines()[0]
    assert (shell.cwd / "reports" / "report.md").read_text() in text


def test_the_team_s_rule_passes(shell):
    summary = shell.cwd / "summary.md"
    ran = shell.run("ci/gate-rule")
    assert re.search(r"^gate: PASS — inconclusive: ndcg@10", ran.output, re.M), ran.tail()
    assert "ci-gate: releval gate exited 0 (pass)" in ran.output
    headings = [line for line in summary.read_text().splitlines() if line.startswith("## releval gate: ")]
    assert len(headings) == 2 and headings[1].startswith("## releval gate: PASS") and "(exit 0: pass)" in headings[1]
    assert summary.read_text().count((shell.cwd / "reports" / "report.md").read_text()) == 2


# --------------------------------------------------------------------------- .github/workflows/eval.yml


def workflow(shell: Shell) -> dict:
    return yaml.safe_load((shell.cwd / WORKFLOW).read_text())


def test_the_workflow_is_the_recipe_the_docs_describe(shell):
    flow = workflow(shell)
    assert "pull_request" in flow.get("on", flow.get(True))  # PyYAML reads the key `on` as True
    steps = flow["jobs"]["gate"]["steps"]
    checkout, python = steps[0], steps[1]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["fetch-depth"] == 0
    assert python["uses"].startswith("actions/setup-python@") and python["with"]["python-version"] == "3.11"
    runs = [s.get("run", "") for s in steps]
    assert runs[2] == "make setup"
    assert any("dvc pull" in r and "dvc repro" in r for r in runs)
    assert any(r.startswith("make ci-gate ") and "$GITHUB_STEP_SUMMARY" in r for r in runs)
    publish = steps[-1]
    assert publish["uses"].startswith("actions/upload-artifact@") and publish["with"]["path"] == "reports/report.md"
    assert publish["if"] == "always()"
    # the how-to's excerpt is the workflow's own text
    excerpt = next(b for b in all_blocks() if b.file == "docs/how-to/gate-in-ci.md" and b.language == "yaml")
    assert excerpt.text in (shell.cwd / WORKFLOW).read_text()


def github_expression(expression: str, target_branch: str) -> str:
    """What GitHub puts for ``${{ ... }}`` on a pull request into ``target_branch`` from this repository:
    no secrets (as on a fork's pull request), the repository variables above."""
    name = expression.strip()
    if name == "github.base_ref":
        return target_branch
    if name.startswith("secrets."):
        return ""
    if name.startswith("vars."):
        return REPOSITORY_VARIABLES[name.removeprefix("vars.")]
    raise AssertionError(f"the simulation does not know ${{{{ {name} }}}}")


def test_the_workflow_s_steps_run_as_on_a_pull_request(shell):
    """Each `run:` step after `make setup` (done above), in the clone, as GitHub runs it: bash -eo pipefail,
    the job's and the step's environment, the job summary a file. The pull request is the change (HEAD)
    into a target branch whose tip is the small grid's commit (HEAD~1), fetched as checkout's
    fetch-depth 0 fetches it, as origin/TARGET. The outputs step finds no remote and runs `dvc repro`,
    which has nothing to do on a committed branch; the gate compares the fusion on the two commits."""
    target_branch = "team-target"
    git(shell, "update-ref", f"refs/remotes/origin/{target_branch}", "HEAD~1")
    flow = workflow(shell)
    job = flow["jobs"]["gate"]
    summary = shell.logs / "github-step-summary.md"
    expand = re.compile(r"\$\{\{(.*?)\}\}")
    outputs = []
    for index, item in enumerate(job["steps"]):
        if "run" not in item or item["run"] == "make setup":
            continue
        env = {**shell.env, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_BASE_REF": target_branch, "CI": "true"}
        for key, value in {**job.get("env", {}), **item.get("env", {})}.items():
            env[key] = expand.sub(lambda m: github_expression(m[1], target_branch), str(value))
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", item["run"]],
            cwd=shell.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=3600,
        )
        (shell.logs / f"workflow-step-{index}.log").write_text(
            f"$ {item['run']}\n{done.stdout}\n[exit {done.returncode}]\n"
        )
        assert done.returncode == 0, f"{item.get('name', index)}: exit {done.returncode}\n{done.stdout[-4000:]}"
        outputs.append(done.stdout)
    assert len(outputs) == 2 and "::warning::" not in outputs[0], outputs[0]
    gate = outputs[1]
    assert f"releval gate --baseline 'origin/{target_branch}:{FUSION}' --candidate '{FUSION}' --must-rank 10" in gate
    assert "ci-gate: releval gate exited 0 (pass)" in gate, gate[-4000:]
    text = summary.read_text()
    assert text.startswith("## releval gate: PASS") and (shell.cwd / "reports" / "report.md").read_text() in text


# --------------------------------------------------------------------------- docs/how-to/share.md


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def aws_environment(home: Path) -> dict[str, str]:
    """The credentials share/bucket exports, left in the user's terminal for the steps after it; and no
    AWS configuration of the machine's user, no instance-metadata probe, no proxy for loopback."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_CONFIG_FILE": str(home / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def test_push_to_an_s3_remote_and_a_teammate_pulls_the_same_bytes(shell, tmp_path_factory):
    assert f"-p {S3_PORT}" in step("share/server").text
    assert port_is_free(S3_PORT), f"port {S3_PORT} (docs/how-to/share.md's S3 server) is taken on this machine"
    aws = aws_environment(shell.logs)
    shell.env.update(aws)
    server = shell.start("share/server")
    try:
        server.wait_for(rf"Running on http://127\.0\.0\.1:{S3_PORT}", timeout=120)
        shell.run("share/bucket")
        shell.run("share/remote")
        assert "testing" not in (shell.cwd / ".dvc" / "config").read_text()
        pushed = shell.run("share/push")
        assert re.search(r"\d+ files pushed", pushed.output), pushed.tail()
        assert "Cache and remote 'storage' are in sync." in pushed.output
        assert not git(shell, "status", "--porcelain", "--", ".dvc")

        # The teammate: a git clone of the first clone (the remote named in its .dvc/config), in the first
        # clone's environment (the same commit and pins: a second `make setup` would repeat minutes of pip).
        teammate_dir = tmp_path_factory.mktemp("team-b") / "releval"
        subprocess.run(["git", "clone", "-q", str(shell.cwd), str(teammate_dir)], check=True)
        (teammate_dir / "data" / "wheels").symlink_to((shell.cwd / "data" / "wheels").resolve(), True)
        venv = shell.cwd / ".venv"
        env = {**newcomer_environment(), **aws, "VIRTUAL_ENV": str(venv)}
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
        teammate = Shell(teammate_dir, shell.logs / "teammate", env)
        before = teammate.run_text("audit-before-pull", "releval audit --all")
        assert "not available here" in before.output and "BROKEN" not in before.output, before.tail()

        ran = teammate.run("share/pull", timeout=3600)
        assert re.search(r"\d+ files fetched", ran.output), ran.tail()
        assert ran_stages(ran.output) and all(s.startswith("model@") for s in ran_stages(ran.output)), ran.tail()
        assert "not available here" not in ran.output and ran.output.rstrip().endswith("result: OK"), ran.tail()
        assert not git(teammate, "status", "--porcelain")  # dvc.lock as pushed: the same outputs
        assert output_bytes(teammate_dir, ("reports", "data/work")) == output_bytes(shell.cwd, ("reports", "data/work"))
        grid = [s.run_text("compare-grid", "releval compare --grid").output for s in (shell, teammate)]
        assert grid[0] == grid[1] and FUSION in grid[0]
    finally:
        server.stop()


def test_every_step_was_timed(shell):
    """The figures the closing notes quote come from these logs: each step's wall time."""
    lines = [f"{name}: {seconds:.1f} s" for name, seconds in shell.timings.items()]
    (shell.logs / "timings.txt").write_text("\n".join(lines) + "\n")
    assert (shell.logs / "timings.txt").read_text()
