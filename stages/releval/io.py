"""Atomic output: a file is either complete or absent, never half-written.

Every writer goes through :func:`atomic_path`: write to a temporary sibling, fsync, rename.
A killed run therefore never leaves a partial file that a later stage would take as complete.

A write the disk refuses (full, over quota, past the file-size limit) is an
:class:`~releval.errors.InputError` naming the target, one line, and the target is left as it was.

Fault injection for tests: ``RELEVAL_FAULT=<point>@<path-suffix>`` makes the process SIGKILL itself
when an atomic write's target (given or resolved, as a POSIX string) ends with ``<path-suffix>``.
``before-rename``: the temporary file (fsynced) or directory is complete, nothing renamed yet.
``mid-write``: a byte writer has flushed its first chunk (at most half) into the temporary file.

What a killed write leaves: its temporary sibling (``.releval-tmp-NAME.XXXXXXXX[SUFFIX]``), and, for
a directory killed between its two renames, the previous directory moved aside as
``.releval-old-NAME.PID`` with no ``NAME``. :func:`leftovers`, :func:`remove_leftovers` and
:func:`restore_replaced_directory` find and undo them; call the last two only while no other process
can be writing the same target (a lock the caller holds).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io as _pyio
import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any, Iterator

from releval.errors import InputError

# Writes the disk refuses: no space, over quota, past the file-size limit (RLIMIT_FSIZE).
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


TEMP_PREFIX = ".releval-tmp-"
OLD_PREFIX = ".releval-old-"
_RANDOM = "[a-z0-9_]{8}"  # tempfile's eight random characters


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, *, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; on success move it into place atomically."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f"{TEMP_PREFIX}{target.name}."
    if directory:
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=target.suffix, dir=target.parent)
        os.close(fd)
        tmp = Path(name)
        os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield tmp
        if directory:
            _fault("before-rename", target)
            old = None
            if target.exists():
                old = target.with_name(f"{OLD_PREFIX}{target.name}.{os.getpid()}")
                os.replace(target, old)
            os.replace(tmp, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        else:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            _fault("before-rename", target)
            os.replace(tmp, target)
    except OSError as exc:
        if exc.errno not in _DISK_FULL:
            raise
        raise InputError(f"cannot write: {exc.strerror} (left as it was)", file=str(target), field="path") from None
    finally:
        if tmp.exists():
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink()


def leftovers(target: str | os.PathLike) -> list[Path]:
    """The temporary files and directories that killed atomic writes of ``target`` left beside it
    (exactly the writer's names: another file's temporaries never match), sorted."""
    target = Path(target)
    if not target.parent.is_dir():
        return []
    name = re.escape(f"{TEMP_PREFIX}{target.name}.") + _RANDOM
    pattern = re.compile(f"{name}(?:{re.escape(target.suffix)})?")
    return sorted(p for p in target.parent.iterdir() if pattern.fullmatch(p.name))


def remove_leftovers(target: str | os.PathLike) -> list[Path]:
    """Remove :func:`leftovers` of ``target``; only while no other process can be writing it. Returns them."""
    found = leftovers(target)
    for path in found:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return found


def restore_replaced_directory(target: str | os.PathLike) -> Path | None:
    """Put back the directory a write of ``target`` moved aside and was killed before replacing
    (``target`` absent, one ``.releval-old-NAME.PID`` beside it); only while no other process can be
    writing it. Returns the restored folder's former path, or None when there was nothing to restore."""
    target = Path(target)
    if target.exists() or target.is_symlink() or not target.parent.is_dir():
        return None
    pattern = re.compile(re.escape(f"{OLD_PREFIX}{target.name}.") + "[0-9]+")
    moved = sorted(p for p in target.parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir())
    if not moved:
        return None
    newest = max(moved, key=lambda p: p.stat().st_mtime_ns)
    os.replace(newest, target)
    return newest


def _fault(point: str, target: Path) -> None:
    """SIGKILL this process if ``RELEVAL_FAULT`` names ``point`` and a suffix of ``target``."""
    spec = os.environ.get("RELEVAL_FAULT")
    if not spec:
        return
    want, sep, suffix = spec.partition("@")
    if sep and want == point and (target.as_posix().endswith(suffix) or target.resolve().as_posix().endswith(suffix)):
        os.kill(os.getpid(), signal.SIGKILL)


def write_bytes(target: str | os.PathLike, data: bytes | memoryview) -> None:
    """Write ``data`` atomically, in at least two pieces (when it has two bytes) so ``mid-write`` can fire."""
    target = Path(target)
    view = memoryview(data).cast("B")
    size = len(view)
    chunk = min(1 << 20, max(1, -(-size // 2)))
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(view[:chunk])
            fh.flush()
            _fault("mid-write", target)
            for start in range(chunk, size, chunk):
                fh.write(view[start : start + chunk])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(target: str | os.PathLike, text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


def write_json(target: str | os.PathLike, obj: Any) -> None:
    write_text(target, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, default=_json_default) + "\n")


def write_parquet(target: str | os.PathLike, frame) -> None:
    """Write a polars DataFrame atomically (statistics off so identical data gives identical bytes)."""
    buffer = _pyio.BytesIO()
    frame.write_parquet(buffer, statistics=False, compression="zstd")
    write_bytes(target, buffer.getbuffer())


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_npy(target: str | os.PathLike, array) -> None:
    import numpy as np

    buffer = _pyio.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    write_bytes(target, buffer.getbuffer())


def read_npy(path: str | os.PathLike):
    import numpy as np

    return np.load(path, allow_pickle=False)
