"""Sampled judging's files: the blind pool of a stratified random sample and its recorded design.

`releval pool --sample N|RATE [--seed S]` draws, instead of the whole unjudged top-k pool, a
stratified random sample of it (:func:`releval.measurement.inferred.draw_sample`: strata by best
rank, [1], [2-3], [4-10], [11-k], allocation 8:2:1, at least one pair per non-empty (query,
stratum) cell, inclusion probability ``n_h / N_h`` per pair) and writes two files: the pool file
of the sampled pairs (the same blind file as every pool: :func:`releval.judging.pool.write_pool`,
for the judging page, the model judge or a spreadsheet) and ``sample.json`` beside it, the design
(:class:`~releval.measurement.inferred.SampleDesign`: rate, size, seed, strata, weights, every
frame pair's stratum and per-cell sizes, so every pair's inclusion probability) plus what it was
drawn from: the source runs, the depth, the judgment set whose judged pairs were left out, and the
pool file's name (:data:`DESIGN_NAME`, :func:`design_record`).

Importing the filled pool (`releval pool --import`) finds the design beside it
(:func:`design_beside`), refuses a sample that is not completely graded (the estimators need every
sampled pair) or rows outside it, copies the design into the new judgment version as
``sample.json`` and declares the version ``sampled`` (:func:`completeness_of`). The score stage
reads it back (:func:`read_set_design`) and infers the metrics.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from releval import io
from releval.errors import InputError
from releval.judging.completeness import SAMPLED, Completeness
from releval.measurement.inferred import SampleDesign, draw_sample, sampling_frame

DESIGN_NAME = "sample.json"  # beside the pool file, and inside a sampled judgment version
SOURCE_KEY = "source"  # sample.json's record of what the sample was drawn from (not part of the design)


def parse_size(text: str) -> float | int:
    """``--sample``'s value: a whole number of pairs (``200``), or a rate in (0, 1] (``0.2``) or percent (``20%``)."""
    value = str(text).strip()
    try:
        if value.endswith("%"):
            rate = float(value[:-1]) / 100.0
        elif value.isdecimal():
            if int(value) < 1:
                raise ValueError
            return int(value)
        else:
            rate = float(value)
    except ValueError:
        rate = float("nan")
    if not 0.0 < rate <= 1.0:
        raise InputError(
            f"a number of pairs (200), a rate in (0, 1] (0.2) or a percentage (20%); got {text!r}",
            file="<command line>",
            field="sample",
        )
    return rate


@dataclass(frozen=True)
class Sample:
    """A drawn sample: its design, the pairs to judge (query_id, doc_id) and what it was drawn from."""

    design: SampleDesign
    pairs: pl.DataFrame
    source: dict[str, Any]


def draw(
    runs: Mapping[str, pl.DataFrame],
    depth: int,
    size: float | int,
    seed: int,
    *,
    judged: pl.DataFrame | None = None,
    ties: str = "docid-asc",
    source: Mapping[str, Any] | None = None,
) -> Sample:
    """The sample of the unjudged top-``depth`` pairs of ``runs`` (name -> query_id, doc_id, score; ranked
    under ``ties``), ``judged`` (query_id, doc_id, grade) left out of the frame; the same arguments give
    the same sample. ``source``: what to record about where the runs and judgments came from."""
    qrels = None
    if judged is not None and judged.height:
        qrels = judged.select(
            pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8), pl.col("grade").cast(pl.Int64)
        ).unique(subset=["query_id", "doc_id"], keep="first")
    frame = sampling_frame(
        {name: run.select("query_id", "doc_id", "score") for name, run in runs.items()}, depth, qrels, ties=ties
    )
    if frame.size == 0:
        raise InputError(
            f"nothing to sample: the runs' top {depth} holds no unjudged pair", file="<command line>", field="sample"
        )
    design = draw_sample(frame, size, seed)
    pairs = design.sampled_pairs().select("query_id", "doc_id")
    return Sample(design, pairs, {"depth": depth, **dict(source or {})})


def design_record(sample: Sample, pool_file: str | Path) -> dict[str, Any]:
    """sample.json's content: the design (SampleDesign.to_dict) with what it was drawn from under
    :data:`SOURCE_KEY` (runs, depth, judgments left out, the pool file's name) and, for the reader,
    each (query, stratum) cell's inclusion probability is implied by its ``population`` and ``size``."""
    return {**sample.design.to_dict(), SOURCE_KEY: {**sample.source, "pool_file": Path(pool_file).name}}


