"""Which dataset a command works on, read from the configuration and never guessed from folder layout.

* The **active** dataset is params.yaml's ``dataset`` and ``judgments``: what `dvc repro` reads.
* The **declared** datasets are conf/dataset/<option>.yaml, each with its corpus, queries and the
  judgments its ``defaults`` name.
* A **judgment set's** dataset is the one its manifest names (``dataset: NAME``, written by
  `releval init-dataset`, `pool --import` and `judge`); else the active dataset when params.yaml
  names the set as its judgments; else its parent's (a revision belongs to the corpus of the
  version it revises). A set that none of these places cannot have its ids checked: commands
  say so and name the manifest key that fixes it.

`validate`, `pool --import`, `judge` and the model judge take their corpus and queries from here
unless a flag names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from releval import paths
from releval.config import load_params
from releval.errors import InputError
from releval.inputs.corpus import corpus_format_of

MANIFEST_NAME = "manifest.yaml"  # releval.judging.judgments.MANIFEST_NAME (that module imports this one)


@dataclass(frozen=True)
class Dataset:
    """A dataset as a configuration declares it."""

    name: str  # dataset.name: what the archive and the reports call it
    corpus: Path
    corpus_format: str
    queries: Path
    queries_format: str
    declared_in: str  # params.yaml, or conf/dataset/<option>.yaml
    subset: Mapping[str, Any] = field(default_factory=dict)
    judgments: Mapping[str, Any] | None = None  # {version, path, format, ...}: active, or the config's default

    @property
    def judgment_set(self) -> Path | None:
        """The releval judgment set this dataset reads, when its judgments are one (not a qrels file)."""
        if not self.judgments or self.judgments.get("format") != "releval" or not self.judgments.get("path"):
            return None
        return Path(str(self.judgments["path"]))

    def holds(self, folder: Path) -> bool:
        """Whether its corpus, queries or judgment set lie in ``folder``."""
        inside = [self.corpus, self.queries] + ([self.judgment_set] if self.judgment_set else [])
        return any(_within(path, folder) for path in inside)


def _within(path: Path, folder: Path) -> bool:
    return path.resolve() == folder.resolve() or path.resolve().is_relative_to(folder.resolve())


def same_path(a: str | Path, b: str | Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _dataset(section: Any, judgments: Any, declared_in: str) -> Dataset | None:
    """A Dataset from a params ``dataset`` section (or a conf/dataset file), None when it lacks a part."""
    if not isinstance(section, Mapping):
        return None
    corpus, queries = section.get("corpus"), section.get("queries")
    if not isinstance(corpus, Mapping) or not isinstance(queries, Mapping):
        return None
    if not all(isinstance(part.get(key), str) for part in (corpus, queries) for key in ("path", "format")):
        return None
    name = section.get("name")
    return Dataset(
        name=str(name) if name is not None else Path(declared_in).stem,
        corpus=Path(corpus["path"]),
        corpus_format=corpus["format"],
        queries=Path(queries["path"]),
        queries_format=queries["format"],
        declared_in=declared_in,
        subset=section.get("subset") or {},
        judgments=judgments if isinstance(judgments, Mapping) else None,
    )


def active_dataset(params_path: str | Path = paths.PARAMS) -> Dataset | None:
    """params.yaml's dataset and judgments; None when there is no params.yaml (nothing composed yet)."""
    path = Path(params_path)
    if not path.is_file():
        return None
    params = load_params(path)
    found = _dataset(params.get("dataset"), params.get("judgments"), str(path))
    if found is None:
        raise InputError(
            "expected dataset.corpus and dataset.queries, each with path and format; recompose with `releval params`",
            file=str(path),
            field="dataset",
        )
    return found


