"""params.yaml composed from conf/ (Hydra), with the overrides a user gave kept in conf/ itself.

What you configure is what runs:

* ``releval params KEY=VALUE ...`` records its overrides in ``conf/overrides/recorded.yaml``, a
  Hydra config the primary config includes last (``optional overrides: recorded``). Both
  composers read conf/: ``releval params`` (what ``make repro`` runs) and DVC's own Hydra
  integration (``dvc exp run``), so neither can silently drop an override. ``--reset`` forgets
  them.
* params.yaml starts with a header naming the sha256 of conf/ and of its own body. A body that
  no longer matches (edited by hand, or by ``dvc exp run -S``) is never recomposed over: the
  error names the keys and the two commands that keep or drop the change.
* ``releval params --check`` (the ``params`` DVC stage, which depends on conf/) fails when conf/
  changed after params.yaml was composed, so ``dvc repro`` cannot report "up to date" over it.
* ``reports_dir`` (conf/config.yaml: reports/ for the default dataset, reports/<name> for any
  other) is checked when composing: :func:`releval.paths.reports_folder`.
* Names are checked when composing: an unknown group option, a grid model, chunking or fusion
  that conf/ does not define, a reranked run outside the grid or a baseline that is not a
  configuration are one line with the closest valid names.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from releval import paths
from releval.errors import InputError
from releval.io import write_bytes, write_text

RECORDED = Path("overrides") / "recorded.yaml"  # under the config directory
RECORDED_KEY = "recorded_overrides"
COMMAND_LINE = "<command line>"
HEADER = re.compile(
    r"^# composed by `releval params` from conf/ sha256:(?P<conf>[0-9a-f]{64}) body sha256:(?P<body>[0-9a-f]{64})\n"
)


# --------------------------------------------------------------------------- overrides


@dataclass(frozen=True)
class Override:
    """One Hydra override as given: ``group[@package]=option``, ``+group@package=option`` or ``key.path=value``."""

    text: str
    key: str  # what a later override of the same thing replaces
    value: str | None  # None: a group entry deleted (`~group@package`)
    group: str | None  # the config group (a folder of conf/) for a group choice, else None
    adds: bool  # a leading '+': adds a group entry or a key


def parse_override(text: str, conf_dir: str | Path) -> Override:
    if text.startswith("~"):  # only a group entry can be dropped from a config file (set to null)
        key = text[1:].split("=", 1)[0]
        group_name = key.split("@", 1)[0]
        if not key or not (Path(conf_dir) / group_name).is_dir():
            raise InputError(
                f"{text!r}: only a config group entry can be deleted and recorded; edit conf/ instead",
                file=COMMAND_LINE,
            )
        return Override(text, key, None, group_name, adds=False)
    if "=" not in text:
        raise InputError(f"{text!r}: expected KEY=VALUE", file=COMMAND_LINE)
    key, value = text.split("=", 1)
    adds = key.startswith("+")
    key = key.lstrip("+")
    if not key:
        raise InputError(f"{text!r}: expected KEY=VALUE", file=COMMAND_LINE)
    group_name = key.split("@", 1)[0]
    is_group = (Path(conf_dir) / group_name).is_dir() and ("@" in key or "." not in key)
    return Override(text, key, value, group_name if is_group else None, adds)


def check_group_choice(override: Override, conf_dir: str | Path) -> None:
    """An option of a config group must be a file of that group: one line with the closest names."""
    if override.group is None or override.value is None:
        return
    options = sorted(p.stem for p in (Path(conf_dir) / override.group).glob("*.yaml"))
    if override.value not in options:
        raise InputError(
            unknown(f"{override.group} option", override.value, options), file=COMMAND_LINE, field=override.key
        )


def unknown(what: str, name: str, known: Iterable[str]) -> str:
    """``unknown model 'minlm'; did you mean 'minilm'? (known: e5small, minilm)``."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {what} {name!r}{hint} (known: {', '.join(known) or 'none'})"


def check_value_keys(overrides: Sequence[str], composed: Mapping[str, Any], conf_dir: str | Path) -> None:
    """A value override without '+' must name a key the configuration has (Hydra alone would add it)."""
    for text in overrides:
        o = parse_override(text, conf_dir)
        if o.group is not None or o.adds:
            continue
        node: Any = composed
        walked = []
        for part in o.key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                where = ".".join(walked) or "the top level"
                known = node.keys() if isinstance(node, Mapping) else ()
                raise InputError(
                    unknown(f"key under {where}", part, map(str, known)) + "; a new key needs a leading '+'",
                    file=COMMAND_LINE,
                    field=o.key,
                )
            node = node[part]
            walked.append(part)


def merge_overrides(recorded: Sequence[str], new: Sequence[str], conf_dir: str | Path) -> list[str]:
    """``recorded`` then ``new``; a later override of the same key replaces the earlier one."""
    merged: dict[str, str] = {}
    for text in [*recorded, *new]:
        merged.pop(parse_override(text, conf_dir).key, None)
        merged[parse_override(text, conf_dir).key] = text
    return list(merged.values())


