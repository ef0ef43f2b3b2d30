"""Typed views of params.yaml sections; unknown or missing keys are errors naming the key."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypeVar

import yaml

from releval import paths
from releval.errors import InputError

T = TypeVar("T")


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise InputError("missing; compose it with `releval params`", file=str(path))
    with open(path, encoding="utf-8") as fh:
        params = yaml.safe_load(fh)
    if not isinstance(params, dict):
        raise InputError("expected a mapping at the top level", file=str(path))
    return params


def reports_folder(params_path: str | Path = paths.PARAMS) -> str:
    """The active dataset's reports folder (:func:`releval.paths.reports_folder`) as params.yaml names it;
    ``paths.REPORTS`` where there is no params.yaml (nothing composed yet)."""
    path = Path(params_path)
    if not path.exists():
        return paths.REPORTS
    return paths.reports_folder(load_params(path), source=str(path))


def section(params: dict[str, Any], dotted: str, *, file: str = "params.yaml") -> Any:
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise InputError("missing", file=file, field=dotted)
        node = node[part]
    return node


def build(cls: type[T], data: dict[str, Any], *, where: str, file: str = "params.yaml") -> T:
    """Construct dataclass ``cls`` from ``data``, refusing unknown keys (a typo must not be ignored)."""
    if not isinstance(data, dict):
        raise InputError("expected a mapping", file=file, field=where)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InputError(f"unknown key(s) {unknown}; known: {sorted(names)}", file=file, field=where)
    try:
        return cls(**data)
    except TypeError as exc:
        raise InputError(str(exc), file=file, field=where) from None
    except InputError as exc:
        if exc.file is not None:
            raise
        field = f"{where}.{exc.field.rsplit('.', 1)[-1]}" if exc.field else where
        raise InputError(exc.detail, file=file, field=field) from None
