import zipfile

import pytest

from releval.errors import InputError
from releval.builders.modelparts import part_files, safe_members


def make_zip(path, names):
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, "x")
    return zipfile.ZipFile(path)


def test_members_stay_inside_the_model_folder(tmp_path):
    good = make_zip(tmp_path / "good.zip", ["m/config.json", "m/desktop.ini", "m/1_Pooling/config.json"])
    assert [i.filename for i in safe_members(good, "m")] == ["m/config.json", "m/1_Pooling/config.json"]
    for bad in (["m/../../etc/passwd"], ["/abs/file"], ["other/config.json"]):
        with pytest.raises(InputError, match="member"):
            safe_members(make_zip(tmp_path / "bad.zip", bad), "m")


def test_missing_parts_name_the_package_to_install():
    with pytest.raises(InputError, match="no-such-model-pypi-part-001"):
        part_files("no-such-model")
