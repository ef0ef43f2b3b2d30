"""Retrieval metrics over a whole run at once, under an explicit contract.

A metric value depends on conventions that papers rarely state: the gain of a grade, the order
of tied scores, which queries enter the mean. A :class:`Contract` fixes each of them; it is
written next to every number, and numbers computed under different contracts are never
compared (:func:`ensure_same_contract`).

How the engine works: the run is ordered once for all queries, by one argsort of a 64-bit key
(query, score) plus a small fix-up of tied blocks; only rows that have a judgment carry gain, so
every metric is a per-query sum (``np.bincount``) over those few rows, using their rank in the
full ordering. Unjudged retrieved docs count as grade 0; ``judged@k`` reports how many there are.

Incomplete judgments have two answers here besides ``judged@k``. ``bpref`` (Buckley & Voorhees,
SIGIR 2004) ignores unjudged docs by definition. :func:`condense` removes them from the run, so
that any metric can be computed on the condensed list (Sakai, SIGIR 2007). And
:func:`saturated_cutoff` flags a ``recall@k`` whose k is so large a share of the collection that
the value says little about the ranking.

trec_eval's conventions, verified against pytrec_eval (``Contract.trec_eval()`` reproduces them):

* ranking: score descending, with scores compared as 32-bit floats (trec_eval stores them in a
  C ``float``, so scores equal in single precision are tied), ties by doc_id descending in byte
  order (``strcmp``); the rank column of a run file is ignored;
* gain is linear (the grade) in ``ndcg_cut``; binary measures count grade >= relevance_level
  (default 1) as relevant; the ideal DCG comes from every judged doc of the query, cut at k;
* ``P_k`` divides by k even when fewer docs were retrieved; ``map`` and ``map_cut_k`` divide by
  the number of relevant judged docs; ``Rprec`` is relevant docs in the top R over R; ``bpref``
  is m_bpref.c's (see :func:`_bpref`);
* queries: a value is reported for each query present in both the run and the qrels, a query
  whose judgments are all non-relevant included (it scores 0); judged queries absent from the
  run and run queries without judgments are ignored, and the mean is over the reported queries
  (trec_eval without ``-c``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.tables import DOC_RUN, QRELS

GAINS = ("exponential", "linear")
TIE_RULES = ("docid-asc", "trec_eval")
NO_RELEVANT_POLICIES = ("exclude", "zero")
MISSING_IN_RUN_POLICIES = ("zero", "exclude")

# Conventions this engine does not let a caller change; recorded so that a contract written by
# another tool with other choices is seen to differ.
FIXED_TERMS = {
    "discount": "log2(rank+1)",
    "idcg": "all judged docs of the query by grade, cut at k",
    "unjudged": "grade 0",
    "aggregation": "arithmetic mean over evaluated queries",
}

_CONTRACT_SOURCE = "<contract>"
_METRICS_SOURCE = "<metrics>"


@dataclass(frozen=True)
class Contract:
    """The conventions behind a set of numbers. Defaults are releval's; see :meth:`trec_eval`.

    * gain: ``exponential`` (2^grade - 1) or ``linear`` (the grade), for dcg, ndcg and ceiling;
    * ties: ``docid-asc`` (equal scores ordered by doc_id ascending) or ``trec_eval`` (module doc);
    * rel_threshold: the lowest grade that the binary metrics (recall, p, rprec, mrr, map, hit)
      count as relevant; nDCG's gain uses every grade;
    * no_relevant: a judged query without a doc at or above the threshold (with the default
      threshold: IDCG = 0) is left out of the mean (``exclude``) or enters it (``zero``; its binary
      metrics are 0, and so are its nDCG and ceiling when IDCG = 0);
    * missing_in_run: a judged query absent from the run scores 0 (``zero``) or is left out.
    """

    gain: str = "exponential"
    ties: str = "docid-asc"
    rel_threshold: int = 1
    no_relevant: str = "exclude"
    missing_in_run: str = "zero"

    def __post_init__(self) -> None:
        _require_choice("gain", self.gain, GAINS)
        _require_choice("ties", self.ties, TIE_RULES)
        _require_choice("no_relevant", self.no_relevant, NO_RELEVANT_POLICIES)
        _require_choice("missing_in_run", self.missing_in_run, MISSING_IN_RUN_POLICIES)
        if isinstance(self.rel_threshold, bool) or not isinstance(self.rel_threshold, int) or self.rel_threshold < 1:
            raise InputError(
                f"must be an integer >= 1 (grade 0 is what unjudged docs get), got {self.rel_threshold!r}",
                file=_CONTRACT_SOURCE,
                field="rel_threshold",
            )

    @classmethod
    def trec_eval(cls) -> Contract:
        """trec_eval's conventions: linear gain, its tie order, its query set (see module doc)."""
        return cls(gain="linear", ties="trec_eval", no_relevant="zero", missing_in_run="exclude")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), **FIXED_TERMS}

    @classmethod
    def from_dict(cls, terms: Mapping[str, Any]) -> Contract:
        """Inverse of :meth:`to_dict`; also accepts an evaluation's contract (with ``metrics``)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        for key, value in terms.items():
            if key in FIXED_TERMS and value != FIXED_TERMS[key]:
                raise InputError(
                    f"this engine only computes {FIXED_TERMS[key]!r}, got {value!r}", file=_CONTRACT_SOURCE, field=key
                )
            if key not in fields and key not in FIXED_TERMS and key != "metrics":
                raise InputError("unknown contract term", file=_CONTRACT_SOURCE, field=key)
        return cls(**{key: value for key, value in terms.items() if key in fields})


# params.yaml `metric` keys, not engine terms
METRIC_SECTION_KEYS = ("metrics", "primary", "collapse", "coverage", "evidence")


def contract_from_params(metric_cfg: Mapping[str, Any]) -> Contract:
    """The contract declared by params.yaml's ``metric`` section; a misspelt term is an error,
    never a silent default."""
    fields = {f.name for f in dataclasses.fields(Contract)}
    unknown = sorted(set(metric_cfg) - fields - set(METRIC_SECTION_KEYS))
    if unknown:
        raise InputError(
            f"unknown key(s) {unknown}; contract terms: {sorted(fields)}",
            file="params.yaml",
            field=f"metric.{unknown[0]}",
        )
    return Contract(**{key: metric_cfg[key] for key in fields if key in metric_cfg})


class ContractMismatchError(ValueError):
    """Numbers computed under different contracts were about to be compared."""


def contract_differences(
    a: Contract | Mapping[str, Any], b: Contract | Mapping[str, Any], *, ignore: Collection[str] = ("metrics",)
) -> list[str]:
    """Names of the contract terms on which ``a`` and ``b`` differ, sorted; a term only one side
    records differs. Keys in ``ignore`` are not compared (by default the metric list: not a term)."""
    terms_a, terms_b = _contract_terms(a), _contract_terms(b)
    absent = object()
    return sorted(
        key
        for key in (terms_a.keys() | terms_b.keys()) - set(ignore)
        if terms_a.get(key, absent) != terms_b.get(key, absent)
    )


def ensure_same_contract(a: Contract | Mapping[str, Any], b: Contract | Mapping[str, Any]) -> None:
    """Refuse to compare numbers whose contracts differ, naming each differing term."""
    differences = contract_differences(a, b)
    if differences:
        terms_a, terms_b = _contract_terms(a), _contract_terms(b)
        detail = ", ".join(f"{key} ({terms_a.get(key)!r} vs {terms_b.get(key)!r})" for key in differences)
        raise ContractMismatchError(f"numbers computed under different contracts cannot be compared: {detail}")


# Terms added to recorded contracts after numbers were already reported, with what every contract
# recorded before them meant: a contract without the term is compared as if it recorded this value.
TERMS_ADDED_LATER = {"completeness": "pooled"}  # releval.judging.completeness: the sets were all pooled


def _contract_terms(contract: Contract | Mapping[str, Any]) -> dict[str, Any]:
    terms = contract.to_dict() if isinstance(contract, Contract) else dict(contract)
    if "judgments_sha256" in terms:  # a recorded contract (not the engine's terms alone)
        for key, value in TERMS_ADDED_LATER.items():
            terms.setdefault(key, value)
    return terms


def _require_choice(field: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"must be one of {', '.join(choices)}; got {value!r}", file=_CONTRACT_SOURCE, field=field)


# ---------------------------------------------------------------------------------------------
# Metric names

_CUTOFF_REQUIRED = ("ndcg", "dcg", "recall", "p", "hit", "judged", "ceiling")
_CUTOFF_OPTIONAL = ("mrr", "map")
_CUTOFF_FORBIDDEN = ("rprec", "bpref")
_ALIASES = {"precision": "p", "success": "hit"}


@dataclass(frozen=True)
class Metric:
    kind: str
    k: int | None = None

    @property
    def name(self) -> str:
        return self.kind if self.k is None else f"{self.kind}@{self.k}"


def parse_metric(name: str) -> Metric:
    """``"ndcg@10"`` -> ``Metric("ndcg", 10)``. Case-insensitive; ``precision``/``success`` are aliases."""
    base, has_cutoff, cutoff = name.strip().lower().partition("@")
    kind = _ALIASES.get(base, base)
    known = _CUTOFF_REQUIRED + _CUTOFF_OPTIONAL + _CUTOFF_FORBIDDEN
    if kind not in known:
        raise InputError(
            f"unknown metric {name!r}; known: {', '.join(sorted(known))}", file=_METRICS_SOURCE, field="metrics"
        )
    if not has_cutoff:
        if kind in _CUTOFF_REQUIRED:
            raise InputError(f"metric {name!r} needs a cutoff, e.g. {kind}@10", file=_METRICS_SOURCE, field="metrics")
        return Metric(kind)
    if kind in _CUTOFF_FORBIDDEN:
        raise InputError(f"metric {name!r}: {kind} takes no cutoff", file=_METRICS_SOURCE, field="metrics")
    if not cutoff.isdecimal() or int(cutoff) <= 0:
        raise InputError(
            f"metric {name!r}: the cutoff must be a whole number > 0", file=_METRICS_SOURCE, field="metrics"
        )
    return Metric(kind, int(cutoff))


def parse_metrics(names: Iterable[str | Metric]) -> list[Metric]:
    """Parse and de-duplicate, keeping the first occurrence's position."""
    metrics = [name if isinstance(name, Metric) else parse_metric(name) for name in names]
    if not metrics:
        raise InputError("no metric requested", file=_METRICS_SOURCE, field="metrics")
    return list(dict.fromkeys(metrics))


