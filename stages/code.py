"""DVC stage `code`: per stage script, the files of code it runs with their hashes (one JSON file each).

Every other stage depends on its own script's file (releval.provenance.code says why), so an edit
of a module reruns exactly the stages that import it, while dvc.lock lists one code file per stage.
"""

import argparse
from pathlib import Path

from releval import paths
from releval.provenance.code import write_fingerprints
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=paths.CODE_FINGERPRINTS)
    args = parser.parse_args()
    written = write_fingerprints(Path.cwd(), Path(args.out))
    print(f"code: {len(written)} stage scripts' code fingerprinted in {args.out}")


if __name__ == "__main__":
    entry(main)
