"""Trace a reported number to everything it came from, and verify every link of that chain.

:func:`releval.provenance.lineage.assemble` builds the lineage of one number of reports/metrics.json:
the value, the stage that wrote it, the run file and its hash, every upstream stage recorded in dvc.lock (index,
embeddings, chunking, corpus, queries, judgments, models) with its command, parameters and
hashes, the JSON sidecars those stages wrote, the judgment version, the model revisions, the
installed package versions and the git commit.

:func:`verify` then checks the chain:

* **recompute**: the number again from the stored run and judgments, with the metric engine,
  under the contract recorded in metrics.json, chunks collapsed to documents exactly as
  stages/score.py does (:mod:`releval.measurement.scoring`), on the queries score.py
  scored (:mod:`releval.measurement.holdout`); equal means bit-for-bit equal. A run that is not
  here (a clone without the DVC cache) is read from the committed archive, where it is kept at
  document level (:mod:`releval.provenance.archive`; the same numbers), and queries and qrels
  that are not here are rebuilt from the committed sources by this checkout's code
  (:func:`releval.provenance.recomputation.rebuild_inputs`, **inputs**);
* **run file**: its sha256 against reports/lineage.json; **archive**: the committed copy of the
  run, its sha256 against its name and, with the run here, its rows against the run collapsed;
* **dvc.lock**: every recorded hash of every stage in the lineage against the files on disk,
  using DVC's own status (``Repo.status()``, DVC's md5 and ``.dir`` hashing) and, for
  directories, ``Repo.data_status(granular=True)`` to name the file inside that changed;
* **sidecars**: the judgments' source hash (judgments.json) against the source on disk, and each
  model's weights hash in the run against the model manifest.

:func:`verify_all` (``releval audit --all``) makes every one of these checks for every number,
scoring each configuration once, and checks what a single audit does not: the configurations the
grid declares against metrics.json and lineage.json, every cost figure, count and condensed-list
mean, every archived file, the inputs on disk against what their committed sources give, and every
report file (quality.json, per_query.parquet, grid.md, report.md, observations.json, history and
the change tables) against the numbers it is derived from (:class:`releval.provenance.audit_all.AllAudit`).

**Nothing of the audited tree runs.** Inputs are rebuilt and reports rendered again in this
process, by the releval package doing the audit (:func:`releval.provenance.lineage.auditing_code` names its commit): the
audited repository's stage scripts, its copy of the package, its dvc.yaml commands and any start-up
hook it holds are never imported or run. A report written by a stage whose recorded code differs
from this checkout's is compared number by number rather than byte for byte
(:func:`releval.provenance.links.other_code`).

A link is ``ok`` or broken as ``stale`` (an input changed after the stage ran), ``modified`` (an
output changed after it was written), ``missing`` or ``mismatch`` (a recomputed number or a
recorded hash that differs); a ``note``; or ``unavailable``, not broken: what neither the copy
nor the local DVC cache holds (embeddings, indexes, chunk-level runs in a fresh clone without a
remote; :func:`releval.provenance.revisions.unavailable_outs`), reported "not available here".

Pure-ish: it reads the repository it is given (git, dvc.lock and DVC through
:mod:`releval.provenance.revisions`) and writes nothing there (inputs it rebuilds go to a
temporary folder); to audit another revision, audit the temporary copy
:func:`releval.provenance.revisions.checkout_revision` makes.

The parts, each its own module of :mod:`releval.provenance`: ``lineage`` (reading the chain),
``recomputation`` (the scoring inputs and the numbers scored again), ``hash_checks`` (files against
their recorded hashes), ``audit_all`` and ``report_checks`` (``--all``), ``links`` (a link and the
comparisons that make one) and ``audit_text`` (the audit as text). This module runs the checks of
one number (:func:`verify`) and of every number (:func:`verify_all`), and keeps the names the
command and the tests use.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from releval.errors import InputError
from releval.provenance import revisions
from releval.provenance.audit_all import AllAudit
from releval.provenance.audit_text import auditing_code_line, fold, render_lineage, render_summary, render_verification
from releval.provenance.hash_checks import _run_links, check_lock, judgments_source_links, model_links
from releval.provenance.lineage import QRELS_FILE, Lineage, MetricRef, assemble, auditing_code, parse_ref, reports_files
from releval.provenance.links import SLICE_REL_TOL, Link, Verification, _slice_link
from releval.provenance.recomputation import recompute, scoring_inputs

# The names `releval audit` (releval.commands.audit) and the tests reach through this module.
__all__ = [
    "SLICE_REL_TOL",
    "Link",
    "Lineage",
    "MetricRef",
    "Verification",
    "_slice_link",
    "assemble",
    "auditing_code",
    "auditing_code_line",
    "check_lock",
    "fold",
    "parse_ref",
    "render_lineage",
    "render_summary",
    "render_verification",
    "reports_files",
    "verify",
    "verify_all",
    "verify_numbers",
]


def verify(
    root: str | Path,
    lineage: Lineage,
    *,
    recomputed: Mapping[str, Any] | None = None,
    status: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> Verification:
    """Check every link of ``lineage`` (see the module docstring)."""
    root = Path(root)
    ref = lineage.ref
    links: list[Link] = []
    # 1. the number itself
    if ref.is_ops:
        key = ref.metric.removeprefix("ops.")
        recorded = (lineage.run_meta.get("ops") or {}).get(key)
        where = lineage.run_meta_source or f"{lineage.run_dir}/run.json"
        if not lineage.run_meta:
            links.append(Link("recompute", str(ref), "missing", f"no run.json in {lineage.run_dir} or the archive"))
        elif recorded == lineage.value:
            links.append(Link("recompute", str(ref), "ok", f"equals {where} ops.{key}"))
        else:
            links.append(
                Link("recompute", str(ref), "mismatch", f"metrics.json has {lineage.value!r}, {where} has {recorded!r}")
            )
    elif lineage.run_dir is None:
        links.append(Link("recompute", str(ref), "missing", f"{lineage.lineage_file} has no entry for {ref.config_id}"))
    else:
        try:
            own = {ref.config_id: {"run_dir": lineage.run_dir, "run_sha256": lineage.run_sha256}}
            inputs = None if recomputed else scoring_inputs(root)
            links += inputs.links if inputs else []
            result = (recomputed or recompute(root, lineage.contract, own, [ref.metric], inputs=inputs))[ref.config_id]
            if "error" in result:
                raise InputError(result["error"])
            again = result["mean"][ref.metric]
            source = result.get("source") or f"{lineage.run_dir}/run.parquet and {QRELS_FILE}"
            if again == lineage.value:
                links.append(Link("recompute", str(ref), "ok", f"{again!r} from {source} (bit-for-bit)"))
            else:
                links.append(
                    Link(
                        "recompute",
                        str(ref),
                        "mismatch",
                        f"metrics.json has {lineage.value!r}, the stored run and judgments give {again!r} "
                        f"(difference {again - lineage.value:+.3g})",
                    )
                )
        except InputError as exc:
            links.append(Link("recompute", str(ref), "missing", str(exc)))
    # 2. the run file against lineage.json, and the committed archive's copy of it
    if lineage.run_dir:
        links += _run_links(root, lineage)
    # 3. dvc.lock hashes, with DVC's own status
    writer = lineage.written_by.name if lineage.written_by else None
    lock_links, hashes = check_lock(
        root, [s.name for s in lineage.stages], status=status, own_run=lineage.run_dir, writer=writer
    )
    links += lock_links
    # 4. sidecar hashes
    links += judgments_source_links(root, lineage.judgments)
    links += model_links(root, lineage.models)
    return Verification(links, hashes)


def verify_all(
    root: str | Path,
    *,
    status: tuple[dict, dict] | None = None,
    check_hashes: bool = True,
    desc: str | None = "audit --all",
) -> list[Link]:
    """Every check a single audit makes, for every number, and every report file against the
    numbers it is derived from; then DVC's status of every stage of dvc.lock (unless
    ``check_hashes`` is off). ``desc``: what the recomputation's progress is called (None: no
    progress shown).

    * the inputs: data/work's documents, queries, qrels and judgments.json against what this
      checkout's code makes of the committed corpus, queries and judgments (or, not here, rebuilt);
    * the grid: every configuration params.yaml's grid declares is in metrics.json and
      lineage.json, and nothing else is;
    * each configuration, scored once from its run (or the archive's copy) and the judgments:
      every metric, slice mean, condensed-list mean and count in metrics.json, its cost figures
      against run.json, its lineage.json entry, its run file's sha256 and the archive's copy of
      it, the model weights its run records; the contract against params.yaml;
    * the archive: every file's sha256 against its name;
    * the sidecars: the judgments' source against judgments.json's sha256;
    * the report files: quality.json, per_query.parquet and grid.md as the score stage makes them
      from the verified numbers, report.md and observations.json as the report stage does,
      history and the IDCG/score change tables as the rescore stage does (markdown by this
      checkout's rendering code: where the stage that wrote a file ran other code than this,
      its bytes are not compared, and the link says so).
    """
    root = Path(root)
    with tempfile.TemporaryDirectory(prefix="releval-audit-") as tmp:
        try:
            state = AllAudit.read(root, Path(tmp), desc)
        except InputError as exc:  # an input is gone or unreadable: every number is unverified
            links = [Link("recompute", "every number", "missing", str(exc))]
        else:
            links = state.links()
    if check_hashes:
        links += check_lock(root, list(revisions.read_lock_stages(root)), status=status)[0]
    return links


def verify_numbers(root: str | Path, desc: str | None = None) -> list[Link]:
    """The number links of :func:`verify_all`: each metric and slice mean of metrics.json recomputed
    (and which runs were read from the committed archive)."""
    root = Path(root)
    with tempfile.TemporaryDirectory(prefix="releval-audit-") as tmp:
        try:
            state = AllAudit.read(root, Path(tmp), desc)
        except InputError as exc:
            return [Link("recompute", "every number", "missing", str(exc))]
        return state.number_links()
