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
* Grid entries that are config-group entries (``grid.fused.<key>``, ``grid.reranked.<key>``) are
  dropped with ``~grid.fused.<key>`` (recorded as Hydra's ``~fused@grid.fused.<key>``), or all of
  them with ``grid.fused={}``. When a model or chunking leaves the grid, the fused and reranked
  entries built on its runs leave with it (recorded, and each named in a note). A value override
  that cannot take effect (``grid.reranked=null``, a mapping Hydra would merge into the defaults
  unchanged) is refused.
"""

from __future__ import annotations

import dataclasses
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


# --------------------------------------------------------------------------- grid entries that are group entries

# Sections of the grid whose entries come from config groups (conf/fused/, conf/reranked/), keyed by name.
ENTRY_SECTIONS = ("grid.fused", "grid.reranked")
# Keys that must stay what conf/config.yaml makes them (a list or a mapping): null cannot take effect.
NOT_NULL = ("grid", "grid.models", "grid.chunkings", "grid.fusions", "grid.fused", "grid.reranked", "grid.external")


def group_entries(conf_dir: str | Path, recorded: Sequence[str]) -> dict[str, str]:
    """Package -> ``group@package`` of every config-group entry in effect under :data:`ENTRY_SECTIONS`:
    conf/config.yaml's defaults plus recorded additions, less recorded deletions."""
    document = yaml.safe_load((Path(conf_dir) / "config.yaml").read_text(encoding="utf-8")) or {}
    keys = [str(k) for entry in document.get("defaults") or [] if isinstance(entry, Mapping) for k in entry]
    for text in recorded:
        o = parse_override(text, conf_dir)
        if o.group is None or "@" not in o.key:
            continue
        if o.value is None:
            keys = [k for k in keys if k.lstrip("/") != o.key]
        elif o.adds:
            keys.append(o.key)
    found = {}
    for key in keys:
        group, _, package = key.lstrip("/").partition("@")
        if package.rpartition(".")[0] in ENTRY_SECTIONS:
            found[package] = f"{group}@{package}"
    return found


def friendly_overrides(new: Sequence[str], conf_dir: str | Path, recorded: Sequence[str]) -> list[str]:
    """``new`` with the forms a user types rewritten into the ones Hydra records: ``~grid.fused.K``
    -> ``~fused@grid.fused.K``; ``grid.fused={}`` -> a deletion of each entry. ``grid.reranked=null``
    and the like are refused (they cannot take effect)."""
    entries = group_entries(conf_dir, recorded)
    out: list[str] = []
    for text in new:
        key, eq, value = text.partition("=")
        if text.startswith("~") and key[1:] and not (Path(conf_dir) / key[1:].split("@", 1)[0]).is_dir():
            package = key[1:]
            if package.rpartition(".")[0] in ENTRY_SECTIONS:
                already = any(
                    parse_override(r, conf_dir).value is None
                    and parse_override(r, conf_dir).key.endswith(f"@{package}")
                    for r in recorded
                )
                if already:
                    continue  # dropped before: nothing to record again
                if package not in entries:
                    section = package.rpartition(".")[0]
                    present = sorted(p.rpartition(".")[2] for p in entries if p.rpartition(".")[0] == section)
                    raise InputError(
                        unknown(f"entry of {section}", package.rpartition(".")[2], present),
                        file=COMMAND_LINE,
                        field=package,
                    )
                out.append(f"~{entries[package]}")
                continue
        if eq and key.lstrip("+") in ENTRY_SECTIONS and yaml.safe_load(value or "null") == {}:
            out += [f"~{entry}" for package, entry in entries.items() if package.rpartition(".")[0] == key.lstrip("+")]
            continue
        if eq and key.lstrip("+") in NOT_NULL and yaml.safe_load(value or "null") is None:
            hint = (
                f"; to drop every entry write '{key}={{}}', to drop one '~{key}.NAME'"
                if key in ENTRY_SECTIONS
                else "; give a list"
            )
            raise InputError(f"{text!r} cannot take effect: the pipeline iterates over {key}{hint}", file=COMMAND_LINE)
        out.append(text)
    return out


def dangling_entries(params: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(section, key, the run it needs) for each grid.fused / grid.reranked entry built on a run the
    grid no longer makes because its model, chunking, fusion or external run is defined but left the
    grid (a name defined nowhere stays an error for :func:`check_grid`), in the order they cascade: a
    reranked entry of a dropped fused entry goes too."""
    grid = params.get("grid") or {}
    found: list[tuple[str, str, str]] = []
    for key, entry in (grid.get("fused") or {}).items():
        runs = entry.get("runs") if isinstance(entry, Mapping) else None
        gone = [str(m) for m in runs or [] if _left_grid(str(m), params, set())]
        if gone:
            found.append(("grid.fused", key, gone[0]))
    dropped = {key for _, key, _ in found}
    for key, entry in (grid.get("reranked") or {}).items():
        run = str(entry.get("run", "")) if isinstance(entry, Mapping) else ""
        if _left_grid(run, params, dropped):
            found.append(("grid.reranked", key, run))
    return found


_FUSED_RUN_PARTS = ("fusions", "models", "chunkings")  # fused/<fusion>/<model>/<chunking>: where each is defined


def _left_grid(run: str, params: Mapping[str, Any], dropped_fused: set[str]) -> bool:
    """Whether the first-stage run path ``run`` names a defined part the grid no longer holds."""
    grid = params.get("grid") or {}

    def gone(name: str, defined: str, chosen: str) -> bool:
        return name in (params.get(defined) or {}) and name not in (grid.get(chosen) or [])

    parts = run.strip("/").split("/")
    if parts[0] == "model" and len(parts) == 3:
        return gone(parts[1], "models", "models") or gone(parts[2], "chunkings", "chunkings")
    if parts[0] == "bm25" and len(parts) == 2:
        return gone(parts[1], "chunkings", "chunkings")
    if parts[0] == "fused" and len(parts) == 4:
        return any(gone(name, section, section) for name, section in zip(parts[1:], _FUSED_RUN_PARTS))
    if parts[0] == "fused" and len(parts) == 2:
        return parts[1] in dropped_fused
    if parts[0] == "external" and len(parts) == 2:
        return gone(parts[1], "externals", "external")
    return False


def _takes_effect(text: str, composed: Mapping[str, Any], conf_dir: str | Path) -> bool:
    """A value override's key holds its value once composed (Hydra merges a mapping into the defaults)."""
    o = parse_override(text, conf_dir)
    if o.group is not None or o.value is None:
        return True
    node: Any = composed
    for part in o.key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    wanted = yaml.safe_load(o.value) if o.value != "" else ""
    if isinstance(wanted, Mapping) and isinstance(node, Mapping):
        return all(k in node and node[k] == v for k, v in wanted.items()) and (bool(wanted) or not node)
    return node == wanted or isinstance(wanted, str) and str(node) == wanted


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
            lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
            # Hydra's first line is often only where ("... raised while composing config:"); the cause follows.
            first = " ".join(lines[:2]) if lines and lines[0].endswith(":") else (lines[0] if lines else "")
            raise InputError(f"cannot compose: {first or type(exc).__name__}", file=str(conf_dir)) from None
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
            choices = unknown("first-stage run", run_id, (i for i in ids if "+rerank(" not in i))
            raise InputError(
                f"{choices}; drop the entry with '~grid.reranked.{key}'",
                file=source,
                field=f"grid.reranked.{key}.run",
            )
    for key, entry in (grid.get("fused") or {}).items():
        for member in entry["runs"]:
            member_id = run_path_id(str(member))
            if member_id not in first_stage:
                choices = unknown("first-stage run", member_id, (i for i in ids if "+rerank(" not in i))
                raise InputError(
                    f"{choices}; drop the entry with '~grid.fused.{key}'",
                    file=source,
                    field=f"grid.fused.{key}.runs",
                )
    baseline = grid.get("baseline")
    if baseline is not None and baseline not in ids:
        models, chunkings = grid.get("models") or [], grid.get("chunkings") or []
        suggestion = f"{models[0]}/{chunkings[0]}" if models and chunkings else ids[0]
        raise InputError(
            unknown("configuration", str(baseline), ids)
            + f"; choose what reports compare against with 'grid.baseline={suggestion}'",
            file=source,
            field="grid.baseline",
        )


@dataclass(frozen=True)
class Composed:
    path: Path
    overrides: list[str]
    notes: list[str] = dataclasses.field(default_factory=list)  # what composing did beyond the overrides


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
    recorded = [] if reset else recorded_overrides(conf_dir)
    new_overrides = friendly_overrides(new_overrides, conf_dir, recorded)
    for text in new_overrides:
        check_group_choice(parse_override(text, conf_dir), conf_dir)
    overrides = merge_overrides(recorded, new_overrides, conf_dir)
    recorded_path = conf_dir / RECORDED
    before = recorded_path.read_bytes() if recorded_path.exists() else None
    notes: list[str] = []
    try:
        # Value keys are checked against the configuration the group choices alone make.
        _write_recorded(recorded_path, [o for o in overrides if parse_override(o, conf_dir).group], conf_dir)
        check_value_keys(new_overrides, yaml.safe_load(compose_text(conf_dir)), conf_dir)
        _write_recorded(recorded_path, overrides, conf_dir)
        body = compose_text(conf_dir)
        overrides, body, notes = _drop_dangling(overrides, body, conf_dir, recorded_path)
        composed = yaml.safe_load(body)
        for text in new_overrides:
            if not _takes_effect(text, composed, conf_dir):
                raise InputError(
                    f"{text!r} cannot take effect: a mapping given on the command line is merged into the "
                    "defaults, not put in their place; drop an entry of grid.fused or grid.reranked with "
                    "'~grid.fused.NAME', all of them with 'grid.fused={}'",
                    file=COMMAND_LINE,
                )
        check_grid(composed, source=f"{params_path} (composed)")
        paths.reports_folder(composed, source=f"{params_path} (composed)")
    except InputError:
        _restore(recorded_path, before)
        raise
    write_text(params_path, header(conf_sha256(conf_dir), body) + body)
    return Composed(params_path, overrides, notes)


def _drop_dangling(
    overrides: list[str], body: str, conf_dir: Path, recorded_path: Path
) -> tuple[list[str], str, list[str]]:
    """Record the deletion of every grid.fused / grid.reranked group entry built on a run the grid no
    longer makes (:func:`dangling_entries`), recompose, and say what left. An entry that is not a
    group entry stays, for :func:`check_grid` to name."""
    notes: list[str] = []
    for _ in range(len(ENTRY_SECTIONS) + 1):  # a reranked entry of a dropped fusion goes in a second round
        entries = group_entries(conf_dir, overrides)
        drops = []
        for section, key, run in dangling_entries(yaml.safe_load(body)):
            package = f"{section}.{key}"
            if package in entries:
                drops.append(f"~{entries[package]}")
                notes.append(
                    f"dropped {package}: it is built on {run}, which the grid no longer makes "
                    f"(recorded as '~{entries[package]}'; `releval params --reset` brings the defaults back)"
                )
        if not drops:
            break
        overrides = merge_overrides(overrides, drops, conf_dir)
        _write_recorded(recorded_path, overrides, conf_dir)
        body = compose_text(conf_dir)
    return overrides, body, notes


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