# ---------------------------------------------------------------------------------------------
# Input validation (shared with the file readers, which pass the line number of each row)


def check_run(run: pl.DataFrame, *, source: str = "run table", lines: np.ndarray | None = None) -> pl.DataFrame:
    """Validate a document-level run and return it as :data:`releval.tables.DOC_RUN`.

    ``lines`` gives the file line of each row; without it rows are numbered from 1.
    """
    return _checked_run(run, source, lines)[0]


def check_qrels(qrels: pl.DataFrame, *, source: str = "qrels table", lines: np.ndarray | None = None) -> pl.DataFrame:
    """Validate judgments and return them as :data:`releval.tables.QRELS`."""
    return _checked_qrels(qrels, source, lines)[0]


@dataclass(frozen=True, eq=False)
class Checked:
    """A table :func:`checked_run` or :func:`checked_qrels` accepted, with the pair keys the check computed:
    :func:`evaluate` takes it in place of the table and does not check it again (on 5 million run rows the
    check is a tenth of `releval score`'s time)."""

    table: pl.DataFrame
    keys: np.ndarray


def checked_run(run: pl.DataFrame, *, source: str = "run table", lines: np.ndarray | None = None) -> Checked:
    """:func:`check_run`, keeping what :func:`evaluate` would otherwise compute again."""
    return Checked(*_checked_run(run, source, lines))


