"""How complete a judgment set is: a declared contract term, not a guess from the numbers.

Three kinds:

* ``pooled`` (releval's own sets): the documents pooled for judging were judged, non-relevant
  ones included (recorded with grade 0), to a ``depth`` from named ``systems``; a document outside
  the pool counts as grade 0 and ``judged@k`` says how much of a ranking the pool covers. Below
  the contract's coverage terms a comparison is coverage-confounded.
* ``positives-only`` (the BEIR, MTEB and MS MARCO convention; most labels teams already have): only
  relevant documents are listed and every other document is non-relevant by declaration. judged@k,
  condensed lists and bpref mean nothing there (with no judged non-relevant document, removing the
  unjudged ones leaves only relevant ones), so they are not computed or shown as evidence;
  comparisons give their verdict under the declaration, with one line naming its bias
  (:data:`POSITIVES_ONLY_CAVEAT`).

* ``sampled`` (``releval pool --sample``): a recorded stratified random sample of a grid's unjudged
  top-k pairs was judged (:mod:`releval.judging.sample`; the design, ``sample.json``, lies in the
  version folder and its sha256, size, rate and seed in the manifest). The metrics are *inferred*
  from it (infNDCG@k, infAP: :mod:`releval.measurement.inferred`), estimates with the sampling
  uncertainty in their intervals; judged@k, condensed lists and bpref are not computed (most of a
  ranking is unjudged by design), and every comparison says it reads estimates
  (:func:`sampled_caveat`).

A manifest declares it (``completeness: positives-only``, or ``{kind: pooled, depth: 10, systems:
[...]}``); a qrels file named directly by a judgments config declares it there
(``completeness:``), else by its format's convention (:func:`default_for_format`). The kind is
recorded in every contract (metrics.json ``completeness``), so numbers of the two kinds are never
compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

POOLED = "pooled"
POSITIVES_ONLY = "positives-only"
SAMPLED = "sampled"
KINDS = (POOLED, POSITIVES_ONLY, SAMPLED)
DECLARABLE = (POOLED, POSITIVES_ONLY)  # what --completeness may declare; sampled comes with its design
SAMPLE_KEYS = ("file", "sha256", "pairs", "frame", "rate", "seed")  # a sampled set's ``sample`` record
CONTRACT_KEY = "completeness"

POSITIVES_ONLY_CAVEAT = (
    "positives-only judgments (the BEIR/MTEB/MS MARCO convention): every unlabelled document counts as "
    "non-relevant by declaration, so a system that finds relevant documents nobody labelled is penalised; "
    "judged@k, condensed lists and bpref cannot mean anything here and are not shown"
)

# Metrics that need judged non-relevant documents to mean anything (left out under positives-only).
NEEDS_NON_RELEVANT = ("judged", "bpref")


@dataclass(frozen=True)
class Completeness:
    kind: str = POOLED
    depth: int | None = None  # pooled: the pool depth
    systems: tuple[str, ...] = ()  # pooled, sampled: the configurations (or systems) pooled from
    sample: Mapping[str, Any] | None = None  # sampled: SAMPLE_KEYS of the design (releval.judging.sample)

    @property
    def positives_only(self) -> bool:
        return self.kind == POSITIVES_ONLY

    @property
    def sampled(self) -> bool:
        return self.kind == SAMPLED

    @property
    def pooled(self) -> bool:
        """Non-relevant judgments recorded for everything pooled: judged@k, condensed lists and bpref mean something."""
        return self.kind == POOLED

    def to_manifest(self) -> Any:
        """The manifest's value: the kind alone, or the kind with depth and systems."""
        if self.depth is None and not self.systems:
            return self.kind
        value: dict[str, Any] = {"kind": self.kind}
        if self.depth is not None:
            value["depth"] = self.depth
        if self.systems:
            value["systems"] = list(self.systems)
        if self.sample is not None:
            value["sample"] = dict(self.sample)
        return value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "depth": self.depth, "systems": list(self.systems)}
        if self.sample is not None:
            out["sample"] = dict(self.sample)
        return out

    def text(self) -> str:
        if self.positives_only:
            return "positives-only (unlabelled documents are non-relevant by declaration)"
        if self.sampled:
            sample = self.sample or {}
            return (
                f"sampled: {sample.get('pairs', '?')} of {sample.get('frame', '?')} unjudged top-{self.depth} pairs "
                f"(rate {_rate(sample.get('rate'))}, seed {sample.get('seed', '?')}) "
                f"from {len(self.systems)} system(s); "
                "metrics are inferred (estimates)"
            )
        depth = f" at depth {self.depth}" if self.depth is not None else ""
        systems = f" from {len(self.systems)} system(s)" if self.systems else ""
        return f"pooled{depth}{systems} (non-relevant judgments recorded)"


