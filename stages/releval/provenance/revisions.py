"""The project's git history and DVC records, read: the one place the package runs git or reads dvc.lock.

Git runs with ``GIT_OPTIONAL_LOCKS=0`` (``git status`` must not rewrite the index); a missing git
binary is an answer (None), not a crash. dvc.lock is parsed by :func:`parse_lock` alone. DVC is
imported only inside the functions that need it: this module is imported by light stages too.

* git: :func:`run_git` (the one subprocess call), :func:`git_output`, :func:`show_file`,
  :func:`head_commit`, :func:`commit_date`, :func:`resolve_commit`, :func:`resolve_experiment`,
  :func:`user_name`, :func:`changed_paths`, :func:`code_state`, :func:`input_state`,
  :func:`workspace_state`;
* dvc.lock: :func:`parse_lock`, :func:`read_lock_stages`, :func:`lock_at`, :func:`lock_outs`,
  :func:`output_paths`;
* DVC: :func:`dvc_filesystem`, :func:`dvc_status`, :func:`uncached_outs`, :func:`unavailable_outs`,
  :func:`checkout_revision`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

from releval import paths
from releval.errors import InputError

if TYPE_CHECKING:
    # 0.7 s of dvc that the stages importing this module (score, report, archive) never use
    from dvc.api import DVCFileSystem

LOCK_FILE = paths.DVC_LOCK


# --------------------------------------------------------------------------- git


def run_git(
    args: Sequence[str],
    cwd: str | os.PathLike | None = None,
    *,
    env: Mapping[str, str] | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess | None:
    """``git ARGS`` in ``cwd`` (environment ``env``, else this process's); None when git cannot start."""
    env = {**(os.environ if env is None else env), "GIT_OPTIONAL_LOCKS": "0"}
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=text)
    except OSError:  # git not installed, or no such cwd
        return None


def git_output(args: Sequence[str], cwd: str | os.PathLike | None = None) -> str | None:
    """The stdout of ``git ARGS``; None when git fails or cannot start."""
    done = run_git(args, cwd)
    return done.stdout if done is not None and done.returncode == 0 else None


def show_file(rev: str, path: str, cwd: str | os.PathLike | None = None, *, check: bool = False) -> bytes | None:
    """The bytes of ``path`` at revision ``rev`` (git's ``REV:PATH``: a path starting ``./`` is
    relative to ``cwd``, any other to the repository root).

    When git cannot show it: None, or with ``check`` an InputError naming ``REV:PATH`` and git's
    last line of complaint.
    """
    spec = f"{rev}:{path}"
    done = run_git(["show", spec], cwd, text=False)
    if done is not None and done.returncode == 0:
        return done.stdout
    if not check:
        return None
    if done is None:
        raise InputError("git is not installed", file=spec)
    message = done.stderr.decode("utf-8", "replace").strip().splitlines()
    raise InputError(f"git show failed: {message[-1] if message else done.returncode}", file=spec)


def _rev_parse_commit(repo: str | os.PathLike | None, rev: str) -> subprocess.CompletedProcess | None:
    """``git rev-parse --verify REV^{commit}``: stdout the full hash when ``rev`` names a commit."""
    return run_git(["rev-parse", "--verify", f"{rev}^{{commit}}"], repo)


def _commit_of(done: subprocess.CompletedProcess | None) -> str | None:
    if done is None or done.returncode != 0:
        return None
    return done.stdout.strip() or None


def head_commit(repo: str | os.PathLike | None = None) -> str | None:
    """The commit HEAD names; None outside a git repository, before the first commit, or without git."""
    return _commit_of(_rev_parse_commit(repo, "HEAD"))


def resolve_commit(repo: str | os.PathLike, rev: str) -> str:
    """The full hash of the commit ``rev`` names (a hash, branch, tag, HEAD~1, ...)."""
    commit = _commit_of(_rev_parse_commit(repo, rev))
    if commit is None:
        raise InputError(f"unknown git revision {rev!r}", file=str(repo), field="rev")
    return commit


def commit_date(repo: str | os.PathLike, commit: str) -> str | None:
    """The committer date of ``commit``, ISO 8601; None when unknown."""
    out = git_output(["show", "-s", "--format=%cI", commit], repo)
    return out.strip() if out else None