def checked_qrels(qrels: pl.DataFrame, *, source: str = "qrels table", lines: np.ndarray | None = None) -> Checked:
    """:func:`check_qrels`, keeping what :func:`evaluate` would otherwise compute again."""
    return Checked(*_checked_qrels(qrels, source, lines))


def _checked_run(run: pl.DataFrame, source: str, lines: np.ndarray | None) -> tuple[pl.DataFrame, np.ndarray]:
    """:func:`check_run`, also returning the pair keys it computed (see :func:`_pair_keys`)."""
    run = _conform(run, DOC_RUN.schema, source, lines)
    if run.height == 0:
        raise InputError("the run is empty", file=source)
    scores = run["score"].to_numpy()
    if not np.isfinite(scores).all():
        row = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise InputError(
            f"score must be a finite number, got {scores[row]}", file=source, line=_line(row, lines), field="score"
        )
    keys = _pair_keys(run)
    _reject_duplicate_pairs(run, keys, source, lines)
    return run, keys


def _checked_qrels(qrels: pl.DataFrame, source: str, lines: np.ndarray | None) -> tuple[pl.DataFrame, np.ndarray]:
    """:func:`check_qrels`, also returning the pair keys it computed (see :func:`_pair_keys`)."""
    qrels = _conform(qrels, QRELS.schema, source, lines)
    if qrels.height == 0:
        raise InputError("there are no judgments", file=source)
    grades = qrels["grade"].to_numpy()
    if (grades < 0).any():
        row = int(np.flatnonzero(grades < 0)[0])
        raise InputError(f"grade must be >= 0, got {grades[row]}", file=source, line=_line(row, lines), field="grade")
    keys = _pair_keys(qrels)
    _reject_duplicate_pairs(qrels, keys, source, lines)
    return qrels, keys


def _conform(
    frame: pl.DataFrame, schema: Mapping[str, pl.DataType], source: str, lines: np.ndarray | None
) -> pl.DataFrame:
    columns = {}
    for field, dtype in schema.items():
        if field not in frame.columns:
            raise InputError(f"missing column (have: {', '.join(frame.columns)})", file=source, field=field)
        if frame[field].null_count():
            row = int(np.flatnonzero(frame[field].is_null().to_numpy())[0])
            raise InputError("missing value", file=source, line=_line(row, lines), field=field)
        columns[field] = _cast_column(frame[field], dtype, source, lines)
    return pl.DataFrame(columns)


def _cast_column(column: pl.Series, dtype: pl.DataType, source: str, lines: np.ndarray | None) -> pl.Series:
    field = column.name
    if dtype == pl.String:
        if column.dtype == pl.String or column.dtype.is_integer():
            return column.cast(pl.String)
        raise InputError(f"must be text, got {column.dtype}", file=source, field=field)
    if dtype == pl.Float64:
        if column.dtype.is_numeric():
            return column.cast(pl.Float64)
        raise InputError(f"must be numeric, got {column.dtype}", file=source, field=field)
    if column.dtype.is_integer():
        return column.cast(pl.Int64)
    if column.dtype.is_float():
        values = column.to_numpy()
        fractional = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)))
        if fractional.size:
            raise InputError(
                f"must be a whole number, got {values[fractional[0]]}",
                file=source,
                line=_line(fractional[0], lines),
                field=field,
            )
        return column.cast(pl.Int64)
    raise InputError(f"must be an integer, got {column.dtype}", file=source, field=field)