def design_bytes(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def design_path(pool_file: str | Path) -> Path:
    """Where a pool file's design lies: :data:`DESIGN_NAME` in the same folder."""
    return Path(pool_file).parent / DESIGN_NAME


def write_design(pool_file: Path, record: Mapping[str, Any], force: bool = False) -> Path:
    """Write sample.json beside ``pool_file`` (atomically); an existing one belonging to another pool
    file is never overwritten unless ``force``."""
    path = design_path(pool_file)
    if path.exists() and not force:
        try:
            other = json.loads(path.read_text(encoding="utf-8")).get(SOURCE_KEY, {}).get("pool_file")
        except (OSError, ValueError, AttributeError):
            other = None
        if other != pool_file.name:
            raise InputError(
                f"exists (the design of {other or 'another pool'}); write the pool in another folder, or pass --force",
                file=str(path),
                field="out",
            )
    io.write_bytes(path, design_bytes(record))
    return path


def read_design(path: str | Path) -> tuple[SampleDesign, dict[str, Any], bytes]:
    """(the design, its source record, the file's bytes) of a sample.json; a bad one is an InputError naming it."""
    path = Path(path)
    try:
        data = path.read_bytes()
        record = json.loads(data)
    except (OSError, ValueError) as exc:
        raise InputError(f"not a readable sample design: {exc}", file=str(path), field="sample") from None
    try:
        design = SampleDesign.from_dict(record)
    except InputError as exc:
        raise InputError(exc.detail, file=str(path), field=exc.field or "sample") from None
    return design, dict(record.get(SOURCE_KEY) or {}), data


def design_beside(pool_file: str | Path) -> Path | None:
    """The sample.json beside ``pool_file`` that names it as its pool file; None when there is none."""
    path = design_path(pool_file)
    if not path.is_file():
        return None
    try:
        named = json.loads(path.read_text(encoding="utf-8")).get(SOURCE_KEY, {}).get("pool_file")
    except (OSError, ValueError, AttributeError):
        return path  # read_design names what is wrong with it
    return path if named == Path(pool_file).name else None


def completeness_of(design: SampleDesign, data: bytes) -> Completeness:
    """What a version judged from ``design`` declares: sampled, its depth and systems, and the sample's record."""
    return Completeness(
        SAMPLED,
        design.k,
        tuple(design.configurations),
        {
            "file": DESIGN_NAME,
            "sha256": _sha256(data),
            "pairs": design.sample_size,
            "frame": design.frame_size,
            "rate": round(design.sample_size / design.frame_size, 6) if design.frame_size else 0.0,
            "seed": design.seed,
        },
    )


def check_graded(design: SampleDesign, graded: Sequence[tuple[str, str]], source: str) -> None:
    """Refuse a filled sampled pool whose graded rows are not exactly the sample: an ungraded sampled
    pair leaves the estimators without a pair the design counts on; a pair outside it has no known
    inclusion probability."""
    sampled = {(q.query_id, d) for q in design.queries for d in q.sampled}
    given = set(graded)
    missing = sorted(sampled - given)
    if missing:
        q, d = missing[0]
        raise InputError(
            f"{len(missing)} of the {len(sampled)} sampled pairs have no grade (e.g. query {q!r}, document {d!r}); "
            "inferred metrics need every sampled pair judged: grade them all, then import",
            file=source,
            field="grade",
        )
    extra = sorted(given - sampled)
    if extra:
        q, d = extra[0]
        raise InputError(
            f"{len(extra)} graded rows are not in the sample of {DESIGN_NAME} (e.g. query {q!r}, document {d!r})",
            file=source,
            field="doc_id",
        )


def read_set_design(set_dir: str | Path, completeness: Completeness) -> SampleDesign:
    """The design of a sampled judgment version, checked against the sha256 its manifest records."""
    sample = completeness.sample or {}
    path = Path(set_dir) / str(sample.get("file") or DESIGN_NAME)
    design, _, data = read_design(path)
    if sample.get("sha256") and _sha256(data) != sample["sha256"]:
        raise InputError(
            f"sha256 {_sha256(data)[:12]} differs from the {str(sample['sha256'])[:12]} its manifest records",
            file=str(path),
            field="sample",
        )
    return design
