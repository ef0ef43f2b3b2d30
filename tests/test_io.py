"""The atomic writer itself: complete-or-absent outputs, real SIGKILLs at exact points (RELEVAL_FAULT)."""

import io as pyio
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from releval import io

# Each writer is a snippet defining ``write(path)``, run in-process (expected bytes) or in a child.
WRITERS = {
    "write_bytes": ("out.bin", "def write(p):\n    io.write_bytes(p, bytes(range(256)) * 12289)\n"),
    "write_parquet": (
        "out.parquet",
        "import polars as pl\n"
        "def write(p):\n"
        "    io.write_parquet(p, pl.DataFrame({'k': [f'doc{i}' for i in range(40000)],\n"
        "                                      'v': [i * 0.5 for i in range(40000)]}))\n",
    ),
    "write_json": (
        "out.json",
        "def write(p):\n    io.write_json(p, {'name': 'é', 'scores': [i / 7 for i in range(20000)]})\n",
    ),
    "write_text-small": ("out.txt", "def write(p):\n    io.write_text(p, 'hello, world\\n')\n"),  # < one buffer
    "directory": (
        "out.d",
        "from pathlib import Path\n"
        "def write(p):\n"
        "    with io.atomic_path(p, directory=True) as tmp:\n"
        "        io.write_text(Path(tmp) / 'meta.txt', 'meta\\n')\n"
        "        io.write_bytes(Path(tmp) / 'inner.bin', bytes(range(256)) * 4099)\n",
    ),
}
# The path suffix each fault point is aimed at; for a directory, mid-write hits a file written inside it.
SUFFIX = {("directory", "mid-write"): "/inner.bin"}


@pytest.fixture(autouse=True)
def _no_inherited_fault(monkeypatch):
    monkeypatch.delenv("RELEVAL_FAULT", raising=False)


def _child(snippet: str, target: Path, fault: str | None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RELEVAL_FAULT"}
    if fault is not None:
        env["RELEVAL_FAULT"] = fault
    code = "import sys\nfrom releval import io\n" + snippet + "write(sys.argv[1])\n"
    return subprocess.run([sys.executable, "-c", code, str(target)], env=env, cwd=cwd, capture_output=True, timeout=60)


def _write_here(snippet: str, target: Path) -> None:
    namespace = {"io": io}
    exec(snippet, namespace)
    namespace["write"](target)


def _snapshot(path: Path):
    """Bytes of a file, {relative path: bytes} of a directory tree, None if absent."""
    if path.is_dir():
        return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
    return path.read_bytes() if path.exists() else None


def _make_old(target: Path) -> None:
    if target.suffix == ".d":
        (target / "sub").mkdir(parents=True)
        (target / "old.txt").write_bytes(b"old\n")
        (target / "sub" / "deep.bin").write_bytes(b"\x00old")
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"OLD CONTENT\n")


def _leftovers(parent: Path, name: str) -> list[Path]:
    return sorted(parent.glob(f".releval-tmp-{name}.*"))


@pytest.mark.parametrize("existing", [True, False], ids=["old-target", "no-target"])
@pytest.mark.parametrize("point", ["before-rename", "mid-write"])
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_sigkill_at_fault_point_leaves_old_target(tmp_path, writer, point, existing):
    name, snippet = WRITERS[writer]
    _write_here(snippet, tmp_path / "reference" / name)
    expected = _snapshot(tmp_path / "reference" / name)
    target = tmp_path / "work" / name
    target.parent.mkdir()
    if existing:
        _make_old(target)
    before = _snapshot(target)

    suffix = SUFFIX.get((writer, point), "/" + name)
    result = _child(snippet, target, f"{point}@{suffix}")

    assert result.returncode == -signal.SIGKILL, result.stderr.decode()
    assert _snapshot(target) == before
    assert not list(target.parent.glob(".releval-old-*"))
    [tmp] = _leftovers(target.parent, name)  # a real crash: nothing cleaned up
    if writer == "directory":
        assert tmp.is_dir()
        if point == "before-rename":
            assert _snapshot(tmp) == expected
        else:
            assert (tmp / "meta.txt").read_bytes() == expected["meta.txt"]
            assert not (tmp / "inner.bin").exists()
            [partial] = _leftovers(tmp, "inner.bin")
            full = expected["inner.bin"]
    elif point == "before-rename":
        assert tmp.read_bytes() == expected
    else:
        partial, full = tmp, expected
    if point == "mid-write":
        data = partial.read_bytes()
        assert 0 < len(data) < len(full)
        assert full.startswith(data)


@pytest.mark.parametrize(
    "fault",
    [
        "before-rename@/other.bin",
        "mid-write@/out.bin.bak",
        "mid-write@/ut.bin/",
        "after-rename@/out.bin",
        "before-rename",
    ],
)
def test_fault_aimed_elsewhere_does_not_fire(tmp_path, fault):
    name, snippet = WRITERS["write_bytes"]
    target = tmp_path / name
    result = _child(snippet, target, fault)
    assert result.returncode == 0, result.stderr.decode()
    assert target.read_bytes() == bytes(range(256)) * 12289
    assert not _leftovers(tmp_path, name)