def _line(row: int, lines: np.ndarray | None) -> int:
    return int(lines[row]) if lines is not None else int(row) + 1


def _pair_keys(frame: pl.DataFrame) -> np.ndarray:
    """A 64-bit hash of (query_id, doc_id) per row: equal pairs always collide, unequal ones almost never."""
    query_hash = frame["query_id"].hash(seed=1).to_numpy()
    doc_hash = frame["doc_id"].hash(seed=2).to_numpy()
    return np.multiply(query_hash, np.uint64(0x9E3779B97F4A7C15)) ^ doc_hash


def _reject_duplicate_pairs(frame: pl.DataFrame, keys: np.ndarray, source: str, lines: np.ndarray | None) -> None:
    # The common case, no two keys equal, is decided by polars' hashed count of the 64-bit keys: on 5 million
    # a third of the time of numpy's sort of them (0.28 vs 0.80 s on the 2-core box of benchmarks/results/score.md;
    # counting unique (query_id, doc_id) strings instead cost three times the sort)
    if pl.Series(keys).n_unique() == len(keys):
        return
    sorted_keys = np.sort(keys)
    repeated = sorted_keys[1:][sorted_keys[1:] == sorted_keys[:-1]]
    if repeated.size == 0:
        return
    # Hash equality only nominates candidates; string equality decides.
    candidates = np.flatnonzero(np.isin(keys, repeated))
    groups = (
        frame[candidates]
        .with_columns(row=pl.Series(candidates))
        .group_by("query_id", "doc_id")
        .agg(pl.col("row").sort())
        .filter(pl.col("row").list.len() > 1)
    )
    if groups.height == 0:
        return
    query_id, doc_id, rows = min(groups.iter_rows(), key=lambda group: group[2][1])
    first, second = _line(rows[0], lines), _line(rows[1], lines)
    raise InputError(
        f"duplicate (query_id {query_id!r}, doc_id {doc_id!r}): lines {first} and {second}",
        file=source,
        line=second,
        field="doc_id",
    )


# ---------------------------------------------------------------------------------------------
# Ranking and judgments as flat arrays over all queries


@dataclass(frozen=True)
class _Ranking:
    """The judged rows of the ordered run, in (query, rank) order, plus per-query facts."""

    query: np.ndarray  # query code of each judged retrieved doc
    rank: np.ndarray  # its 1-based rank
    grade: np.ndarray  # its grade
    retrieved: np.ndarray  # docs retrieved, per query code
    tie_query: np.ndarray  # one entry per pair of neighbours with equal scores: the query code
    tie_rank: np.ndarray  # ... and the rank of the upper neighbour

    @property
    def n_queries(self) -> int:
        return len(self.retrieved)


@dataclass(frozen=True)
class _Judgments:
    relevant: np.ndarray  # per query code: judged docs with grade >= threshold
    judged: np.ndarray  # per query code: judged docs
    ideal_query: np.ndarray  # judged docs ordered by query, then grade descending
    ideal_rank: np.ndarray
    ideal_grade: np.ndarray


def _query_codes(query_ids: pl.Series, queries: pl.Enum) -> np.ndarray:
    """Each id's position in the sorted query list, in the narrowest unsigned dtype polars chose."""
    return query_ids.cast(queries).to_physical().to_numpy()


