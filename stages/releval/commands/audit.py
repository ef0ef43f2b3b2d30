"""`releval audit METRIC_REF`: trace one reported number to its inputs and verify every link.

    releval audit minilm/c256 ndcg@10
    releval audit configs.minilm/c256.ndcg@10           # a path into reports/metrics.json
    releval audit minilm/c256 ops.latency_ms_p95        # an operational figure (checked against run.json)
    releval audit --all                                 # recompute every number in metrics.json
    releval audit minilm/c256 ndcg@10 --rev HEAD~1      # the number as committed at another revision

Prints the lineage (value, the stage that wrote it, the run file and its hash, every upstream
stage in dvc.lock with its parameters, hashes and JSON sidecars, judgment version, model
revisions, installed package versions, git commit), then the verification: the number
recomputed from the stored run and judgments, the run file's hash, every dvc.lock hash against
the files on disk (DVC's own status), the sidecar hashes. Exit 0 when every link holds, 1 when
any is broken (each broken link is named: stale, modified, missing or mismatch), 2 on bad input.

What git does not hold and the DVC cache lacks (a fresh clone without a remote: embeddings,
indexes, chunk-level runs, data/work) is "not available here", not broken: every committed number
is still recomputed, from the run's document-level form in the committed archive (data/archive)
and the queries and qrels rebuilt from the committed corpus, queries and judgments by the
revision's own ingest, queries and judgments stage scripts (their md5 checked against dvc.lock).

With ``--rev REV`` the repository at REV is cloned into a temporary folder (``git clone
--shared``; the repository itself is not touched), its data restored from this repository's
DVC cache with ``dvc checkout`` as far as the cache holds it, and audited there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from releval.provenance import audit, revisions
from releval.errors import InputError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "ref", nargs="*", metavar="METRIC_REF", help="CONFIG METRIC (minilm/c256 ndcg@10) or configs.CONFIG.METRIC"
    )
    parser.add_argument("--rev", default=None, help="audit the repository as committed at this git revision")
    parser.add_argument(
        "--all",
        action="store_true",
        help="recompute every metric of every configuration in reports/metrics.json, "
        "then check dvc.lock against the files on disk",
    )
    parser.add_argument("--root", default=".", help="repository root (default: the current directory)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _audit(root: Path, args: argparse.Namespace) -> int:
    if args.all:
        if args.ref:
            raise InputError("--all takes no METRIC_REF", field="METRIC_REF")
        links = audit.verify_all(root)
        if args.json:
            print(
                json.dumps(
                    {"links": [link.__dict__ for link in links], "ok": not any(link.broken for link in links)},
                    indent=2,
                    default=str,
                )
            )
        else:
            recomputed = [link for link in links if link.check == "recompute"]
            ok = [link for link in recomputed if link.status == "ok"]
            near = sum("equal to" in link.detail for link in ok)
            print(
                f"releval audit --all: {len(ok)} of {len(recomputed)} numbers in {audit.METRICS_FILE} recomputed"
                + (
                    f" ({len(ok) - near} bit-for-bit, {near} slice means equal to {audit.SLICE_REL_TOL:g})"
                    if near
                    else " bit-for-bit"
                )
            )
            shown = [link for link in links if link.status != "ok" or link.check != "recompute"]
            print(audit.render_verification(shown if len(shown) < len(links) else links))
        return 1 if any(link.broken for link in links) else 0
    ref = audit.parse_ref(args.ref)
    lineage = audit.assemble(root, ref)
    verification = audit.verify(root, lineage)
    if args.json:
        print(
            json.dumps(
                {
                    "lineage": lineage.to_dict(),
                    "links": [link.__dict__ for link in verification.links],
                    "ok": verification.ok,
                },
                indent=2,
                default=str,
            )
        )
    else:
        if args.rev:
            print(
                f"(revision {args.rev}: a temporary clone, data restored from this repository's DVC cache "
                "as far as it holds it)"
            )
        print(audit.render_lineage(lineage))
        print()
        print(audit.render_verification(verification))
    return 0 if verification.ok else 1


def run(args: argparse.Namespace) -> int:
    if not args.all and not args.ref:
        raise InputError("give METRIC_REF (e.g. minilm/c256 ndcg@10) or --all", field="METRIC_REF")
    root = Path(args.root)
    if args.rev:
        with revisions.checkout_revision(root, args.rev) as copy:
            return _audit(copy, args)
    return _audit(root, args)