def resolve_experiment(repo: str | os.PathLike, name: str) -> str:
    """The commit of the DVC experiment ``name`` (its name, or a full refs/exps/... ref)."""
    listing = git_output(["for-each-ref", "--format=%(refname) %(objectname)", "refs/exps/"], repo)
    matches = []
    for line in (listing or "").split("\n"):
        if not line.strip():
            continue
        ref, sha = line.rsplit(" ", 1)
        if ref == name or ref.rsplit("/", 1)[-1] == name:
            matches.append((ref, sha))
    if not matches:
        raise InputError(
            f"no DVC experiment named {name!r} (see `dvc exp list --all-commits`)", file=str(repo), field="exp"
        )
    if len(matches) > 1:
        raise InputError(
            f"experiment name {name!r} is ambiguous: {', '.join(r for r, _ in matches)}; pass the full ref",
            file=str(repo),
            field="exp",
        )
    return matches[0][1]


def user_name(cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> str:
    """``git config user.name`` ("" when unset or without git)."""
    done = run_git(["config", "user.name"], cwd, env=env)
    return done.stdout.strip() if done is not None and done.returncode == 0 else ""


def changed_paths(repo: str | os.PathLike) -> list[str] | None:
    """Every path that differs from HEAD (untracked files included; a rename: its new path), in
    git's order; None outside a git repository."""
    status = git_output(["status", "--porcelain=v1", "-z", "--untracked-files=all"], repo)
    if status is None:
        return None
    paths = []
    entries = status.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":
            i += 1  # a rename or copy is followed by its source path
        paths.append(path)
    return paths


def _status_lines(root: str | os.PathLike | None, untracked_files: str, pathspecs: Sequence[str] = ()) -> list[str]:
    """The non-blank lines of ``git status --porcelain`` (each ``XY PATH``); [] when it fails."""
    args = ["status", "--porcelain", f"--untracked-files={untracked_files}"]
    out = git_output([*args, "--", *pathspecs] if pathspecs else args, root)
    return [line for line in (out or "").splitlines() if line.strip()]


def code_state(
    root: str | os.PathLike = ".", pathspecs: Sequence[str] = (), exclude: Sequence[str] = ()
) -> dict[str, Any]:
    """The paths under ``pathspecs`` but not under ``exclude`` (untracked ones too) that differ
    from HEAD, and the last commit that changed one of them (HEAD holds that commit's version of
    every such path): ``{"commit", "dirty", "dirty_paths"}``; outside git, no commit and nothing
    dirty. ``exclude`` entries are glob patterns (``**/.gitignore``). A commit that changes none of
    these paths (one that only adds results) leaves ``commit`` as it was, so a clone of it reports
    what the workspace that made the results reported."""
    head = head_commit(root)
    if head is None:
        return {"commit": None, "dirty": False, "dirty_paths": []}
    specs = [*(pathspecs or (["."] if exclude else [])), *(f":(exclude,glob){path}" for path in exclude)]
    paths = sorted({line[3:] for line in _status_lines(root, "all", specs)})
    last = git_output(["log", "-1", "--format=%H", head, "--", *specs], root) if specs else None
    return {"commit": (last or "").strip() or head, "dirty": bool(paths), "dirty_paths": paths}


# What a result is computed from: code, pipeline, configuration, data and judgments. What the
# pipeline writes is not an input: DVC outputs (NOT_INPUTS and every output dvc.lock records; the
# committed archive and reports/ among them), dvc.lock, and the .gitignore files DVC maintains.
INPUT_PATHS = ("stages", "conf", "dvc.yaml", paths.PARAMS, "pyproject.toml", "requirements", "dvc_plots", paths.DATA)
NOT_INPUTS = (paths.WORK, paths.MODELS, paths.ARCHIVE, paths.REPORTS, "**/.gitignore")


def input_state(root: str | os.PathLike = ".", lock: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:func:`code_state` of the inputs (INPUT_PATHS, less NOT_INPUTS and ``lock``'s outputs):
    the commit whose inputs HEAD holds, and the inputs that differ from it."""
    outputs = output_paths(lock or {})
    return code_state(root, INPUT_PATHS, [*NOT_INPUTS, *outputs])


def workspace_state(root: str | os.PathLike) -> dict[str, Any]:
    """HEAD and git's status line of each tracked file that differs from it:
    ``{"commit", "dirty", "changes"}``, plus ``note`` (dirty None) when git cannot say."""
    done = _rev_parse_commit(root, "HEAD")
    commit = _commit_of(done)
    if commit is None:
        note = "git is not installed" if done is None else "not a git repository or no commit yet"
        return {"commit": None, "dirty": None, "changes": [], "note": note}
    changes = _status_lines(root, "no")
    return {"commit": commit, "dirty": bool(changes), "changes": changes}


# --------------------------------------------------------------------------- dvc.lock


@dataclass(frozen=True)
class StageOut:
    """One DVC stage output, as dvc.lock records it."""

    stage: str
    path: str
    md5: str | None
    params: dict[str, Any] | None


# libyaml's parser where PyYAML was built with it: the report stage and the audit read dvc.lock
# (60-odd stages) and the pure-Python parser took seconds of each; the objects are the same.
LOCK_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_lock(text: str | None, *, source: str = LOCK_FILE) -> dict[str, Any]:
    """A dvc.lock's text as a mapping ({} for no text, or text that is not a mapping)."""
    if not text:
        return {}
    try:
        lock = yaml.load(text, Loader=LOCK_LOADER)
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=source) from None
    return lock if isinstance(lock, dict) else {}


def read_lock_stages(root: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The workspace dvc.lock's stages: name -> {cmd, deps, params, outs} (deps/outs as lists of
    {path, md5, ...}); an error when there is no dvc.lock or it holds no stages."""
    path = Path(root) / LOCK_FILE
    if not path.exists():
        raise InputError("missing; nothing has been run with `dvc repro`", file=LOCK_FILE)
    stages = parse_lock(path.read_text(encoding="utf-8")).get("stages")
    if not isinstance(stages, dict):
        raise InputError("no 'stages' mapping", file=LOCK_FILE, field="stages")
    return stages


def lock_at(repo: str | os.PathLike, commit: str) -> dict[str, Any]:
    """The dvc.lock committed at ``commit``, parsed; an error when the commit has none."""
    data = show_file(commit, LOCK_FILE, repo)
    if data is None:
        raise InputError(f"commit {commit[:12]} has no dvc.lock", file=str(repo), field="rev")
    return parse_lock(data.decode("utf-8"), source=f"{commit[:12]}:{LOCK_FILE}")


def lock_outs(lock: Mapping[str, Any], under: str) -> list[StageOut]:
    """The stage outputs in a parsed dvc.lock at or below ``under`` (posix paths), sorted by path."""
    root = PurePosixPath(under)
    found = []
    for stage, entry in (lock.get("stages") or {}).items():
        if not isinstance(entry, dict):
            continue
        params = entry.get("params") or None
        for out in entry.get("outs") or []:
            path = PurePosixPath(str(out.get("path", "")))
            if path == root or root in path.parents:
                found.append(StageOut(stage=str(stage), path=path.as_posix(), md5=out.get("md5"), params=params))
    return sorted(found, key=lambda o: o.path)


def output_paths(lock: Mapping[str, Any]) -> list[str]:
    """Every output path of every stage in a parsed dvc.lock."""
    return sorted(
        {
            str(out.get("path"))
            for entry in (lock.get("stages") or {}).values()
            if isinstance(entry, dict)
            for out in entry.get("outs") or []
            if out.get("path")
        }
    )


# --------------------------------------------------------------------------- DVC


def dvc_filesystem(repo: str | os.PathLike, rev: str) -> DVCFileSystem:
    """The repository at ``rev`` as DVC sees it: git-tracked files and DVC outputs (from the cache)."""
    # 0.7 s of dvc that the stages importing this module (score, report, archive) never use
    from dvc.api import DVCFileSystem

    return DVCFileSystem(url=str(repo), rev=rev)


def dvc_status(root: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """DVC's own view: (``Repo.status()``, ``Repo.data_status(granular=True)``)."""
    # 0.7 s of dvc that the stages importing this module (score, report, archive) never use
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        status = repo.status()
        try:
            data = repo.data_status(granular=True, untracked_files="no")
        except Exception:  # data_status needs git; stage status alone still names the stage
            data = {}
    return status, data


def uncached_outs(root: str | os.PathLike) -> set[str]:
    """Outputs that dvc.yaml declares with ``cache: false`` (no cache can restore them)."""
    # 0.7 s of dvc that the stages importing this module (score, report, archive) never use
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {out.def_path for stage in repo.index.stages for out in stage.outs if not out.use_cache}


def unavailable_outs(root: str | os.PathLike) -> dict[str, str | None]:
    """Outputs dvc.yaml declares that are not on disk and that nothing here can restore: a cached
    output whose recorded hash the local DVC cache lacks (a fresh clone without a remote), or an
    uncached one git does not track (a local build such as data/models). Path -> dvc.lock's hash."""
    # 0.7 s of dvc that the stages importing this module (score, report, archive) never use
    from dvc.repo import Repo

    root = Path(root)
    found: dict[str, str | None] = {}
    with Repo(str(root)) as repo:
        for stage in repo.index.stages:
            for out in stage.outs:
                path = Path(os.path.relpath(out.fs_path, repo.root_dir)).as_posix()
                if (root / path).exists():
                    continue
                if out.use_cache and out.hash_info and not out.changed_cache():
                    continue  # `dvc checkout` restores it
                if not out.use_cache and git_output(["ls-files", "--", path], root):
                    continue  # committed: a deleted file, not an unavailable one
                found[path] = out.hash_info.value if out.hash_info else None
    return found


@contextlib.contextmanager
def checkout_revision(root: str | os.PathLike, rev: str) -> Iterator[Path]:
    """A temporary copy of the repository at git revision ``rev``, data restored by DVC as far as
    the cache holds it.

    ``git clone --shared`` (the original repository is not touched: no worktree, no ref) and a
    detached checkout of the commit, then ``dvc checkout`` from the original repository's cache
    (``cache.dir`` set in the copy's .dvc/config.local). Outputs declared ``cache: false`` that
    git does not track are not in any cache; they are copied from the working tree and DVC's
    status then says whether they match what the revision recorded. What the cache lacks (all of
    it, in a fresh clone) stays absent: :func:`unavailable_outs` names it.
    """
    root = Path(root).resolve()
    done = _rev_parse_commit(root, rev)
    commit = _commit_of(done)
    if commit is None:
        why = "git is not installed" if done is None else done.stderr.strip()
        raise InputError(f"not a commit in this repository: {why}", field="--rev")
    tmp = Path(tempfile.mkdtemp(prefix="releval-audit-"))
    try:
        copy = tmp / "repo"
        for args in (
            ["clone", "--quiet", "--shared", "--no-checkout", str(root), str(copy)],
            ["-C", str(copy), "checkout", "--quiet", "--detach", commit],
        ):
            done = run_git(args)
            if done is None or done.returncode != 0:
                why = "git is not installed" if done is None else done.stderr.strip()
                raise InputError(f"{' '.join(['git', *args[:2]])} failed: {why}", field="--rev")
        # 0.7 s of dvc that the stages importing this module (score, report, archive) never use
        from dvc.repo import Repo

        with Repo(str(root)) as repo:
            cache_dir = repo.cache.local_cache_dir
        (copy / ".dvc").mkdir(exist_ok=True)
        with open(copy / ".dvc" / "config.local", "a", encoding="utf-8") as fh:
            fh.write(f"[cache]\n    dir = {cache_dir}\n")
        lock = read_lock_stages(copy) if (copy / LOCK_FILE).exists() else {}
        uncached = uncached_outs(copy)
        for stage in lock.values():
            for out in stage.get("outs") or []:
                source, target = root / out["path"], copy / out["path"]
                if not target.exists() and source.exists() and out["path"] in uncached:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)
        dvc_log = logging.getLogger("dvc")
        level = dvc_log.level
        dvc_log.setLevel(logging.ERROR)  # "no file hash info found": what the cache lacks, the audit reports
        try:
            with Repo(str(copy)) as repo:
                repo.checkout(force=True)
        except Exception:  # noqa: BLE001 - an object missing from the cache: the status check names the file
            pass
        finally:
            dvc_log.setLevel(level)
        yield copy
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