def _judged_run_rows(
    run: pl.DataFrame,
    run_keys: np.ndarray,
    qrels: pl.DataFrame,
    qrels_keys: np.ndarray,
    codes: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the run that have a judgment, and their grades. ``codes``: the run's and the qrels' query
    codes (:func:`_query_codes`), when known, stand for the query ids."""
    candidates = np.flatnonzero(pl.Series(run_keys).is_in(pl.Series(qrels_keys).implode()).to_numpy())
    matches = pl.DataFrame({"key": run_keys[candidates], "run_row": candidates}).join(
        pl.DataFrame({"key": qrels_keys, "qrels_row": np.arange(qrels.height)}), on="key", how="inner"
    )
    run_rows, qrels_rows = matches["run_row"].to_numpy(), matches["qrels_row"].to_numpy()
    # Hash equality only nominates a match; string equality decides (equal codes are equal query ids).
    if codes is None:
        same_query = (run["query_id"].gather(run_rows) == qrels["query_id"].gather(qrels_rows)).to_numpy()
    else:
        same_query = codes[0][run_rows] == codes[1][qrels_rows]
    same_pair = same_query & (run["doc_id"].gather(run_rows) == qrels["doc_id"].gather(qrels_rows)).to_numpy()
    return run_rows[same_pair], qrels["grade"].to_numpy()[qrels_rows[same_pair]]


def _ranking_order(
    codes: np.ndarray, scores: np.ndarray, doc_ids: pl.Series, ties: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row order by query, score descending, then the tie rule; each ordered row's query code;
    and, per neighbouring pair, whether its scores tie.

    One argsort of a 64-bit key (query code, single-precision score) does nearly all the work;
    the few blocks of rows sharing a key are then ordered by full-precision score (except under
    trec_eval's rule, which compares in single precision) and doc_id.
    """
    key = codes.astype(np.uint64)
    key <<= np.uint64(32)
    key |= _descending_order_bits(scores)
    if (key[1:] >= key[:-1]).all():  # the rows are in order already, as a ranked run file's usually are
        order, ordered_key, ordered_codes = np.arange(len(key)), key, codes
    else:
        order = np.argsort(key)
        ordered_key = key[order]
        ordered_codes = (ordered_key >> np.uint64(32)).astype(codes.dtype)
    same_key = ordered_key[1:] == ordered_key[:-1]
    tied_with_next = same_key
    if same_key.any():
        full_precision = ties != "trec_eval"
        _order_equal_keys(
            order, same_key, scores if full_precision else None, doc_ids, doc_id_descending=ties == "trec_eval"
        )
        if full_precision:
            upper = np.flatnonzero(same_key)
            tied_with_next = same_key.copy()
            tied_with_next[upper] = scores[order[upper]] == scores[order[upper + 1]]
    return order, ordered_codes, tied_with_next


def _descending_order_bits(scores: np.ndarray) -> np.ndarray:
    """Unsigned integers that sort like the scores in single precision, highest first."""
    single = scores.astype(np.float32)
    single += np.float32(0.0)  # -0.0 becomes 0.0: equal scores, equal bits
    bits = single.view(np.uint32)
    # In place (5 million rows: fresh arrays cost as much as the arithmetic): bits ^ ((0 - sign) | 0x80000000),
    # then inverted
    mask = bits >> np.uint32(31)
    np.negative(mask, out=mask)
    mask |= np.uint32(0x80000000)
    bits ^= mask
    np.invert(bits, out=bits)
    return bits


def _order_equal_keys(
    order: np.ndarray, same_key: np.ndarray, scores: np.ndarray | None, doc_ids: pl.Series, doc_id_descending: bool
) -> None:
    """Reorder, in place, each block of rows sharing a key: by score descending when ``scores`` is
    given, then by doc_id."""
    in_block = np.zeros(len(order), dtype=bool)
    in_block[:-1] |= same_key
    in_block[1:] |= same_key
    positions = np.flatnonzero(in_block)
    starts_block = ~np.concatenate(([False], same_key))[positions]
    rows = order[positions]
    blocks = pl.DataFrame(
        {"block": np.cumsum(starts_block), "doc_id": doc_ids.gather(rows), "slot": np.arange(len(positions))}
    )
    by, descending = ["block", "doc_id"], [False, doc_id_descending]
    if scores is not None:
        blocks = blocks.with_columns(score=scores[rows] + 0.0)
        by, descending = ["block", "score", "doc_id"], [False, True, doc_id_descending]
    order[positions] = rows[blocks.sort(by, descending=descending)["slot"].to_numpy()]


def _rank_run(
    codes: np.ndarray, run: pl.DataFrame, judged_rows: np.ndarray, grades: np.ndarray, ties: str, n_queries: int
) -> _Ranking:
    order, ordered_codes, tied_with_next = _ranking_order(codes, run["score"].to_numpy(), run["doc_id"], ties)
    retrieved = np.bincount(ordered_codes, minlength=n_queries)
    first_position = np.cumsum(retrieved) - retrieved
    is_judged = np.zeros(run.height, dtype=bool)
    is_judged[judged_rows] = True
    judged_positions = np.flatnonzero(is_judged[order])
    query = ordered_codes[judged_positions].astype(np.int64)
    tie_positions = np.flatnonzero(tied_with_next)
    tie_query = ordered_codes[tie_positions].astype(np.int64)
    return _Ranking(
        query=query,
        rank=judged_positions - first_position[query] + 1,
        grade=_grades_at(order[judged_positions], judged_rows, grades),
        retrieved=retrieved,
        tie_query=tie_query,
        tie_rank=tie_positions - first_position[tie_query] + 1,
    )


def _grades_at(rows: np.ndarray, judged_rows: np.ndarray, grades: np.ndarray) -> np.ndarray:
    """Grades of ``rows`` (all judged), looked up in the unordered (judged_rows, grades) pairs."""
    by_row = np.argsort(judged_rows)
    return grades[by_row[np.searchsorted(judged_rows[by_row], rows)]]


def _judgments(codes: np.ndarray, grades: np.ndarray, n_queries: int, threshold: int) -> _Judgments:
    order = np.lexsort((-grades, codes))
    ideal_query = codes[order]
    return _Judgments(
        relevant=np.bincount(codes[grades >= threshold], minlength=n_queries),
        judged=np.bincount(codes, minlength=n_queries),
        ideal_query=ideal_query,
        ideal_rank=_rank_within_blocks(ideal_query),
        ideal_grade=grades[order],
    )


def _rank_within_blocks(sorted_codes: np.ndarray) -> np.ndarray:
    """1-based position of each element within its run of equal codes."""
    positions = np.arange(len(sorted_codes))
    block_start = np.concatenate(([True], sorted_codes[1:] != sorted_codes[:-1]))
    return positions - np.maximum.accumulate(np.where(block_start, positions, 0)) + 1


# ---------------------------------------------------------------------------------------------
# Metrics: each returns one value per query code


def grade_gains(grades: np.ndarray, gain: str) -> np.ndarray:
    """The gain of each grade: 2^grade - 1 (``exponential``) or the grade (``linear``), as floats."""
    return np.exp2(grades) - 1.0 if gain == "exponential" else grades.astype(np.float64)


def _discount(ranks: np.ndarray) -> np.ndarray:
    return 1.0 / np.log2(ranks + 1.0)


def _within(ranks: np.ndarray, k: int | None) -> np.ndarray:
    return np.ones(len(ranks), dtype=bool) if k is None else ranks <= k


def _per_query_sum(codes: np.ndarray, values: np.ndarray, n_queries: int) -> np.ndarray:
    return np.bincount(codes, weights=values, minlength=n_queries).astype(np.float64)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Elementwise division where 0/0 (no relevant doc, nothing retrieved) is 0."""
    numerator = numerator.astype(np.float64)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def _relevant(ranking: _Ranking, contract: Contract) -> np.ndarray:
    return ranking.grade >= contract.rel_threshold


def _dcg(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    top = _within(ranking.rank, k)
    gains = grade_gains(ranking.grade[top], contract.gain) * _discount(ranking.rank[top])
    return _per_query_sum(ranking.query[top], gains, ranking.n_queries)


def _ideal_dcg(judgments: _Judgments, contract: Contract, k: int | None, n_queries: int) -> np.ndarray:
    top = _within(judgments.ideal_rank, k)
    gains = grade_gains(judgments.ideal_grade[top], contract.gain) * _discount(judgments.ideal_rank[top])
    return _per_query_sum(judgments.ideal_query[top], gains, n_queries)


def _ndcg(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    return _ratio(_dcg(ranking, judgments, contract, k), _ideal_dcg(judgments, contract, k, ranking.n_queries))


def _reorder_ceiling(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    """nDCG@k of the best order of the docs the run already has in its top k."""
    top = _within(ranking.rank, k)
    query, grade = ranking.query[top], ranking.grade[top]
    best_first = np.lexsort((-grade, query))
    query, grade = query[best_first], grade[best_first]
    gains = grade_gains(grade, contract.gain) * _discount(_rank_within_blocks(query))
    dcg = _per_query_sum(query, gains, ranking.n_queries)
    return _ratio(dcg, _ideal_dcg(judgments, contract, k, ranking.n_queries))


def _relevant_retrieved(ranking: _Ranking, contract: Contract, k: int | None) -> np.ndarray:
    hits = _relevant(ranking, contract) & _within(ranking.rank, k)
    return np.bincount(ranking.query[hits], minlength=ranking.n_queries)


def _precision(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    return _relevant_retrieved(ranking, contract, k) / float(k)


def _recall(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    return _ratio(_relevant_retrieved(ranking, contract, k), judgments.relevant)


def _hit(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    return (_relevant_retrieved(ranking, contract, k) > 0).astype(np.float64)


def _r_precision(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    hits = _relevant(ranking, contract) & (ranking.rank <= judgments.relevant[ranking.query])
    return _ratio(np.bincount(ranking.query[hits], minlength=ranking.n_queries), judgments.relevant)


def _average_precision(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    hits = _relevant(ranking, contract) & _within(ranking.rank, k)
    query, rank = ranking.query[hits], ranking.rank[hits]
    precision_at_hit = _rank_within_blocks(query) / rank
    return _ratio(_per_query_sum(query, precision_at_hit, ranking.n_queries), judgments.relevant)


def _reciprocal_rank(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    hits = _relevant(ranking, contract) & _within(ranking.rank, k)
    query, rank = ranking.query[hits], ranking.rank[hits]
    first_hit = _rank_within_blocks(query) == 1
    values = np.zeros(ranking.n_queries)
    values[query[first_hit]] = 1.0 / rank[first_hit]
    return values


def _judged_fraction(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    judged_in_top = np.bincount(ranking.query[ranking.rank <= k], minlength=ranking.n_queries)
    return _ratio(judged_in_top, np.minimum(ranking.retrieved, k))


def _bpref(ranking: _Ranking, judgments: _Judgments, contract: Contract, k: int | None) -> np.ndarray:
    """trec_eval's bpref (m_bpref.c; Buckley & Voorhees, SIGIR 2004), over judged docs only.

    With R the judged docs at or above the threshold and N those below it (retrieved or not),
    each relevant retrieved doc adds 1 - min(n, R) / min(R, N), n being the judged non-relevant
    docs ranked above it (it adds 1 when n = 0); the sum is divided by R. Unjudged docs play no
    part: ``ranking`` holds judged rows only; their order matters, their rank in the full run does not.
    """
    relevant = _relevant(ranking, contract)
    query = ranking.query[relevant]
    # Position among the query's judged retrieved docs, less position among its relevant ones.
    nonrelevant_above = _rank_within_blocks(ranking.query)[relevant] - _rank_within_blocks(query)
    r = judgments.relevant[query]
    n = judgments.judged[query] - r
    # nonrelevant_above > 0 implies min(R, N) > 0; 0/0 (no non-relevant above) is 0: the doc adds 1.
    preferences = 1.0 - _ratio(np.minimum(nonrelevant_above, r), np.minimum(r, n))
    return _ratio(_per_query_sum(query, preferences, ranking.n_queries), judgments.relevant)


_METRIC_FUNCTIONS: dict[str, Callable[[_Ranking, _Judgments, Contract, int | None], np.ndarray]] = {
    "ndcg": _ndcg,
    "dcg": _dcg,
    "recall": _recall,
    "p": _precision,
    "rprec": _r_precision,
    "mrr": _reciprocal_rank,
    "map": _average_precision,
    "hit": _hit,
    "judged": _judged_fraction,
    "ceiling": _reorder_ceiling,
    "bpref": _bpref,
}


# ---------------------------------------------------------------------------------------------
# Incomplete judgments: condensed lists and saturated cutoffs

SATURATION_SHARE = 0.2  # recall@k with k at or above this share of the collection is saturated


def condense(
    run: pl.DataFrame, qrels: pl.DataFrame, *, run_source: str = "run table", qrels_source: str = "qrels table"
) -> pl.DataFrame:
    """The condensed list of ``run``: its rows without a judgment in ``qrels`` removed.

    Sakai, "Alternatives to Bpref", SIGIR 2007 (also Sakai & Kando, "On information retrieval
    metrics designed for evaluation with incomplete relevance assessments", Information
    Retrieval 11(5), 2008): with incomplete judgments, compute a metric on the ranked list of
    judged docs only, each keeping its place relative to the others; e.g. condensed nDCG@10 is
    ``evaluate(qrels, condense(run, qrels), ["ndcg@10"])``. A judgment of any grade, 0 included,
    keeps a row.

    The result is a :data:`releval.tables.DOC_RUN` (query_id, doc_id, score): scores are kept, so
    the engine orders the remaining docs as it ordered them in the full run, under any contract;
    a rank column, and any other column, is dropped, as :func:`evaluate` ignores it. Rows keep
    their input order. A query without any judged retrieved doc disappears from the run (if every
    query does, the result is empty, which :func:`evaluate` refuses).
    """
    qrels, qrels_keys = _checked_qrels(qrels, qrels_source, None)
    run, run_keys = _checked_run(run, run_source, None)
    judged_rows, _ = _judged_run_rows(run, run_keys, qrels, qrels_keys)
    return run[np.sort(judged_rows)]


def saturated_cutoff(metric: str | Metric, documents: int, share: float = SATURATION_SHARE) -> bool:
    """Whether ``metric`` is a ``recall@k`` whose k is at least ``share`` of the ``documents`` in
    the collection.

    Such a cutoff reaches so deep that recall mostly measures how much of the relevant set any
    system finds, not the ranking: values saturate toward 1 and stop separating systems. Only
    recall@k is bounded that way by coverage; every other metric is never saturated here.
    """
    parsed = metric if isinstance(metric, Metric) else parse_metric(metric)
    if isinstance(documents, bool) or not isinstance(documents, (int, np.integer)) or documents < 1:
        raise InputError(f"must be a whole number >= 1, got {documents!r}", file=_METRICS_SOURCE, field="documents")
    if not 0.0 < share <= 1.0:
        raise InputError(f"must be in (0, 1], got {share!r}", file=_METRICS_SOURCE, field="share")
    return parsed.kind == "recall" and parsed.k is not None and parsed.k >= share * documents


# ---------------------------------------------------------------------------------------------
# Evaluation


@dataclass(frozen=True)
class Evaluation:
    contract: Contract
    metrics: tuple[Metric, ...]
    per_query: pl.DataFrame  # query_id + one column per metric, evaluated queries only
    mean: dict[str, float]
    counts: dict[str, Any]
    slices: dict[str, dict[str, Any]] | None = None

    def to_dict(self, per_query: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "contract": {**self.contract.to_dict(), "metrics": [metric.name for metric in self.metrics]},
            "mean": dict(self.mean),
            "counts": dict(self.counts),
        }
        if per_query:
            names = [metric.name for metric in self.metrics]
            out["per_query"] = {query_id: dict(zip(names, values)) for query_id, *values in self.per_query.iter_rows()}
        if self.slices is not None:
            out["slices"] = self.slices
        return out


def evaluate(
    qrels: pl.DataFrame | Checked,
    run: pl.DataFrame | Checked,
    metrics: Sequence[str | Metric],
    contract: Contract = Contract(),
    slices: Mapping[str, str | Iterable[str]] | None = None,
    *,
    qrels_source: str = "qrels table",
    run_source: str = "run table",
) -> Evaluation:
    """Score ``run`` against ``qrels``: per-query values, their mean, and what was skipped.

    ``slices`` maps a query_id to one slice name or several; each slice gets its own mean. A :class:`Checked`
    table is taken as checked.
    """
    wanted = tuple(parse_metrics(metrics))
    qrels, qrels_keys = (
        (qrels.table, qrels.keys) if isinstance(qrels, Checked) else _checked_qrels(qrels, qrels_source, None)
    )
    run, run_keys = (run.table, run.keys) if isinstance(run, Checked) else _checked_run(run, run_source, None)
    query_ids = pl.concat([qrels["query_id"].unique(), run["query_id"].unique()]).unique().sort()
    queries, n_queries = pl.Enum(query_ids), len(query_ids)
    run_codes, qrels_codes = _query_codes(run["query_id"], queries), _query_codes(qrels["query_id"], queries)
    judged_rows, judged_grades = _judged_run_rows(run, run_keys, qrels, qrels_keys, (run_codes, qrels_codes))
    ranking = _rank_run(run_codes, run, judged_rows, judged_grades, contract.ties, n_queries)
    judgments = _judgments(qrels_codes, qrels["grade"].to_numpy(), n_queries, contract.rel_threshold)
    evaluated = _evaluated_queries(ranking, judgments, contract)
    if not evaluated.any():
        raise InputError(
            "no query left to evaluate: the run and the judgments share no query with a relevant "
            "document under this contract",
            file=run_source,
        )
    values = {
        metric.name: _METRIC_FUNCTIONS[metric.kind](ranking, judgments, contract, metric.k)[evaluated]
        for metric in wanted
    }
    per_query = pl.DataFrame({"query_id": query_ids.filter(pl.Series(evaluated)), **values})
    return Evaluation(
        contract=contract,
        metrics=wanted,
        per_query=per_query,
        mean={name: float(np.mean(column)) for name, column in values.items()},
        counts=_counts(query_ids, ranking, judgments, evaluated, wanted, run.height, qrels.height),
        slices=None if slices is None else _slice_means(per_query, slices, wanted),
    )


def _evaluated_queries(ranking: _Ranking, judgments: _Judgments, contract: Contract) -> np.ndarray:
    judged = judgments.judged > 0
    present = (ranking.retrieved > 0) | (contract.missing_in_run == "zero")
    has_relevant = (judgments.relevant > 0) | (contract.no_relevant == "zero")
    return judged & present & has_relevant


def _counts(
    query_ids: pl.Series,
    ranking: _Ranking,
    judgments: _Judgments,
    evaluated: np.ndarray,
    metrics: tuple[Metric, ...],
    run_rows: int,
    judgment_rows: int,
) -> dict[str, Any]:
    judged, in_run = judgments.judged > 0, ranking.retrieved > 0
    without_relevant = judged & (judgments.relevant == 0)
    missing_from_run = judged & ~in_run
    without_judgments = in_run & ~judged
    return {
        "run_rows": run_rows,
        "judgment_rows": judgment_rows,
        "queries_judged": int(judged.sum()),
        "queries_in_run": int(in_run.sum()),
        "queries_evaluated": int(evaluated.sum()),
        "queries_without_relevant": int(without_relevant.sum()),
        "queries_without_relevant_ids": query_ids.filter(pl.Series(without_relevant)).to_list(),
        "queries_missing_from_run": int(missing_from_run.sum()),
        "queries_missing_from_run_ids": query_ids.filter(pl.Series(missing_from_run)).to_list(),
        "queries_without_judgments": int(without_judgments.sum()),
        "queries_without_judgments_ids": query_ids.filter(pl.Series(without_judgments)).to_list(),
        "queries_with_tied_scores": _tied_query_counts(ranking, evaluated, metrics),
    }


def _tied_query_counts(ranking: _Ranking, evaluated: np.ndarray, metrics: tuple[Metric, ...]) -> dict[str, int]:
    """Evaluated queries whose top k holds a tie, or a tie across rank k, that could reorder it."""
    cutoffs = sorted({metric.k for metric in metrics if metric.k is not None})
    counts = {}
    for k in cutoffs:
        tied = ranking.tie_query[ranking.tie_rank <= k]
        counts[f"@{k}"] = int(evaluated[np.unique(tied)].sum())
    if any(metric.k is None for metric in metrics):
        counts["all"] = int(evaluated[np.unique(ranking.tie_query)].sum())
    return counts


def _slice_means(
    per_query: pl.DataFrame, slices: Mapping[str, str | Iterable[str]], metrics: tuple[Metric, ...]
) -> dict[str, dict[str, Any]]:
    # Means are taken with numpy over rows sorted by query id: a parallel group_by sums in no
    # fixed order, so a slice mean could differ in its last bit between identical runs.
    membership = pl.DataFrame(
        [
            (str(query_id), str(name))
            for query_id, names in slices.items()
            for name in ([names] if isinstance(names, str) else names)
        ],
        schema={"query_id": pl.String, "slice": pl.String},
        orient="row",
    ).unique()
    names = [metric.name for metric in metrics]
    joined = membership.join(per_query, on="query_id", how="inner").sort(["slice", "query_id"])
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(membership["slice"].unique().to_list()):
        rows = joined.filter(pl.col("slice") == name)
        out[name] = (
            {"queries": rows.height, "mean": {m: float(np.mean(rows[m].to_numpy())) for m in names}}
            if rows.height
            else {"queries": 0, "mean": {}}
        )
    return out