def _yaml_file(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _default_judgments(document: Mapping[str, Any], conf_dir: Path) -> Mapping[str, Any] | None:
    """The judgments config a dataset file's ``defaults`` name (``/judgments@_global_.judgments: X``)."""
    for entry in document.get("defaults") or []:
        if not isinstance(entry, Mapping):
            continue
        for key, option in entry.items():
            if str(key).lstrip("/").split("@", 1)[0] == "judgments" and isinstance(option, str):
                found = _yaml_file(conf_dir / "judgments" / f"{option}.yaml")
                return found if isinstance(found, Mapping) else None
    return None


def declared_datasets(conf_dir: str | Path = paths.CONF) -> list[Dataset]:
    """Every dataset conf/dataset/*.yaml declares, in file-name order (files that are not one are skipped)."""
    conf_dir = Path(conf_dir)
    found = []
    for path in sorted((conf_dir / "dataset").glob("*.yaml")):
        document = _yaml_file(path)
        if not isinstance(document, Mapping):
            continue
        dataset = _dataset(document, _default_judgments(document, conf_dir), path.as_posix())
        if dataset is not None:
            found.append(dataset)
    return found


def known_datasets(params_path: str | Path = paths.PARAMS, conf_dir: str | Path = paths.CONF) -> list[Dataset]:
    """The active dataset first, then each declared one of another name."""
    active = active_dataset(params_path)
    declared = [d for d in declared_datasets(conf_dir) if active is None or d.name != active.name]
    return ([active] if active is not None else []) + declared


def dataset_named(
    name: str, params_path: str | Path = paths.PARAMS, conf_dir: str | Path = paths.CONF
) -> Dataset | None:
    return next((d for d in known_datasets(params_path, conf_dir) if d.name == name), None)


# --------------------------------------------------------------------------- a judgment set's dataset


def manifest_fields(set_dir: Path) -> dict[str, Any]:
    """A set's manifest as a plain mapping, read leniently ({} when unreadable): validation reports its problems."""
    document = _yaml_file(set_dir / MANIFEST_NAME)
    return dict(document) if isinstance(document, Mapping) else {}


@dataclass(frozen=True)
class SetDataset:
    """Where a judgment set's dataset came from."""

    dataset: Dataset | None
    how: str  # how it was found, or why not: printed beside every check
    declared: str | None = None  # the dataset name the manifest (or an ancestor's) declares, if any


def dataset_of_set(
    set_dir: str | Path, params_path: str | Path = paths.PARAMS, conf_dir: str | Path = paths.CONF
) -> SetDataset:
    """The dataset of the judgment set ``set_dir`` (an existing version): see the module docstring."""
    set_dir = Path(set_dir)
    seen: set[Path] = set()
    current: Path | None = set_dir
    while current is not None and current.resolve() not in seen:
        seen.add(current.resolve())
        fields = manifest_fields(current)
        declared = fields.get("dataset")
        what = "its manifest" if current == set_dir else f"the manifest of its ancestor {current}"
        if isinstance(declared, str) and declared:
            found = dataset_named(declared, params_path, conf_dir)
            if found is None:
                names = ", ".join(sorted({d.name for d in known_datasets(params_path, conf_dir)})) or "none"
                how = f"{what} names dataset {declared!r}, which no configuration declares (known: {names})"
                return SetDataset(None, how, declared)
            return SetDataset(found, f"dataset {declared!r}, named by {what}", declared)
        active = active_dataset(params_path)
        if active is not None and active.judgment_set is not None and same_path(active.judgment_set, current):
            origin = "the active judgments" if current == set_dir else f"its ancestor {current}, the active judgments"
            return SetDataset(active, f"dataset {active.name!r}: {origin} in {params_path}")
        parent = fields.get("parent")
        current = current.parent / parent if isinstance(parent, str) and parent else None
    return SetDataset(
        None,
        f"no dataset: neither its manifest (`dataset: NAME`) nor {params_path}'s judgments name it",
    )


# --------------------------------------------------------------------------- the ids a new judgment is checked against

# The reader format of a dataset's queries for commands that need only ids and texts
# (releval's own queries.jsonl is JSONL with query_id and text).
QUERY_TEXT_FORMATS = {"releval": "jsonl"}


@dataclass(frozen=True)
class References:
    """The queries and corpus that judgments written into a set are checked against."""

    queries: Path
    queries_format: str  # a reader format: jsonl | beir | smart | parquet
    corpus: Path
    corpus_format: str
    dataset: str | None  # the dataset's name (what a new manifest records); None when flags named both files
    how: str  # where they came from, for the command's summary line


def references_for(
    base: str | Path | None,
    *,
    queries: str | Path | None = None,
    queries_format: str | None = None,
    corpus: str | Path | None = None,
    corpus_format: str | None = None,
    dataset: str | None = None,
    params_path: str | Path = paths.PARAMS,
    conf_dir: str | Path = paths.CONF,
) -> References:
    """The queries and corpus for judgments going into a set whose base is ``base`` (the existing set,
    or the version a new one revises; None: a new first version, which belongs to ``dataset`` (a
    dataset name), else the active dataset). Files named by flags win; otherwise they are the
    dataset's (:func:`dataset_of_set`). When neither
    places them, an error says how to name them: ids are never checked against nothing."""
    if queries is not None and corpus is not None:
        return References(
            Path(queries),
            queries_format or "jsonl",
            Path(corpus),
            corpus_format or corpus_format_of(Path(corpus)),
            None,
            "the files given",
        )
    if base is not None:
        found = dataset_of_set(base, params_path, conf_dir)
    elif dataset is not None:
        named = dataset_named(dataset, params_path, conf_dir)
        known = ", ".join(sorted(d.name for d in known_datasets(params_path, conf_dir))) or "none"
        found = SetDataset(named, f"dataset {dataset!r}" if named else f"no dataset {dataset!r} (known: {known})")
    else:
        active = active_dataset(params_path)
        found = SetDataset(active, f"the active dataset {active.name!r} ({params_path})" if active else "")
        if active is None:
            found = SetDataset(None, f"no {params_path} names an active dataset")
    chosen = found.dataset
    if chosen is None:
        raise InputError(
            f"cannot tell which queries and corpus the ids refer to: {found.how}; name them with --queries FILE "
            "and --corpus FILE",
            file=str(base) if base is not None else "<command line>",
            field="dataset",
        )
    return References(
        Path(queries) if queries is not None else chosen.queries,
        (queries_format or "jsonl")
        if queries is not None
        else QUERY_TEXT_FORMATS.get(chosen.queries_format, chosen.queries_format),
        Path(corpus) if corpus is not None else chosen.corpus,
        (corpus_format or corpus_format_of(Path(corpus))) if corpus is not None else chosen.corpus_format,
        chosen.name,
        found.how,
    )
