"""`releval params [OVERRIDE ...]`: compose params.yaml from conf/ with Hydra.

`dvc exp run` composes params.yaml itself (DVC's Hydra integration, configured in .dvc/config);
`dvc repro` does not, so after editing conf/ run this first. It uses DVC's own composer, so
both paths produce the same file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from releval.io import atomic_path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. 'grid.models=[minilm]'")
    parser.add_argument("--conf", default="conf", help="config directory (default: conf)")
    parser.add_argument("--out", default="params.yaml", help="output file (default: params.yaml)")


def compose_params(conf_dir: str | Path, out: str | Path, overrides: list[str]) -> None:
    from dvc.utils.hydra import compose_and_dump

    with atomic_path(out) as tmp:  # keeps the suffix: DVC picks its dumper from it
        compose_and_dump(tmp, str(Path(conf_dir).resolve()), None, "config", "", list(overrides))


def run(args: argparse.Namespace) -> int:
    compose_params(args.conf, args.out, args.overrides)
    print(f"wrote {args.out} from {args.conf}/" + (f" with {' '.join(args.overrides)}" if args.overrides else ""))
    return 0
