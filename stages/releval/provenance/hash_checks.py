"""The audit's checks of files against their recorded hashes: dvc.lock's hashes through DVC's own
status (:func:`check_lock`), a run file against lineage.json and the committed archive's copy of it
(:func:`run_file_links`), the judgments' source and each model's weights against their sidecars."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from releval import io, paths
from releval.errors import InputError
from releval.provenance import archive, revisions
from releval.provenance.lineage import JUDGMENTS_META, LINEAGE_FILE, Lineage, _covers, _entry_hash, _rel
from releval.provenance.links import NOT_HERE, Link
from releval.retrieval import runs


def _granular(data: Mapping[str, Any], path: str) -> list[str]:
    """Files inside ``path`` that DVC sees changed since their stage wrote them."""
    found = []
    for kind, changed in (data.get("uncommitted") or {}).items():
        for item in changed:
            if not item.endswith("/") and _covers(path, item) and item.rstrip("/") != path.rstrip("/"):
                found.append(f"{item} {kind}")
    return sorted(found)


def _stage_links(
    name: str,
    changes: Sequence[Any],
    lock_stage: Mapping[str, Any] | None,
    data: Mapping[str, Any],
    in_lineage: bool,
    own_run: str | None = None,
    absent: Callable[[str], bool] | None = None,
) -> list[Link]:
    """Links for one stage's entry in ``dvc status``; a path ``absent`` says nothing here can
    restore is ``unavailable``, whatever DVC calls it (deleted, not in cache, a folder left empty).

    ``own_run``: for the stage that wrote metrics.json, the run folder this number comes from. A
    change inside a folder dep (data/work/runs) that DVC pins to other runs' files leaves this
    number's inputs intact: it is a note, not a broken link of this chain.
    """
    links = []
    recorded = {
        e["path"]: _entry_hash(e) for e in (lock_stage or {}).get("deps", []) + (lock_stage or {}).get("outs", [])
    }
    where = "" if in_lineage else " (outside this number's lineage)"
    for change in changes:
        if isinstance(change, str):
            if change == "always changed":
                links.append(Link("dvc.lock", f"stage {name}", "note", "always changed (no deps)"))
            elif change == "changed command":
                links.append(
                    Link(
                        "dvc.lock",
                        f"stage {name}",
                        "stale" if in_lineage else "note",
                        f"its command changed since it ran{where}",
                    )
                )
            else:
                links.append(Link("dvc.lock", f"stage {name}", "stale" if in_lineage else "note", change + where))
            continue
        for kind, entries in change.items():
            if kind == "changed params":
                for file, keys in entries.items():
                    detail = ", ".join(f"{k} {v}" for k, v in keys.items()) if isinstance(keys, dict) else str(keys)
                    links.append(
                        Link(
                            "dvc.lock",
                            f"stage {name}",
                            "stale" if in_lineage else "note",
                            f"params changed since it ran ({file}: {detail}){where}",
                        )
                    )
                continue
            is_dep = kind == "changed deps"
            for path, state in entries.items():
                md5 = recorded.get(path)
                inner = _granular(data, path)
                inside = f" [{'; '.join(inner)}]" if inner else ""
                if absent is not None and absent(path):
                    links.append(Link("dvc.lock", path, "unavailable", f"{NOT_HERE} (dvc.lock md5 {md5})"))
                    continue
                if state == "not in cache":
                    links.append(
                        Link("dvc.lock", path, "note", f"output of {name} is on disk but not in the DVC cache")
                    )
                    continue
                if state in ("deleted", "missing"):
                    status = "missing"
                    what = (
                        f"dep of stage {name} is missing (dvc.lock md5 {md5})"
                        if is_dep
                        else f"output of stage {name} is missing (dvc.lock md5 {md5})"
                    )
                elif (
                    is_dep
                    and own_run
                    and _covers(path, own_run)
                    and inner
                    and not any(_covers(own_run, item.rsplit(" ", 1)[0]) for item in inner)
                ):
                    links.append(
                        Link(
                            "dvc.lock",
                            path,
                            "note",
                            f"{state} since stage {name} ran, in other runs only{inside}: "
                            f"{name}'s outputs as a whole are stale, this number's run is intact",
                        )
                    )
                    continue
                elif is_dep:
                    status = "stale"
                    what = (
                        f"{state} since stage {name} ran (dvc.lock md5 {md5}): {name} and everything "
                        "downstream of it are stale"
                    )
                else:
                    status = "modified"
                    what = f"output of stage {name} was {state} after it was written (dvc.lock md5 {md5})"
                links.append(Link("dvc.lock", path, status if in_lineage else "note", what + inside + where))
    return links


def _run_links(root: Path, lineage: Lineage) -> list[Link]:
    """:func:`run_file_links` of the number's run."""
    store = archive.Archive(root / paths.ARCHIVE)
    return run_file_links(root, lineage.ref.config_id, lineage.run_dir, lineage.run_sha256, store, lineage.lineage_file)