def test_fault_suffix_matches_given_or_resolved_path(tmp_path):
    _, snippet = WRITERS["write_bytes"]
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    # Given relative path "link/x.bin": only the given form ends with "link/x.bin" ...
    given = _child(snippet, Path("link/x.bin"), "before-rename@link/x.bin", cwd=tmp_path)
    # ... and only the resolved form ends with the absolute "<tmp>/real/y.bin".
    absolute = (tmp_path / "real" / "y.bin").resolve().as_posix()
    resolved = _child(snippet, Path("link/y.bin"), f"before-rename@{absolute}", cwd=tmp_path)
    assert given.returncode == resolved.returncode == -signal.SIGKILL
    assert not (tmp_path / "real" / "x.bin").exists() and not (tmp_path / "real" / "y.bin").exists()


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_complete_write_replaces_target(tmp_path, writer):
    name, snippet = WRITERS[writer]
    expected_path = tmp_path / "reference" / name
    _write_here(snippet, expected_path)
    target = tmp_path / "work" / name
    _make_old(target)
    _write_here(snippet, target)
    assert _snapshot(target) == _snapshot(expected_path)
    assert sorted(p.name for p in target.parent.iterdir()) == [name]  # no temp, no old copy


@pytest.mark.parametrize("directory", [False, True], ids=["file", "directory"])
@pytest.mark.parametrize("existing", [True, False], ids=["old-target", "no-target"])
def test_exception_inside_keeps_target_and_removes_temp(tmp_path, directory, existing):
    target = tmp_path / ("out.d" if directory else "out.bin")
    if existing:
        _make_old(target)
    before = _snapshot(target)
    with pytest.raises(RuntimeError, match="boom"):
        with io.atomic_path(target, directory=directory) as tmp:
            if directory:
                (tmp / "part.bin").write_bytes(b"partial")
            else:
                tmp.write_bytes(b"partial")
            raise RuntimeError("boom")
    assert not tmp.exists()
    assert _snapshot(target) == before
    assert sorted(tmp_path.iterdir()) == ([target] if existing else [])


def test_write_parquet_is_deterministic_and_matches_polars(tmp_path):
    frame = pl.DataFrame(
        {
            "query_id": [f"q{i % 37}" for i in range(5000)],
            "doc_id": [f"d{i}" for i in range(5000)],
            "score": np.linspace(-3.0, 7.0, 5000),
            "rank": np.arange(5000, dtype=np.int32),
            "tags": [["a", "b"][: i % 3] for i in range(5000)],
        }
    )
    io.write_parquet(tmp_path / "one.parquet", frame)
    io.write_parquet(tmp_path / "two.parquet", frame.clone())
    frame.write_parquet(tmp_path / "polars.parquet", statistics=False, compression="zstd")
    one = (tmp_path / "one.parquet").read_bytes()
    assert one == (tmp_path / "two.parquet").read_bytes() == (tmp_path / "polars.parquet").read_bytes()
    assert pl.read_parquet(tmp_path / "one.parquet").equals(frame)


def test_write_npy_matches_numpy_and_keeps_the_target_name(tmp_path):
    array = np.asfortranarray(np.arange(3 * 384, dtype=np.float32).reshape(3, 384))
    reference = pyio.BytesIO()
    np.save(reference, array, allow_pickle=False)
    io.write_npy(tmp_path / "embeddings.npy", array)
    io.write_npy(tmp_path / "vectors.bin", array)  # np.save(path) would have appended ".npy"
    assert (tmp_path / "embeddings.npy").read_bytes() == reference.getvalue()
    assert (tmp_path / "vectors.bin").read_bytes() == reference.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["embeddings.npy", "vectors.bin"]
    np.testing.assert_array_equal(io.read_npy(tmp_path / "vectors.bin"), array)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077, 0o002])
def test_file_permissions_follow_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        io.write_bytes(tmp_path / "a.bin", b"ab")
        io.write_parquet(tmp_path / "a.parquet", pl.DataFrame({"x": [1, 2]}))
        io.write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(previous)
    for name in ("a.bin", "a.parquet", "a.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


@pytest.mark.parametrize("value", [float("nan"), float("inf"), np.float64("nan")])
def test_write_json_refuses_nan(tmp_path, value):
    target = tmp_path / "m.json"
    target.write_bytes(b"{}\n")
    with pytest.raises(ValueError):
        io.write_json(target, {"ndcg": value})
    assert target.read_bytes() == b"{}\n"
    assert sorted(tmp_path.iterdir()) == [target]


def test_small_payloads(tmp_path):
    for data in (b"", b"x", b"xy", bytes(3 << 20)):
        io.write_bytes(tmp_path / "s.bin", data)
        assert (tmp_path / "s.bin").read_bytes() == data