def recorded_overrides(conf_dir: str | Path) -> list[str]:
    path = Path(conf_dir) / RECORDED
    if not path.exists():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return [str(o) for o in data.get(RECORDED_KEY) or []]


def recorded_config(overrides: Sequence[str], conf_dir: str | Path) -> str:
    """The Hydra config file that applies ``overrides`` when the primary config includes it last."""
    adds: list[dict[str, str]] = []
    replaces: list[dict[str, str]] = []
    values: dict[str, Any] = {}
    for text in overrides:
        o = parse_override(text, conf_dir)
        if o.group is not None:
            # Hydra reads "override /group@pkg: option" entries as one-key mappings.
            (adds if o.adds else replaces).append({f"{'' if o.adds else 'override '}/{o.key}": o.value})
        else:
            node = values
            *parents, leaf = o.key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = yaml.safe_load(o.value) if o.value != "" else ""
    body: dict[str, Any] = {}
    if adds or replaces:
        body["defaults"] = [*adds, *replaces]  # Hydra wants the overrides last
    body[RECORDED_KEY] = list(overrides)
    body.update(values)
    text = yaml.safe_dump(body, sort_keys=False, allow_unicode=True)
    return (
        "# @package _global_\n"
        "# Written by `releval params`: the overrides you gave it, applied after conf/config.yaml by\n"
        "# both `releval params` (make repro) and `dvc exp run`. Forget them: `releval params --reset`.\n" + text
    )


# --------------------------------------------------------------------------- composing


def conf_sha256(conf_dir: str | Path) -> str:
    """One digest of every file under conf/ (paths and bytes), the recorded overrides included."""
    digest = hashlib.sha256()
    root = Path(conf_dir)
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def compose_text(conf_dir: str | Path, overrides: Sequence[str] = ()) -> str:
    """The YAML DVC's composer writes for conf/ plus ``overrides`` (Hydra errors as one line)."""
    from dvc.utils.hydra import compose_and_dump
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "params.yaml"  # the suffix picks DVC's dumper
        try:
            compose_and_dump(out, str(Path(conf_dir).resolve()), None, "config", "", list(overrides))
        except (HydraException, OmegaConfBaseException) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"cannot compose: {first}", file=str(conf_dir)) from None
        return out.read_text(encoding="utf-8")


def header(conf_digest: str, body: str) -> str:
    body_digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return f"# composed by `releval params` from conf/ sha256:{conf_digest} body sha256:{body_digest}\n"


def split_header(text: str) -> tuple[dict[str, str] | None, str]:
    """(the header's digests or None, the body)."""
    match = HEADER.match(text)
    if not match:
        return None, text
    return match.groupdict(), text[match.end() :]


def changed_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two parsed params documents."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = sorted(set(a) | set(b), key=str)
        return [k for key in keys for k in changed_keys(a.get(key), b.get(key), f"{prefix}{key}.")]
    return [] if a == b else [prefix.rstrip(".")]


def edits_since_composed(params_path: str | Path, conf_dir: str | Path) -> list[str]:
    """Keys of params.yaml changed after it was composed (by hand or `dvc exp run -S`); [] when none.

    With releval's header the body's digest says whether it was touched. A file without the
    header (DVC composed it, or an older checkout) is compared with conf/ as it is now.
    """
    path = Path(params_path)
    if not path.exists():
        return []
    digests, body = split_header(path.read_text(encoding="utf-8"))
    if digests is not None and hashlib.sha256(body.encode("utf-8")).hexdigest() == digests["body"]:
        return []
    return changed_keys(yaml.safe_load(body), yaml.safe_load(compose_text(conf_dir)))