def run_file_links(
    root: Path,
    config_id: str,
    run_dir: str,
    run_sha256: str | None,
    store: archive.Archive,
    lineage_file: str = LINEAGE_FILE,
) -> list[Link]:
    """The run file against lineage.json's sha256, and the committed archive's document-level
    copy of the run: its hash against its name and, with the run on disk, its rows against the
    run collapsed to documents."""
    subject = f"{run_dir}/run.parquet"
    run_file = root / subject
    entry = store.entry(run_sha256, config_id) if run_sha256 else None
    links = []
    on_disk = run_file.exists()
    if not on_disk:
        if entry is None:
            links.append(Link("run file", subject, "missing", f"not on disk, and not in the archive ({paths.ARCHIVE})"))
        else:
            links.append(
                Link(
                    "run file",
                    subject,
                    "unavailable",
                    f"{NOT_HERE}; the committed archive holds this run (sha256 {run_sha256[:12]}, as "
                    f"{lineage_file} records) at document level, and the number is recomputed from it",
                )
            )
    elif run_sha256 and io.sha256_file(run_file) != run_sha256:
        on_disk = False  # not the run that was scored: nothing to compare the archive with
        links.append(
            Link(
                "run file",
                subject,
                "mismatch",
                f"sha256 {io.sha256_file(run_file)[:12]} on disk, {lineage_file} records "
                f"{run_sha256[:12]}: the run changed after it was scored",
            )
        )
    else:
        links.append(
            Link(
                "run file",
                subject,
                "ok",
                f"sha256 {run_sha256[:12] if run_sha256 else '?'} as {lineage_file} records",
            )
        )
    if entry is not None:
        links.append(_archive_link(store, entry, runs.read_run(root / run_dir)[0] if on_disk else None))
    return links


def _archive_link(store: archive.Archive, entry: Mapping[str, Any], chunk_run: pl.DataFrame | None) -> Link:
    subject = _rel(store.docs_file(entry["docs_sha256"]), store.root.parent.parent)
    try:
        stored = store.read_documents(entry["docs_sha256"])
    except InputError as exc:
        return Link("archive", subject, "mismatch" if "does not match" in exc.detail else "missing", exc.detail)
    what = f"{entry['config_id']}, run {entry['run_sha256'][:12]}, archived from commit {str(entry['commit'])[:12]}"
    if chunk_run is None:
        return Link("archive", subject, "ok", f"sha256 matches its name ({what})")
    if archive.document_table(chunk_run, entry["depth"]).equals(stored):
        return Link("archive", subject, "ok", f"equals the run collapsed to documents ({what})")
    return Link("archive", subject, "mismatch", f"differs from the run collapsed to documents ({what})")


def _sha256_of_source(path: Path) -> str | None:
    if path.is_file():
        return io.sha256_file(path)
    if path.is_dir() and (path / "judgments.jsonl").is_file():
        return io.sha256_file(path / "judgments.jsonl")
    return None


def judgments_source_links(root: Path, judgments: Mapping[str, Any]) -> list[Link]:
    """The judgments' source (judgments.json's ``source``) against the sha256 judgments.json records."""
    source = judgments.get("source")
    if not source or not judgments.get("source_sha256"):
        return []
    path = Path(source) if Path(source).is_absolute() else root / source
    actual = _sha256_of_source(path)
    if actual is None:
        return [
            Link("sidecar", str(source), "missing", f"the judgments source named in {JUDGMENTS_META} is not on disk")
        ]
    if actual != judgments["source_sha256"]:
        return [
            Link(
                "sidecar",
                str(source),
                "modified",
                f"sha256 {actual[:12]} on disk, {JUDGMENTS_META} records {judgments['source_sha256'][:12]} "
                f"(judgment version {judgments.get('version')}): the judgments changed after they were read",
            )
        ]
    return [Link("sidecar", str(source), "ok", f"judgments {judgments.get('version')} sha256 matches {JUDGMENTS_META}")]


