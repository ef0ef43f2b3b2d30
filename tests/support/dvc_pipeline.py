"""Reading dvc.yaml's stages: their definitions and the script each runs."""

import re
from collections.abc import Mapping
from typing import Any

import yaml

from support import ROOT

PIPELINE = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))  # this repository's dvc.yaml
SCRIPT = re.compile(r"\bpython\s+(\S+\.py)\b")


def stage_bodies(pipeline: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Each stage's definition; a foreach stage keeps it under `do:`, a matrix stage at top level."""
    return {name: stage["do"] if "foreach" in stage else stage for name, stage in pipeline["stages"].items()}


def stage_script(body: Mapping[str, Any]) -> str:
    match = SCRIPT.search(body["cmd"])
    assert match, f"no `python <script>.py` in cmd {body['cmd']!r}"
    return match.group(1)