def check_grid(params: Mapping[str, Any], source: str = "params.yaml") -> None:
    """Every name the grid uses is defined: models, chunkings, fusions, externals, rerankers, runs, the baseline."""
    from releval.retrieval.runs import grid_config_ids, is_external, run_path_id

    grid = params.get("grid") or {}
    for field, section, what in (
        ("models", "models", "model"),
        ("chunkings", "chunkings", "chunking"),
        ("fusions", "fusions", "fusion"),
    ):
        defined = params.get(section) or {}
        for name in grid.get(field) or []:
            if name not in defined:
                raise InputError(unknown(what, str(name), defined), file=source, field=f"grid.{field}")
    externals = params.get("externals") or {}
    for name in grid.get("external") or []:
        if name not in externals:
            raise InputError(unknown("external run", str(name), externals), file=source, field="grid.external")
    fusions = params.get("fusions") or {}
    for key, entry in (grid.get("fused") or {}).items():
        if not isinstance(entry, Mapping) or set(entry) != {"fusion", "runs"}:
            raise InputError("expected exactly the keys fusion and runs", file=source, field=f"grid.fused.{key}")
        if key in fusions:
            raise InputError(
                "a grid.fused key must not be a fusion's name (both name folders under runs/fused)",
                file=source,
                field=f"grid.fused.{key}",
            )
        if entry["fusion"] not in fusions:
            raise InputError(unknown("fusion", str(entry["fusion"]), fusions), file=source, field=f"grid.fused.{key}")
    ids = grid_config_ids(grid)
    first_stage = set(ids)
    for key, entry in (grid.get("reranked") or {}).items():
        rerankers = params.get("rerankers") or {}
        if entry.get("reranker") not in rerankers:
            raise InputError(
                unknown("reranker", str(entry.get("reranker")), rerankers), file=source, field=f"grid.reranked.{key}"
            )
        run_id = run_path_id(str(entry.get("run", "")), grid)
        if is_external(run_id):
            raise InputError(
                "an external run cannot be reranked: its passages are not the pipeline's chunks",
                file=source,
                field=f"grid.reranked.{key}.run",
            )
        if run_id not in first_stage:
            raise InputError(
                unknown("first-stage run", run_id, (i for i in ids if "+rerank(" not in i)),
                file=source,
                field=f"grid.reranked.{key}.run",
            )
    for key, entry in (grid.get("fused") or {}).items():
        for member in entry["runs"]:
            if run_path_id(str(member)) not in first_stage:
                raise InputError(
                    unknown("first-stage run", run_path_id(str(member)), (i for i in ids if "+rerank(" not in i)),
                    file=source,
                    field=f"grid.fused.{key}.runs",
                )
    baseline = grid.get("baseline")
    if baseline is not None and baseline not in ids:
        raise InputError(unknown("configuration", str(baseline), ids), file=source, field="grid.baseline")


@dataclass(frozen=True)
class Composed:
    path: Path
    overrides: list[str]


def compose(
    conf_dir: str | Path,
    params_path: str | Path,
    new_overrides: Sequence[str] = (),
    *,
    reset: bool = False,
    discard_edits: bool = False,
) -> Composed:
    """Record ``new_overrides`` with the ones already recorded, compose, check names, write params.yaml."""
    conf_dir, params_path = Path(conf_dir), Path(params_path)
    if not discard_edits:
        edited = edits_since_composed(params_path, conf_dir)
        if edited:
            shown = ", ".join(edited[:5]) + (f" and {len(edited) - 5} more" if len(edited) > 5 else "")
            raise InputError(
                f"changed since it was composed from conf/ ({shown}); keep the change with "
                f"`releval params KEY=VALUE` (recorded in conf/{RECORDED.as_posix()}), "
                "or drop it with `releval params --discard-edits`",
                file=str(params_path),
            )
    for text in new_overrides:
        check_group_choice(parse_override(text, conf_dir), conf_dir)
    overrides = merge_overrides([] if reset else recorded_overrides(conf_dir), new_overrides, conf_dir)
    recorded_path = conf_dir / RECORDED
    before = recorded_path.read_bytes() if recorded_path.exists() else None
    try:
        # Value keys are checked against the configuration the group choices alone make.
        _write_recorded(recorded_path, [o for o in overrides if parse_override(o, conf_dir).group], conf_dir)
        check_value_keys(new_overrides, yaml.safe_load(compose_text(conf_dir)), conf_dir)
        _write_recorded(recorded_path, overrides, conf_dir)
        body = compose_text(conf_dir)
        check_grid(yaml.safe_load(body), source=f"{params_path} (composed)")
        paths.reports_folder(yaml.safe_load(body), source=f"{params_path} (composed)")
    except InputError:
        _restore(recorded_path, before)
        raise
    write_text(params_path, header(conf_sha256(conf_dir), body) + body)
    return Composed(params_path, overrides)


def _write_recorded(path: Path, overrides: Sequence[str], conf_dir: Path) -> None:
    if not overrides:
        if path.exists():
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, recorded_config(overrides, conf_dir))


def _restore(path: Path, before: bytes | None) -> None:
    if before is None:
        path.unlink(missing_ok=True)
        return
    write_bytes(path, before)


def check_composed(params_path: str | Path, conf_dir: str | Path) -> None:
    """params.yaml was composed from conf/ as it is now, and its grid names exist (the `params` stage)."""
    path = Path(params_path)
    if not path.exists():
        raise InputError("missing; compose it with `releval params` (or `make repro`)", file=str(path))
    digests, body = split_header(path.read_text(encoding="utf-8"))
    if digests is not None and digests["conf"] != conf_sha256(conf_dir):
        raise InputError(
            f"{conf_dir}/ changed since this file was composed; "
            "run `make repro` (or `releval params`, then `dvc repro`)",
            file=str(path),
        )
    check_grid(yaml.safe_load(body) or {}, source=str(path))
    paths.reports_folder(yaml.safe_load(body) or {}, source=str(path))