def model_links(root: Path, models: Mapping[str, Any]) -> list[Link]:
    """Each model's weights hash as a run records it against the model's manifest, where it is built here."""
    links = []
    for name, info in models.items():
        manifest = root / "data" / "models" / name / "releval_model.json"
        if not manifest.exists():
            continue
        recorded = json.loads(manifest.read_text(encoding="utf-8")).get("weights_sha256")
        if recorded != (info or {}).get("weights_sha256"):
            links.append(
                Link(
                    "sidecar",
                    _rel(manifest, root),
                    "mismatch",
                    f"model {name}: run records weights {str((info or {}).get('weights_sha256'))[:12]}, the "
                    f"manifest now {str(recorded)[:12]}",
                )
            )
        else:
            links.append(Link("sidecar", _rel(manifest, root), "ok", f"model {name} weights sha256 as the run records"))
    return links


def check_lock(
    root: str | Path,
    stages: Sequence[str],
    *,
    status: tuple[dict, dict] | None = None,
    own_run: str | None = None,
    writer: str | None = None,
    unavailable: Mapping[str, str | None] | None = None,
) -> tuple[list[Link], int]:
    """DVC's status of every stage, as links: broken for ``stages``, notes for the others.

    A missing path that nothing here can restore (``unavailable``, by default
    :func:`releval.provenance.revisions.unavailable_outs` when DVC's own status is read: a clone
    without the DVC cache lacks every cached output) is reported once as ``unavailable``, not as
    broken. Returns the links and how many recorded hashes (deps and outs in dvc.lock) ``stages`` hold.
    """
    root = Path(root)
    lock = revisions.read_lock_stages(root)
    names = set(stages)
    hashes = sum(len(lock[n].get("deps") or []) + len(lock[n].get("outs") or []) for n in names if n in lock)
    try:
        stage_status, data = status or revisions.dvc_status(root)
        if unavailable is None:
            unavailable = {} if status else revisions.unavailable_outs(root)
    except Exception as exc:  # DVC could not even look: nothing in dvc.lock is verified
        return [Link("dvc.lock", "dvc status", "missing", f"DVC could not check the recorded hashes: {exc}")], hashes
    links: list[Link] = []

    def absent(path: str) -> bool:
        return _absent(root, path, unavailable, data)

    for name, changes in stage_status.items():
        base = name.split(":")[-1]  # DVC names stages of other dvc.yaml files path:name
        own = own_run if base == writer else None
        links += _stage_links(base, changes, lock.get(base), data, base in names, own, absent)
    links = _once(links)
    if not any(link.broken for link in links):
        absent = sum(link.status == "unavailable" for link in links)
        links.append(
            Link(
                "dvc.lock",
                f"{len(names)} stages",
                "ok",
                f"all {hashes} recorded hashes (md5, .dir for folders) match the files on disk"
                if not absent
                else f"every recorded hash of what is here matches the files on disk ({absent} not available here)",
            )
        )
    return links, hashes


def _absent(root: Path, path: str, unavailable: Mapping[str, str | None], data: Mapping[str, Any]) -> bool:
    """True when ``path`` differs from dvc.lock only because outputs nothing here can restore are
    not here: it is, holds or lies in such an output, and every change DVC names inside it is
    one of them (with no names: no file is on disk at or under it)."""
    if not any(_covers(u, path) or _covers(path, u) for u in unavailable):
        return False
    inner = [item.rsplit(" ", 1)[0] for item in _granular(data, path)]
    if inner:
        return all(any(_covers(u, item) for u in unavailable) for item in inner)
    target = root / path
    return not target.is_file() and not any(p.is_file() for p in target.rglob("*"))


def _once(links: Sequence[Link]) -> list[Link]:
    """``links`` with each unavailable path reported once (it is one stage's output and others' dep)."""
    out, seen = [], set()
    for link in links:
        if link.status == "unavailable":
            if link.subject in seen:
                continue
            seen.add(link.subject)
        out.append(link)
    return out
