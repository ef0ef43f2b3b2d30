"""`releval audit METRIC_REF`: trace one reported number to its inputs and verify every link.

    releval audit minilm/c256 ndcg@10
    releval audit configs.minilm/c256.ndcg@10           # a path into the dataset's metrics.json
    releval audit minilm/c256 ops.latency_ms_p95        # an operational figure (checked against run.json)
    releval audit minilm/c256 ndcg@10 --verbose         # ...with the whole lineage and every link
    releval audit --all                                 # every number and every report file
    releval audit minilm/c256 ndcg@10 --rev HEAD~1      # the number as committed at another revision

Prints the value, OK or BROKEN with each broken link named (stale, modified, missing or
mismatch), and where it came from: the run, the judgments, the model revisions, the commit.
``--verbose`` adds the whole lineage (every upstream stage in dvc.lock with its parameters,
hashes and JSON sidecars, installed package versions) and every link checked: the number
recomputed from the stored run and judgments, the run file's hash, every dvc.lock hash against
the files on disk (DVC's own status), the sidecar hashes. Exit 0 when every link holds, 1 when
any is broken, 2 on bad input.

``--all`` makes every check of a single audit for every number, once per configuration, and
checks every report file against the numbers it is derived from (quality.json, per_query.parquet,
grid.md, report.md, observations.json, history and the change tables), and that metrics.json
holds every configuration the grid in params.yaml declares.

What git does not hold and the DVC cache lacks (a fresh clone without a remote: embeddings,
indexes, chunk-level runs, data/work) is "not available here", not broken: every committed number
is still recomputed, from the run's document-level form in the committed archive (data/archive)
and the queries and qrels rebuilt from the committed corpus, queries and judgments.

The audit never imports or runs code of the tree it audits: inputs are rebuilt and reports
rendered again by this checkout's releval code (named in the output); a report written by a stage
that ran other code is not compared byte for byte, and the link says so. With ``--rev REV`` the
repository at REV is cloned into a temporary folder (``git clone --shared``; the repository itself
is not touched), its data restored from this repository's DVC cache with ``dvc checkout`` as far
as the cache holds it, and audited there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from releval.provenance import audit, audit_text, revisions
from releval.errors import InputError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "ref", nargs="*", metavar="METRIC_REF", help="CONFIG METRIC (minilm/c256 ndcg@10) or configs.CONFIG.METRIC"
    )
    parser.add_argument("--rev", default=None, help="audit the repository as committed at this git revision")
    parser.add_argument(
        "--all",
        action="store_true",
        help="every number of every configuration in the dataset's metrics.json and every report file "
        "derived from them, then dvc.lock against the files on disk",
    )
    parser.add_argument(
        "--verbose",
        "--lineage",
        action="store_true",
        help="the whole lineage and every link checked (default: the value, the verdict and the broken links)",
    )
    parser.add_argument("--root", default=".", help="repository root (default: the current directory)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _audit(root: Path, args: argparse.Namespace, revision: str | None = None) -> int:
    code = audit.auditing_code()
    if args.all:
        if args.ref:
            raise InputError("--all takes no METRIC_REF", field="METRIC_REF")
        links = audit.verify_all(root)
        ok = not any(link.broken for link in links)
        if args.json:
            document = {"links": [link.__dict__ for link in links], "ok": ok, "auditor": code}
            print(json.dumps(document | ({"revision": revision} if revision else {}), indent=2, default=str))
            return 0 if ok else 1
        metrics_file = audit.reports_files(root)[0]
        recomputed = [link for link in links if link.check == "recompute"]
        good = [link for link in recomputed if link.status == "ok"]
        near = sum("equal to" in link.detail for link in good)
        print(
            f"releval audit --all: {len(good)} of {len(recomputed)} numbers in {metrics_file} recomputed"
            + (
                f" ({len(good) - near} bit-for-bit, {near} slice means equal to {audit.SLICE_REL_TOL:g})"
                if near
                else " bit-for-bit"
            )
        )
        if revision:
            print(revision)
        print(audit_text.auditing_code_line(code))
        print(audit_text.render_verification(links if args.verbose else audit_text.fold(links)))
        return 0 if ok else 1
    ref = audit.parse_ref(args.ref)
    lineage = audit.assemble(root, ref)
    verification = audit.verify(root, lineage)
    if args.json:
        document = {
            "lineage": lineage.to_dict(),
            "links": [link.__dict__ for link in verification.links],
            "ok": verification.ok,
            "auditor": code,
        }
        print(json.dumps(document | ({"revision": revision} if revision else {}), indent=2, default=str))
    elif args.verbose:
        if revision:
            print(revision)
        print(audit_text.render_lineage(lineage))
        print(audit_text.auditing_code_line(code))
        print()
        print(audit_text.render_verification(verification))
    else:
        if revision:
            print(revision)
        print(audit_text.render_summary(lineage, verification, code))
    return 0 if verification.ok else 1


def run(args: argparse.Namespace) -> int:
    if not args.all and not args.ref:
        raise InputError("give METRIC_REF (e.g. minilm/c256 ndcg@10) or --all", field="METRIC_REF")
    root = Path(args.root)
    if args.rev:
        with revisions.checkout_revision(root, args.rev) as copy:
            note = (
                f"(revision {args.rev}, commit {revisions.resolve_commit(root, args.rev)[:12]}: a temporary clone, "
                "data restored from this "
                "repository's DVC cache as far as it holds it)"
            )
            return _audit(copy, args, note)
    return _audit(root, args)
