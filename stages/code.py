"""DVC stage `code`: a fingerprint of the code each stage script runs, which that stage depends on.

Writes data/work/code/<script>.json for every script in stages/ (but this one): the script and
every releval module it imports, transitively, each with its sha256 (releval.provenance.stage_code).
Editing a module changes only the fingerprints of the scripts that import it, so `dvc repro` reruns
exactly those stages, without dvc.yaml listing each stage's files.
"""

import argparse
from pathlib import Path

from releval import io, paths
from releval.provenance.stage_code import fingerprint, fingerprint_text, stage_scripts
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scripts", default="stages", help="the folder of stage scripts; the package is beside them")
    parser.add_argument("--out", default=paths.CODE)
    args = parser.parse_args()
    scripts_dir, out = Path(args.scripts), Path(args.out)
    root = Path.cwd()
    scripts = stage_scripts(scripts_dir, exclude=[Path(__file__).name])
    for script in scripts:
        record = fingerprint(script.resolve(), scripts_dir.resolve(), root.resolve())
        io.write_text(out / f"{script.stem}.json", fingerprint_text(record))
    print(f"code: {len(scripts)} stage scripts fingerprinted in {out}/")


if __name__ == "__main__":
    entry(main)
