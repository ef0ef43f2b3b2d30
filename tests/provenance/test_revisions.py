"""releval.provenance.revisions: git and dvc.lock read in real git repositories (tmp_path), no mocks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from releval.errors import InputError
from releval.provenance import revisions

LOCK = {
    "schema": "2.0",
    "stages": {
        "retrieve@toy-c1": {
            "cmd": "python stages/retrieve.py",
            "params": {"params.yaml": {"retriever.dense": {"top_k": 5}}},
            "outs": [{"path": "data/work/runs/model/toy/c1", "md5": "d1.dir"}],
        },
        "score": {
            "cmd": "python stages/score.py",
            "outs": [{"path": "reports/grid.md", "md5": "g"}, {"path": "data/work/trec", "md5": "t.dir"}],
        },
    },
}


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    sh(path, "init", "-q")
    sh(path, "config", "user.email", "t@releval.local")
    sh(path, "config", "user.name", "releval tests")
    return path


def commit_all(path: Path, message: str) -> str:
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", message)
    return sh(path, "rev-parse", "HEAD").strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- git


def test_run_git_answers_none_when_git_cannot_start(tmp_path):
    assert revisions.run_git(["status"], tmp_path / "no-such-folder") is None
    assert revisions.git_output(["status"], tmp_path / "no-such-folder") is None
    assert revisions.git_output(["rev-parse", "HEAD"], tmp_path) is None  # not a repository


def test_commits_resolve_and_carry_a_date(tmp_path):
    repo = git_repo(tmp_path / "repo")
    assert revisions.head_commit(repo) is None  # no commit yet
    write(repo / "a.txt", "1\n")
    first = commit_all(repo, "one")
    write(repo / "a.txt", "2\n")
    second = commit_all(repo, "two")
    assert revisions.head_commit(repo) == second
    assert revisions.resolve_commit(repo, "HEAD~1") == first
    assert revisions.resolve_commit(repo, first[:10]) == first
    assert revisions.commit_date(repo, first) == sh(repo, "show", "-s", "--format=%cI", first).strip()
    assert revisions.commit_date(repo, "0" * 40) is None
    with pytest.raises(InputError, match="unknown git revision 'nope'") as err:
        revisions.resolve_commit(repo, "nope")
    assert err.value.field == "rev" and err.value.file == str(repo)


def test_show_file_reads_a_committed_version(tmp_path):
    repo = git_repo(tmp_path / "repo")
    write(repo / "sub" / "f.bin", "old\n")
    write(repo / "f.bin", "root\n")
    commit = commit_all(repo, "one")
    write(repo / "sub" / "f.bin", "new\n")
    assert revisions.show_file(commit, "sub/f.bin", repo) == b"old\n"
    assert revisions.show_file("HEAD", "./f.bin", repo / "sub") == b"old\n"  # ./ is relative to cwd
    assert revisions.show_file("HEAD", "f.bin", repo / "sub") == b"root\n"  # otherwise to the root
    assert revisions.show_file("HEAD", "missing.txt", repo) is None
    with pytest.raises(InputError, match="git show failed: .*missing.txt") as err:
        revisions.show_file("HEAD", "./missing.txt", repo, check=True)
    assert err.value.file == "HEAD:./missing.txt"


def test_changed_paths_name_each_differing_file_once(tmp_path):
    assert revisions.changed_paths(tmp_path) is None  # not a repository
    repo = git_repo(tmp_path / "repo")
    write(repo / "kept.txt", "k\n")
    write(repo / "old name.txt", "r\n")
    commit_all(repo, "one")
    assert revisions.changed_paths(repo) == []
    write(repo / "kept.txt", "changed\n")
    write(repo / "new" / "untracked.txt", "u\n")
    sh(repo, "mv", "old name.txt", "renamed.txt")
    assert sorted(revisions.changed_paths(repo)) == ["kept.txt", "new/untracked.txt", "renamed.txt"]


def test_code_state_is_head_and_the_differing_code_paths(tmp_path):
    assert revisions.code_state(tmp_path, ("stages",)) == {"commit": None, "dirty": False, "dirty_paths": []}
    repo = git_repo(tmp_path / "repo")
    write(repo / "stages" / "a.py", "x = 1\n")
    write(repo / "notes.md", "n\n")
    head = commit_all(repo, "one")
    assert revisions.code_state(repo, ("stages",)) == {"commit": head, "dirty": False, "dirty_paths": []}
    write(repo / "stages" / "a.py", "x = 2\n")
    write(repo / "stages" / "b.py", "y = 1\n")
    write(repo / "notes.md", "m\n")
    assert revisions.code_state(repo, ("stages", "params.yaml")) == {
        "commit": head,
        "dirty": True,
        "dirty_paths": ["stages/a.py", "stages/b.py"],
    }
    assert revisions.code_state(repo)["dirty_paths"] == ["notes.md", "stages/a.py", "stages/b.py"]


def test_code_state_excludes_globs_and_names_the_last_commit_that_changed_a_path(tmp_path):
    repo = git_repo(tmp_path / "repo")
    write(repo / "stages" / "a.py", "x = 1\n")
    write(repo / "reports" / "r.md", "r\n")
    first = commit_all(repo, "code")
    write(repo / "reports" / "r.md", "s\n")
    write(repo / "stages" / ".gitignore", "/x\n")
    results = commit_all(repo, "results only")
    state = revisions.code_state(repo, ("stages",), ("**/.gitignore",))
    assert state == {"commit": first, "dirty": False, "dirty_paths": []}  # HEAD's stages/ are first's
    assert revisions.code_state(repo)["commit"] == results
    write(repo / "stages" / "sub" / ".gitignore", "/y\n")
    assert not revisions.code_state(repo, ("stages",), ("**/.gitignore",))["dirty"]
    assert revisions.code_state(repo, (), ("reports", "**/.gitignore"))["commit"] == first  # all but these


def test_input_state_is_code_params_data_and_judgments_not_outputs(tmp_path):
    repo = git_repo(tmp_path / "repo")
    for path in ("stages/s.py", "conf/c.yaml", "params.yaml", "dvc.yaml", "data/judgments/v1/j.jsonl", "README.md"):
        write(repo / path, "1\n")
    inputs = commit_all(repo, "inputs")
    lock = {"stages": {"x": {"outs": [{"path": "data/extra/out.parquet", "md5": "1"}]}}}
    for path in (
        "dvc.lock",
        "reports/card.json",
        "data/archive/index/p.parquet",
        "data/work/w",
        "data/models/m",
        "data/extra/out.parquet",
        "data/.gitignore",
        "README.md",
    ):
        write(repo / path, "2\n")
    assert revisions.input_state(repo, lock) == {"commit": inputs, "dirty": False, "dirty_paths": []}
    commit_all(repo, "results")
    assert revisions.input_state(repo, lock)["commit"] == inputs
    for path in ("stages/s.py", "conf/c.yaml", "params.yaml", "dvc.yaml", "data/judgments/v1/j.jsonl"):
        write(repo / path, "3\n")
    assert revisions.input_state(repo, lock) == {
        "commit": inputs,
        "dirty": True,
        "dirty_paths": ["conf/c.yaml", "data/judgments/v1/j.jsonl", "dvc.yaml", "params.yaml", "stages/s.py"],
    }


def test_unavailable_outs_are_what_neither_the_workspace_nor_the_cache_holds(tmp_path):
    repo = git_repo(tmp_path / "repo")
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=repo, check=True, capture_output=True)
    (repo / "dvc.yaml").write_text(
        "stages:\n"
        "  a:\n    cmd: echo a > cached.txt\n    outs: [cached.txt]\n"
        "  b:\n    cmd: echo b > local.txt\n    outs: [{local.txt: {cache: false}}]\n"
        "  c:\n    cmd: echo c > kept.txt\n    outs: [{kept.txt: {cache: false}}]\n"
    )
    (repo / ".gitignore").write_text("/local.txt\n")
    subprocess.run([sys.executable, "-m", "dvc", "repro", "-q"], cwd=repo, check=True, capture_output=True)
    assert revisions.unavailable_outs(repo) == {}
    (repo / "cached.txt").unlink()
    (repo / "local.txt").unlink()
    assert revisions.unavailable_outs(repo) == {"local.txt": "3b5d5c3712955042212316173ccf37be"}  # cached: restorable
    commit_all(repo, "run")  # kept.txt is committed: deleting it is not "unavailable"
    (repo / "kept.txt").unlink()
    for entry in (repo / ".dvc" / "cache").iterdir():
        shutil.rmtree(entry)
    assert set(revisions.unavailable_outs(repo)) == {"cached.txt", "local.txt"}


def test_workspace_state_lists_tracked_changes_as_git_prints_them(tmp_path):
    assert revisions.workspace_state(tmp_path) == {
        "commit": None,
        "dirty": None,
        "changes": [],
        "note": "not a git repository or no commit yet",
    }
    repo = git_repo(tmp_path / "repo")
    write(repo / "a.txt", "1\n")
    head = commit_all(repo, "one")
    write(repo / "untracked.txt", "u\n")
    assert revisions.workspace_state(repo) == {"commit": head, "dirty": False, "changes": []}
    write(repo / "a.txt", "2\n")
    assert revisions.workspace_state(repo) == {"commit": head, "dirty": True, "changes": [" M a.txt"]}


def test_user_name_reads_git_config(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    assert revisions.user_name(tmp_path, env) == ""
    repo = git_repo(tmp_path / "repo")
    assert revisions.user_name(repo, env) == "releval tests"


def test_experiments_resolve_by_name_or_ref(tmp_path):
    repo = git_repo(tmp_path / "repo")
    write(repo / "a.txt", "1\n")
    commit = commit_all(repo, "one")
    sh(repo, "update-ref", "refs/exps/ab/cdef/rrf-k30", commit)
    sh(repo, "update-ref", "refs/exps/12/3456/twice", commit)
    sh(repo, "update-ref", "refs/exps/78/9abc/twice", commit)
    assert revisions.resolve_experiment(repo, "rrf-k30") == commit
    assert revisions.resolve_experiment(repo, "refs/exps/12/3456/twice") == commit
    with pytest.raises(InputError, match="experiment name 'twice' is ambiguous"):
        revisions.resolve_experiment(repo, "twice")
    with pytest.raises(InputError, match=r"no DVC experiment named 'nope' \(see `dvc exp list --all-commits`\)"):
        revisions.resolve_experiment(repo, "nope")


def test_checkout_revision_refuses_what_is_no_commit(tmp_path):
    repo = git_repo(tmp_path / "repo")
    with pytest.raises(InputError, match="not a commit in this repository: fatal") as err:
        with revisions.checkout_revision(repo, "nope"):
            pass
    assert err.value.field == "--rev"


# --------------------------------------------------------------------------- dvc.lock


def test_parse_lock():
    assert revisions.parse_lock(None) == {} and revisions.parse_lock("") == {}
    assert revisions.parse_lock("- a\n- b\n") == {}  # not a mapping
    assert revisions.parse_lock(yaml.safe_dump(LOCK)) == LOCK
    with pytest.raises(InputError, match="not valid YAML") as err:
        revisions.parse_lock("stages: [unclosed\n", source="abc:dvc.lock")
    assert err.value.file == "abc:dvc.lock"


def test_read_lock_stages_names_what_is_wrong(tmp_path):
    with pytest.raises(InputError, match="missing; nothing has been run with `dvc repro`") as err:
        revisions.read_lock_stages(tmp_path)
    assert err.value.file == "dvc.lock"
    write(tmp_path / "dvc.lock", "schema: '2.0'\n")
    with pytest.raises(InputError, match="no 'stages' mapping") as err:
        revisions.read_lock_stages(tmp_path)
    assert err.value.field == "stages"
    write(tmp_path / "dvc.lock", "stages: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        revisions.read_lock_stages(tmp_path)
    write(tmp_path / "dvc.lock", yaml.safe_dump(LOCK))
    assert revisions.read_lock_stages(tmp_path) == LOCK["stages"]


def test_lock_at_reads_the_committed_lock(tmp_path):
    repo = git_repo(tmp_path / "repo")
    write(repo / "README", "x\n")
    bare = commit_all(repo, "no lock")
    with pytest.raises(InputError, match=f"commit {bare[:12]} has no dvc.lock"):
        revisions.lock_at(repo, bare)
    write(repo / "dvc.lock", yaml.safe_dump(LOCK))
    locked = commit_all(repo, "lock")
    write(repo / "dvc.lock", "stages: {}\n")  # the workspace's lock is not the commit's
    assert revisions.lock_at(repo, locked) == LOCK


def test_lock_outputs():
    outs = revisions.lock_outs(LOCK, "data/work/runs")
    assert outs == [
        revisions.StageOut(
            "retrieve@toy-c1",
            "data/work/runs/model/toy/c1",
            "d1.dir",
            {"params.yaml": {"retriever.dense": {"top_k": 5}}},
        )
    ]
    assert [o.path for o in revisions.lock_outs(LOCK, "data/work")] == ["data/work/runs/model/toy/c1", "data/work/trec"]
    assert revisions.output_paths(LOCK) == ["data/work/runs/model/toy/c1", "data/work/trec", "reports/grid.md"]
    assert revisions.output_paths({}) == []