def parse(value: Any, err: Callable[[str], None]) -> Completeness | None:
    """A manifest's ``completeness`` value; ``err`` is told what is wrong (None returned then)."""
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, Mapping):
        err(f"expected {' or '.join(KINDS)}, or a mapping of kind, depth and systems; found {value!r}")
        return None
    unknown = sorted(set(map(str, value)) - {"kind", "depth", "systems", "sample"})
    if unknown:
        err(f"unknown key(s) {unknown}; expected kind, depth, systems, sample")
        return None
    kind, depth, systems = value.get("kind"), value.get("depth"), value.get("systems", [])
    sample = value.get("sample")
    if kind not in KINDS:
        err(f"kind must be {', '.join(KINDS)}, found {kind!r}")
        return None
    if (kind == SAMPLED) != (sample is not None):
        err("a sampled set records its sample (file, sha256, pairs, frame, rate, seed); no other kind has one")
        return None
    if sample is not None and (not isinstance(sample, Mapping) or sorted(map(str, sample)) != sorted(SAMPLE_KEYS)):
        err(f"sample must be a mapping of {', '.join(SAMPLE_KEYS)}, found {sample!r}")
        return None
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        err(f"depth must be a whole number >= 1, found {depth!r}")
        return None
    if not isinstance(systems, list) or not all(isinstance(s, str) and s for s in systems):
        err(f"systems must be a list of names, found {systems!r}")
        return None
    if kind == POSITIVES_ONLY and (depth is not None or systems):
        err("a positives-only set has no pool depth or systems")
        return None
    return Completeness(kind, depth, tuple(systems), dict(sample) if sample is not None else None)


def _rate(value: Any) -> str:
    return f"{float(value):.0%}" if isinstance(value, (int, float)) else "?"


def sampled_caveat(pairs: Any, rate: Any) -> str:
    """The one line every comparison under a sampled set carries."""
    return (
        f"the figures are estimates from a sample of {pairs} judged pairs at rate {_rate(rate)} of the unjudged "
        "top-k pool (inferred metrics; the paired interval includes the sampling uncertainty)"
    )


def contract_sample_caveat(contract: Mapping[str, Any]) -> str | None:
    """:func:`sampled_caveat` of the sample a recorded contract names; None when its set is not sampled."""
    found = from_contract(contract)
    if not found.sampled:
        return None
    sample = found.sample or {}
    return sampled_caveat(sample.get("pairs", "?"), sample.get("rate"))


def default_for_format(fmt: str) -> Completeness:
    """A qrels file's kind when its config declares none: BEIR's convention for BEIR qrels (relevant
    documents only), pooled for TREC and SMART qrels (pooled collections that record non-relevant ones)."""
    return Completeness(POSITIVES_ONLY if fmt == "beir" else POOLED)


SAMPLE_CONTRACT_KEY = "sample"  # a sampled set's contract also records its sample (pairs, frame, rate, seed, sha256)


def from_contract(contract: Mapping[str, Any]) -> Completeness:
    """The completeness a recorded contract names (a contract from before the term: pooled)."""
    recorded = contract.get(CONTRACT_KEY)
    if isinstance(recorded, Mapping):
        recorded = recorded.get("kind")
    if recorded == SAMPLED:
        return Completeness(SAMPLED, sample=dict(contract.get(SAMPLE_CONTRACT_KEY) or {}))
    return Completeness(POSITIVES_ONLY if recorded == POSITIVES_ONLY else POOLED)


def needs_non_relevant(metric: str) -> bool:
    """Whether ``metric`` means nothing without judged non-relevant documents (judged@k, bpref)."""
    return metric.split("@", 1)[0] in NEEDS_NON_RELEVANT


def metrics_for(metrics: list[str], completeness: Completeness) -> tuple[list[str], list[str]]:
    """(the metrics to compute, those left out) under ``completeness``: positives-only and sampled sets
    leave out judged@k and bpref."""
    if completeness.pooled:
        return list(metrics), []
    return [m for m in metrics if not needs_non_relevant(m)], [m for m in metrics if needs_non_relevant(m)]
