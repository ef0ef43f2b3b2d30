"""The audit as text: a number's lineage (:func:`render_lineage`), its one-screen summary
(:func:`render_summary`), the links checked (:func:`render_verification`, :func:`fold`) and the line
naming the code that audited. Renders only; the checks are :mod:`releval.provenance.audit`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from releval.provenance.lineage import JUDGMENTS_META, Lineage, auditing_code
from releval.provenance.links import Link, Verification, _short


def render_lineage(lineage: Lineage) -> str:
    ref, c = lineage.ref, lineage.contract
    writer = lineage.written_by
    lines = [
        f"releval audit: {ref.config_id} {ref.metric} = {lineage.value!r}",
        f"  value      {lineage.metrics_file} configs[{ref.config_id!r}]"
        + (f"[ops][{ref.metric.removeprefix('ops.')!r}]" if ref.is_ops else f"[{ref.metric!r}]"),
        f"  written by stage {writer.name} ({writer.cmd})" if writer else "  written by: no stage in dvc.lock",
        "  contract   "
        + "; ".join(
            f"{k}={c[k]}"
            for k in ("gain", "ties", "rel_threshold", "no_relevant", "missing_in_run", "collapse", "split", "queries")
            if k in c
        ),
        f"  judgments  {lineage.judgments.get('version', c.get('judgments_version'))} "
        f"(source {lineage.judgments.get('source')}, sha256 {str(lineage.judgments.get('source_sha256'))[:16]}…)",
        f"  run        {lineage.run_dir}/run.parquet sha256 {str(lineage.run_sha256)[:16]}… "
        f"(stage {lineage.run_stage}, {lineage.lineage_file})",
    ]
    for name, info in sorted(lineage.models.items()):
        lines.append(
            f"  model      {name}: revision {info.get('revision')!r}, weights sha256 "
            f"{str(info.get('weights_sha256'))[:16]}…, protocol {_short(info.get('protocol'), 160)}"
        )
    lines.append("")
    lines.append("lineage (dvc.lock, upstream first):")
    for stage in lineage.stages:
        lines.append(f"  stage {stage.name}: {stage.cmd}")
        for key, value in stage.params.items():
            lines.append(f"    param   {key} = {_short(value)}")
        for dep in stage.deps:
            lines.append(f"    dep     {dep['path']}  md5 {dep['md5']}")
        for out in stage.outs:
            lines.append(f"    out     {out['path']}  md5 {out['md5']}")
        for path, data in stage.sidecars.items():
            lines.append(f"    sidecar {path}: {_short(data, 220)}")
    lines.append("")
    lines.append("packages (installed now): " + ", ".join(f"{k} {v}" for k, v in lineage.packages.items()))
    g = lineage.git
    lines.append(
        f"git: commit {g.get('commit') or '(none)'}"
        + (
            ""
            if g.get("dirty") is None
            else (", dirty: " + "; ".join(g["changes"][:8]) if g.get("dirty") else ", clean")
        )
    )
    return "\n".join(lines)


UNFOLDED = ("report",)  # checks whose every link `audit --all` prints: one per report file
FOLD_UNAVAILABLE = ("run file",)  # one per configuration in a clone without the DVC cache: folded too


def auditing_code_line(code: Mapping[str, Any] | None = None) -> str:
    """One line naming the code that did the audit."""
    code = code or auditing_code()
    if code.get("commit"):
        what = f"the releval code of commit {code['commit'][:12]}" + (
            " (with uncommitted changes)" if code.get("dirty") else ""
        )
    else:
        what = f"releval {code.get('version')} (an installed package, no git commit)"
    return f"audited with {what} at {code.get('path')}; no code of the audited tree was imported or run"


def fold(links: Sequence[Link], keep: int = 1) -> list[Link]:
    """``links`` with the OK links of each check that has more than ``keep`` of them folded into
    one (the first of them named); every other link as it is, in order."""
    counts: dict[str, int] = {}
    for link in links:
        if link.status == "ok":
            counts[link.check] = counts.get(link.check, 0) + 1
    absent: dict[str, int] = {}
    for link in links:
        if link.status == "unavailable" and link.check in FOLD_UNAVAILABLE:
            absent[link.check] = absent.get(link.check, 0) + 1
    out, folded = [], set()
    for link in links:
        if link.status == "unavailable" and absent.get(link.check, 0) > keep:
            if (link.check, "unavailable") not in folded:
                folded.add((link.check, "unavailable"))
                out.append(
                    Link(
                        link.check,
                        f"{absent[link.check]} links",
                        "unavailable",
                        f"the first: {link.subject}: {link.detail}",
                    )
                )
            continue
        if link.status != "ok" or counts[link.check] <= keep or link.check in UNFOLDED:
            out.append(link)
        elif link.check not in folded:
            folded.add(link.check)
            out.append(
                Link(
                    link.check,
                    f"{counts[link.check]} links",
                    "ok",
                    f"all hold (the first: {link.subject}: {_short(link.detail, 90)})",
                )
            )
    return out


def render_summary(lineage: Lineage, verification: Verification, code: Mapping[str, Any] | None = None) -> str:
    """One screen for one number: the value, OK or BROKEN with the broken links, and where it
    came from (run, judgments, models, commit). :func:`render_lineage` and
    :func:`render_verification` give all of it (``--verbose``)."""
    ref, g = lineage.ref, lineage.git
    field_path = f"[ops][{ref.metric.removeprefix('ops.')!r}]" if ref.is_ops else f"[{ref.metric!r}]"
    lines = [
        f"releval audit: {ref.config_id} {ref.metric} = {lineage.value!r}",
        f"  value      {lineage.metrics_file} configs[{ref.config_id!r}]{field_path}",
        f"  run        {lineage.run_dir}/run.parquet sha256 {str(lineage.run_sha256)[:12]}… "
        f"(stage {lineage.run_stage})",
        f"  judgments  {lineage.judgments.get('version', lineage.contract.get('judgments_version'))} "
        + (
            f"({lineage.judgments['source']}, sha256 {str(lineage.judgments.get('source_sha256'))[:12]}…)"
            if lineage.judgments.get("source")
            else f"({JUDGMENTS_META} not available here: its source unrecorded in this summary)"
        ),
    ]
    for name, info in sorted(lineage.models.items()):
        lines.append(
            f"  model      {name}: revision {info.get('revision')!r}, "
            f"weights sha256 {str(info.get('weights_sha256'))[:12]}…"
        )
    dirty = "" if g.get("dirty") is None else (f", dirty ({len(g['changes'])} files)" if g.get("dirty") else ", clean")
    lines.append(f"  commit     {g.get('commit') or '(none)'}{dirty}")
    lines.append(f"  {auditing_code_line(code)}")
    links = verification.links
    for link in links:
        if link.check == "recompute":
            lines.append(f"  recomputed {_short(link.detail, 200)}")
    counts = {word: sum(link.status == word for link in links) for word in ("ok", "note", "unavailable")}
    broken = verification.broken
    lines.append(
        f"verification: {len(links)} links: {counts['ok']} OK, {counts['note']} notes, "
        f"{counts['unavailable']} not available here, {len(broken)} broken"
    )
    for link in broken:
        lines.append(
            f"  {'BROKEN (' + link.status + ')':<20} {link.check:<10} {link.subject}: {_short(link.detail, 300)}"
        )
    lines.append(render_verification(links).splitlines()[-1])
    lines.append("(the whole lineage and every link: --verbose)")
    return "\n".join(lines)


def render_verification(verification: Verification | Sequence[Link]) -> str:
    links = verification.links if isinstance(verification, Verification) else list(verification)
    lines = ["verification:"]
    for link in links:
        word = (
            "OK"
            if link.status == "ok"
            else "note"
            if link.status == "note"
            else "not available here"
            if link.status == "unavailable"
            else f"BROKEN ({link.status})"
        )
        lines.append(f"  {word:<20} {link.check:<10} {link.subject}: {link.detail}")
    broken = [link for link in links if link.broken]
    absent = sum(link.status == "unavailable" for link in links)
    lines.append(
        "result: OK"
        + (f" ({absent} link{'s' if absent != 1 else ''} not available here, none broken)" if absent else "")
        if not broken
        else f"result: BROKEN ({len(broken)} link{'s' if len(broken) != 1 else ''}: "
        + "; ".join(f"{link.subject} {link.status}" for link in broken)
        + ")"
    )
    return "\n".join(lines)
