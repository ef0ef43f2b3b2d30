"""A small real project for the audit: the shipped pipeline, one static model, BM25 and their fusion.

Three configurations on one chunking (``wordllama/c256``, ``bm25/c256``, ``rrf(wordllama,bm25)/c256``)
over the small pydocs data, run by a real `dvc repro` (every stage: score, archive, rescore, report)
and committed; about 20 s on two cores, so tests that tamper with what it wrote each take a copy.
"""

import re
from pathlib import Path

from support.commands import run
from support.projects import make_project
from support.pydocs_mini import MINI_DATASET, write_pydocs_mini

CONFIGS = ("bm25/c256", "rrf(wordllama,bm25)/c256", "wordllama/c256")
BASELINE = "bm25/c256"


def cut_grid(project: Path) -> None:
    """conf/config.yaml cut to WordLlama (no transformer pass), one chunking, no reranker, no named fusion.

    conf/ itself is edited (a deletion cannot be recorded as an override), before the first commit.
    """
    path = project / "conf" / "config.yaml"
    text = path.read_text(encoding="utf-8")
    cuts = (
        (r"^  - (?:model@models\.(?!wordllama:)\w+|reranker@\S+|fused@\S+|reranked@\S+): .*\n", ""),
        (r"^  reranked:.*\n(?:    .*\n)*", "  reranked: {}\n"),
        (r"^  models: \[.*?\]", "  models: [wordllama]"),
        (r"^  chunkings: \[.*?\]", "  chunkings: [c256]"),
        (r"^  baseline: \S+", f"  baseline: {BASELINE}"),
    )
    for pattern, replacement in cuts:
        text, n = re.subn(pattern, replacement, text, flags=re.M)
        assert n, pattern
    path.write_text(text, encoding="utf-8")


def make_audited_project(dest: Path) -> Path:
    """The project, composed, run by `dvc repro` and committed (inputs first, then the results)."""
    make_project(dest)
    write_pydocs_mini(dest)
    cut_grid(dest)
    run(["releval", "params", MINI_DATASET], dest)
    run(["git", "add", "-A"], dest)
    run(["git", "commit", "-qm", "inputs"], dest)
    run(["dvc", "repro"], dest)
    run(["git", "add", "-A"], dest)
    run(["git", "commit", "-qm", "first run"], dest)
    return dest
