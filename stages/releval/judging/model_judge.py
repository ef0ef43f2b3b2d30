"""A calibrated model judge: grade unjudged pairs with a language model (or a weak similarity judge),
after measuring it against the double-judged human pairs of the parent judgment version.

    releval judge SET_DIR --model conf/judge/vllm.yaml [--parent SET_DIR] [--min-kappa 0.6]
                          [--max-failure-rate 0.05] [--calibrate-only] [--pool FILE] [--depth K]

The judge (a YAML config, ``conf/judge/*.yaml``; :mod:`releval.judging.judges`) is one of

``kind: openai``      an OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama, a hosted
                      API) reached through :mod:`releval.judging.judge_client`; the prompt is the
                      parent's rubric file, the query and the whole document, asking for one grade
                      of the set's scale; the answer must be that grade alone (``"2"``), anything
                      else is recorded as a failure, never guessed;
``kind: similarity``  a weak judge that runs here: the cosine of the query's and the document's
                      vectors under a releval model config (``conf/model/minilm.yaml``, loaded
                      offline like the pipeline's models), one grade up per threshold reached.

Identity. Every label the judge writes names the annotator ``model:<name>@<12 hex>``, the hex being
the start of sha256(prompt template + grading config) (:func:`releval.judging.judges.annotator_identity`):
a different model, prompt, rubric, temperature, seed or threshold is a different annotator. A version holds the
labels of at most one judge identity: a parent with another judge's labels is refused (a judge
change is a new version of the human parent), and SET_DIR must be a new version.

Calibration (always first). The judge grades the parent's *double-judged* pairs: those at least two
human annotators (annotators not named ``model:…``) judged. Its grades are compared, with
:func:`releval.judging.agreement.agreement` on the set's scale, with the **reference grade**: the
aggregate of the human grades (:func:`releval.judging.judgments.aggregate`, the lower median, which
is what the qrels score with; with an adjudicator it is the adjudicated middle grade). The report
also gives the judge against each human annotator and the two most frequent human annotators
against each other (the ceiling a judge can be expected to reach). Written to
``SET_DIR/calibration.json`` (with every pair's two grades) and printed. The judge is refused (exit
1, nothing but calibration.json written) when its linear weighted kappa is below ``--min-kappa``
or undefined, or when more than ``--max-failure-rate`` of its answers could not be parsed.

Grading. Accepted, the judge grades the pool: the judging debt of the grid against the parent (as
``releval pool --missing``: every configuration's top k, k from the contract's ``judged@k``) or the
pairs of ``--pool FILE`` (a pool file, CSV or JSONL, ``query_id`` and ``doc_id`` columns), less
every pair the parent already judged. The graded pool is imported by the same code as
``releval pool --import`` (:func:`releval.judging.pool.import_filled_pool`: the same validation,
ids checked against the queries and corpus) as a new version SET_DIR of the parent, which also
holds ``calibration.json``, ``judge.json`` (identity, config and prompt hashes, the prompt, the
calibration figures, the failures, the human-only queries) and ``model_grades.jsonl`` (the filled
pool as imported; failed pairs with an empty grade and the raw answer in ``notes``). The manifest's
description names the judge and its kappa.

Evidence spans. When the parent's rubric has a rule on evidence spans, a language-model judge is
asked for quotes besides the grade (:mod:`releval.judging.judges`: the answer is the grade alone, or
``{"grade": 2, "evidence": [{"quote": "...", "occurrence": 2}]}``). A pool answer's quotes become
the judgment's ``evidence`` only where each locates in the document's text (never the title): once,
or at its occurrence (:func:`placed_evidence`), on a grade of 1 or more, at most three, none
overlapping an earlier one. Every other quote is dropped and counted, with why, in judge.json's
``evidence``; a dropped quote never fails the grade. The similarity judge proposes none.

The rubric. The new version refers to the parent's rubric by the same path when that path names
the same rubric from SET_DIR (the shipped layout: ``rubric: ../RUBRIC.md``, beside the versions);
otherwise the rubric the judge was prompted with is copied into SET_DIR.

No answer is lost. Every answer (calibration and grading; a grade or an unparseable answer, not an
endpoint failure) is appended to ``SET_DIR/model_grades.partial.jsonl`` as it arrives, with the
judge's identity and a hash of the pair's texts. A rerun of the same command, after any failure or
a kill, takes the answers recorded there by the same judge identity for the same texts and sends no
request for them; answers of another identity are left unused. The file goes when the version is
written (its answers are then in calibration.json and model_grades.jsonl).

The human-only slice (:func:`human_only_queries`): the queries whose labels are all human. It is
computed from the labels, so it holds in every later version; reports can score on it alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from releval.errors import InputError
from releval.judging.judges import (
    OpenAIJudge,
    PairText,
    SimilarityJudge,
    Verdict,
    canonical_sha256,
    load_judge,
)
from releval.judging.judgments import MODEL_PREFIX

if TYPE_CHECKING:  # the heavy modules are imported where they are used: the CLI imports this module
    import polars as pl

    from releval.judging.agreement import Agreement
    from releval.judging.judgments import JudgmentSet

CALIBRATION_NAME = "calibration.json"
JUDGE_NAME = "judge.json"
GRADES_NAME = "model_grades.jsonl"
JOURNAL_NAME = "model_grades.partial.jsonl"  # every answer as it arrives, until the version is written
ARTIFACTS = (CALIBRATION_NAME, JUDGE_NAME, GRADES_NAME, JOURNAL_NAME)
REFERENCE_RULE = (
    "the aggregate of the human annotators' grades of the pair (releval.judging.judgments.aggregate: the "
    "lower median, the grade the qrels score with; with an adjudicator, the adjudicated middle grade)"
)


# --------------------------------------------------------------------------- the command line


@dataclass(frozen=True)
class Request:
    """What `releval judge SET_DIR --model CONFIG` asks of the model judge (its options, as
    :mod:`releval.commands.judge` reads them)."""

    set_dir: str | None  # the new judgment version
    model: str | None  # the judge's config (YAML)
    parent: str | None = None  # the version it revises (default: the active judgment version)
    annotator: str | None = None  # must be the judge's identity when given
    min_kappa: float = 0.6  # refuse the judge below this kappa against the human reference
    max_failure_rate: float = 0.05  # refuse it above this share of unparseable calibration answers
    calibrate_only: bool = False
    pool: str | None = None  # pairs to grade (default: the grid's judging debt)
    depth: int | None = None  # the judging debt's depth
    queries: str | None = None
    queries_format: str | None = None
    corpus: str | None = None
    corpus_format: str | None = None
    date: str | None = None  # of the new version


def run(request: Request) -> int:
    """Calibrate the judge; accepted and not ``--calibrate-only``, grade the pool into SET_DIR."""
    if not request.model:
        raise InputError("the model judge needs --model CONFIG", file="<command line>", field="model")
    if not request.set_dir:
        raise InputError("name the new judgment version: releval judge SET_DIR --model CONFIG", field="set_dir")
    set_dir = Path(request.set_dir)
    params = _params_if_any()
    from releval.judging.judgments import active_set_path

    parent_dir = Path(request.parent) if request.parent else active_set_path(params)
    _check_new_version(set_dir, parent_dir)
    _check_limits(request.min_kappa, request.max_failure_rate)
    texts = TextSource.resolve(
        parent_dir, request.queries, request.queries_format, request.corpus, request.corpus_format
    )
    from releval.judging import judgments as jmod

    parent = jmod.load_version(parent_dir)
    judge = load_judge(Path(request.model), parent)
    annotator = request.annotator
    if annotator and annotator != judge.identity:
        raise InputError(
            f"a model judge's annotator is its identity {judge.identity!r}, not {annotator!r}; leave --annotator out",
            file="<command line>",
            field="annotator",
        )
    _check_judge_identities(parent, judge.identity)
    journal = AnswerJournal(set_dir / JOURNAL_NAME, judge.identity, judge.scale)
    if journal.note():
        print(journal.note())
    print(f"judge: {judge.identity} ({judge.kind}); calibrating against the double-judged pairs of {parent.version}")
    calibration = calibrate(judge, parent, texts, request.min_kappa, request.max_failure_rate, journal=journal)
    set_dir.mkdir(parents=True, exist_ok=True)
    _write_json(set_dir / CALIBRATION_NAME, calibration.to_dict())
    sys.stdout.write(calibration.render())
    if not calibration.accepted:
        kept = f", with the answers in {journal.path} (a rerun reuses them)" if journal.path.exists() else ""
        print(f"REFUSED: {calibration.reason}; only {set_dir / CALIBRATION_NAME} was written{kept}")
        return 1
    print(f"accepted: {calibration.reason} -> {set_dir / CALIBRATION_NAME}")
    if request.calibrate_only:
        return 0
    pairs, pool_source = pool_pairs(request.pool, request.depth, params, parent, texts)
    if not pairs:
        print(f"no unjudged pairs in {pool_source}: nothing to grade; only {set_dir / CALIBRATION_NAME} was written")
        return 0
    written = grade_into_version(
        judge, pairs, pool_source, parent, set_dir, calibration, texts, request.date, journal=journal
    )
    print(written.summary())
    return 0 if written.added else 1


def _params_if_any() -> dict[str, Any]:
    from releval import paths
    from releval.config import load_params

    return load_params() if Path(paths.PARAMS).is_file() else {}


def _check_new_version(set_dir: Path, parent_dir: Path) -> None:
    from releval.judging.judgments import MANIFEST_NAME

    if set_dir.resolve() == parent_dir.resolve():
        raise InputError("the new version must be another directory than its parent", file=str(set_dir), field="set")
    if (set_dir / MANIFEST_NAME).exists():
        raise InputError(
            "is a judgment version already; a model judge writes a new version (versions are not edited in place)",
            file=str(set_dir),
            field="set",
        )
    if set_dir.exists():
        other = sorted(p.name for p in set_dir.iterdir() if p.name not in ARTIFACTS)
        if other:
            raise InputError(
                f"exists and holds {', '.join(other[:5])}: choose a new directory for the new version",
                file=str(set_dir),
                field="set",
            )


def _check_limits(min_kappa: float, max_failure_rate: float) -> None:
    if not -1.0 <= min_kappa <= 1.0:
        raise InputError(f"a kappa, -1 to 1; got {min_kappa}", file="<command line>", field="min-kappa")
    if not 0.0 <= max_failure_rate <= 1.0:
        raise InputError(f"a share, 0 to 1; got {max_failure_rate}", file="<command line>", field="max-failure-rate")


def _write_json(path: Path, document: dict[str, Any]) -> None:
    from releval import io

    io.write_text(path, json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


# --------------------------------------------------------------------------- who is a model


def is_model_annotator(name: str) -> bool:
    return name.startswith(MODEL_PREFIX)


def model_annotators(judgments: "pl.DataFrame") -> list[str]:
    return sorted({name for name in judgments["annotator"].to_list() if is_model_annotator(name)})


def human_only_queries(judgments: "pl.DataFrame | JudgmentSet") -> list[str]:
    """The queries all of whose labels come from human annotators (no ``model:…`` annotator): the
    slice a report can score on without trusting any model judge. Accepts a judgments table or a set."""
    import polars as pl

    from releval.judging.judgments import model_judged

    frame = judgments if isinstance(judgments, pl.DataFrame) else judgments.judgments
    touched = model_judged(frame).get("model_judged_queries", [])
    return sorted(set(frame["query_id"].unique().to_list()) - set(touched))


def _check_judge_identities(judgment_set: "JudgmentSet", identity: str) -> None:
    others = [name for name in model_annotators(judgment_set.judgments) if name != identity]
    if others:
        raise InputError(
            f"holds labels of another model judge ({', '.join(others)}); a version holds one judge's labels: "
            "a judge change is a new version of the human-judged parent "
            f"(--parent {judgment_set.manifest.parent or '…'} if that is it)",
            file=str(judgment_set.path),
            field="annotators",
        )


# --------------------------------------------------------------------------- texts


@dataclass
class TextSource:
    """Where query and document texts come from: ``--queries``/``--corpus``, else the pipeline's tables
    (data/work/queries.parquet, docs.parquet, as ``releval pool --missing`` reads them), else the
    files params ``dataset`` names."""

    queries: Path
    queries_format: str
    corpus: Path
    corpus_format: str
    _queries: dict[str, str] | None = None
    _docs: dict[str, tuple[str, str]] | None = None

    @classmethod
    def resolve(
        cls,
        parent_dir: Path,
        queries: str | None = None,
        queries_format: str | None = None,
        corpus: str | None = None,
        corpus_format: str | None = None,
    ) -> "TextSource":
        """``queries``/``corpus`` (``--queries``/``--corpus``), else the pipeline's tables when the parent
        belongs to the active dataset, else the files of the parent's dataset (:mod:`releval.inputs.datasets`)."""
        from releval import paths
        from releval.inputs.datasets import active_dataset, dataset_of_set, references_for

        own, active = dataset_of_set(parent_dir).dataset, active_dataset()
        tables = _first_file(paths.QUERIES) and _first_file(paths.DOCS)
        if queries is None and corpus is None and tables and own and active and own.name == active.name:
            return cls(Path(paths.QUERIES), "parquet", Path(paths.DOCS), "parquet")
        references = references_for(
            parent_dir,
            queries=queries,
            queries_format=queries_format,
            corpus=corpus,
            corpus_format=corpus_format,
        )
        queries_format = "jsonl" if references.queries_format == "releval" else references.queries_format
        return cls(references.queries, queries_format, references.corpus, references.corpus_format)

    def query_texts(self) -> dict[str, str]:
        if self._queries is None:
            from releval.judging.pool import read_query_texts

            frame = read_query_texts(self.queries, self.queries_format)
            self._queries = dict(zip(frame["query_id"].to_list(), frame["text"].to_list()))
        return self._queries

    def documents(self) -> dict[str, tuple[str, str]]:
        if self._docs is None:
            from releval.inputs.corpus import read_docs

            frame = read_docs(self.corpus, self.corpus_format)
            self._docs = {d: (t or "", x) for d, t, x in frame.select("doc_id", "title", "text").iter_rows()}
        return self._docs

    def pairs(self, keys: Sequence[tuple[str, str]]) -> list[PairText]:
        queries, docs = self.query_texts(), self.documents()
        unknown_q = sorted({q for q, _ in keys if q not in queries})
        unknown_d = sorted({d for _, d in keys if d not in docs})
        if unknown_q:
            raise InputError(
                f"no text for queries {', '.join(unknown_q[:5])}", file=str(self.queries), field="query_id"
            )
        if unknown_d:
            raise InputError(f"no text for documents {', '.join(unknown_d[:5])}", file=str(self.corpus), field="doc_id")
        return [PairText(q, d, queries[q], docs[d][0], docs[d][1]) for q, d in keys]


def _first_file(path: str) -> str | None:
    return path if Path(path).is_file() else None


def double_judged(judgments: "pl.DataFrame") -> "pl.DataFrame":
    """The human judgments (``query_id, doc_id, grade, annotator``) of pairs at least two human
    annotators judged."""
    import polars as pl

    human = judgments.filter(~pl.col("annotator").str.starts_with(MODEL_PREFIX))
    counts = human.group_by("query_id", "doc_id").agg(pl.col("annotator").n_unique().alias("n"))
    shared = counts.filter(pl.col("n") >= 2)
    return human.join(shared.select("query_id", "doc_id"), on=["query_id", "doc_id"], how="semi").select(
        "query_id", "doc_id", "grade", "annotator"
    )


@dataclass(frozen=True)
class Calibration:
    judge: str
    parent: str
    scale: tuple[int, ...]
    pairs: list[dict[str, Any]]  # query_id, doc_id, reference, model (None: failed), answer, error
    result: "Agreement | None"  # the judge against the reference; None when no answer parsed
    per_annotator: dict[str, dict[str, Any]]
    human_pair: dict[str, Any] | None
    min_kappa: float
    max_failure_rate: float

    @property
    def failures(self) -> int:
        return sum(1 for p in self.pairs if p["model"] is None)

    @property
    def failure_rate(self) -> float:
        return self.failures / len(self.pairs) if self.pairs else 0.0

    @property
    def weighted_kappa(self) -> float | None:
        return None if self.result is None else self.result.weighted_kappa

    @property
    def accepted(self) -> bool:
        kappa = self.weighted_kappa
        return kappa is not None and kappa >= self.min_kappa and self.failure_rate <= self.max_failure_rate

    @property
    def reason(self) -> str:
        kappa = self.weighted_kappa
        parts = []
        if kappa is None:
            first = next((p["error"] for p in self.pairs if p["error"]), "")
            parts.append(
                "linear weighted kappa undefined"
                + (" (no answer parsed; first failure: " + first + ")" if self.result is None else "")
            )
        else:
            relation = ">=" if kappa >= self.min_kappa else "<"
            parts.append(f"linear weighted kappa {kappa:.4f} {relation} --min-kappa {self.min_kappa:g}")
        relation = "<=" if self.failure_rate <= self.max_failure_rate else ">"
        parts.append(
            f"{self.failures} of {len(self.pairs)} answers unparseable ({self.failure_rate:.1%} {relation} "
            f"--max-failure-rate {self.max_failure_rate:.1%})"
        )
        return "; ".join(parts)

    def summary(self) -> dict[str, Any]:
        """The figures without the pairs (what judge.json records)."""
        return {
            "parent": self.parent,
            "reference": REFERENCE_RULE,
            "double_judged_pairs": len(self.pairs),
            "failures": self.failures,
            "min_kappa": self.min_kappa,
            "linear_weighted_kappa": self.weighted_kappa,
            "kappa": None if self.result is None else self.result.kappa,
            "raw_agreement": None if self.result is None else self.result.raw,
            "reason": self.reason,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "parent": self.parent,
            "reference": REFERENCE_RULE,
            "double_judged_pairs": len(self.pairs),
            "failures": self.failures,
            "failure_rate": self.failure_rate,
            "min_kappa": self.min_kappa,
            "max_failure_rate": self.max_failure_rate,
            "accepted": self.accepted,
            "reason": self.reason,
            "agreement": None if self.result is None else self.result.to_dict(),
            "per_annotator": self.per_annotator,
            "human_pair": self.human_pair,
            "pairs": self.pairs,
        }

    def render(self) -> str:
        from releval.judging.agreement import render

        head = (
            f"calibration of {self.judge} on the {len(self.pairs)} double-judged pairs of {self.parent} "
            f"(A: the human reference grade, B: the judge; {self.failures} unparseable answers left out)\n"
        )
        body = render(self.result, "human reference", self.judge) if self.result is not None else ""
        lines = [
            f"  vs {name}: linear weighted kappa {_figure(d['linear_weighted_kappa'])} on {d['shared_pairs']} pairs"
            for name, d in self.per_annotator.items()
        ]
        if self.human_pair is not None:
            lines.append(
                f"  human ceiling, {self.human_pair['a']} vs {self.human_pair['b']}: linear weighted kappa "
                f"{_figure(self.human_pair['linear_weighted_kappa'])} on {self.human_pair['shared_pairs']} pairs"
            )
        return head + body + "\n".join(lines) + ("\n" if lines else "")


def _figure(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4f}"


def calibrate(
    judge: OpenAIJudge | SimilarityJudge,
    judgment_set: "JudgmentSet",
    texts: TextSource,
    min_kappa: float = 0.6,
    max_failure_rate: float = 0.05,
    journal: "AnswerJournal | None" = None,
) -> Calibration:
    """Grade the set's double-judged pairs with the judge and measure it against the human reference
    (answers recorded in ``journal`` are reused, new ones recorded there)."""
    import polars as pl

    from releval.judging import judgments as jmod
    from releval.judging.agreement import agreement

    human = double_judged(judgment_set.judgments)
    if human.height == 0:
        raise InputError(
            "no pair judged by two human annotators: a model judge cannot be calibrated against this version",
            file=str(judgment_set.path),
            field="annotators",
        )
    scale = tuple(sorted(judgment_set.manifest.scale))
    reference = jmod.aggregate(human)
    keys = list(zip(reference["query_id"].to_list(), reference["doc_id"].to_list()))
    verdicts = grade_pairs(judge, texts.pairs(keys), journal, "calibration")
    pairs = [
        {"query_id": q, "doc_id": d, "reference": int(g), "model": v.grade, "answer": v.answer, "error": v.error}
        for (q, d), g, v in zip(keys, reference["grade"].to_list(), verdicts)
    ]
    graded = pl.DataFrame(
        [
            {"query_id": p["query_id"], "doc_id": p["doc_id"], "grade": p["model"]}
            for p in pairs
            if p["model"] is not None
        ],
        schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64},
    )
    result = agreement(reference, graded, scale) if graded.height else None
    per_annotator = {}
    counts = human.group_by("annotator").len().sort(["len", "annotator"], descending=[True, False])
    names = counts["annotator"].to_list()
    if graded.height:
        for name in names:
            side = human.filter(pl.col("annotator") == name).select("query_id", "doc_id", "grade")
            if side.join(graded, on=["query_id", "doc_id"], how="semi").height:
                per_annotator[name] = agreement(side, graded, scale).to_dict()
    human_pair = None
    if len(names) >= 2:
        a, b = (human.filter(pl.col("annotator") == n).select("query_id", "doc_id", "grade") for n in names[:2])
        if a.join(b, on=["query_id", "doc_id"], how="semi").height:
            human_pair = {"a": names[0], "b": names[1], **agreement(a, b, scale).to_dict()}
    return Calibration(
        judge.identity,
        judgment_set.version,
        scale,
        pairs,
        result,
        per_annotator,
        human_pair,
        min_kappa,
        max_failure_rate,
    )


# --------------------------------------------------------------------------- the pool


def pool_pairs(
    pool: str | None, depth: int | None, params: dict[str, Any], parent: "JudgmentSet", texts: TextSource
) -> tuple[list[tuple[str, str]], str]:
    """(pairs to grade, where they come from): the ``pool`` file (--pool FILE) or the grid's debt at
    ``depth``, less the parent's pairs."""
    from releval.judging.pool import debt_pairs, read_pool_pairs

    if pool:
        pairs, source = read_pool_pairs(pool), str(pool)
    else:
        if not params:
            raise InputError("no params.yaml: the judging debt needs the grid; give --pool FILE", file="params.yaml")
        base = {"path": str(parent.path), "format": "releval", "version": parent.version}
        pairs, depth = debt_pairs(
            params,
            base,
            depth,
            texts.queries,
            texts.queries_format,
            texts.corpus,
            texts.corpus_format,
        )
        source = f"the judging debt of the grid at depth {depth} against {parent.version}"
    judged = set(zip(parent.judgments["query_id"].to_list(), parent.judgments["doc_id"].to_list()))
    left = [pair for pair in pairs if pair not in judged]
    if len(left) < len(pairs):
        print(f"{len(pairs) - len(left)} pairs of {source} are judged in {parent.version} already: left out")
    return left, source


# --------------------------------------------------------------------------- writing the version


@dataclass(frozen=True)
class Written:
    set_dir: Path
    identity: str
    added: int
    failures: int
    human_only: int
    queries: int
    evidence: "EvidenceTally | None" = None

    def summary(self) -> str:
        spans = ""
        if self.evidence is not None and self.evidence.asked:
            tally = self.evidence
            spans = (
                f"; {tally.kept} evidence spans kept on {tally.pairs} pairs, {len(tally.dropped)} quotes dropped "
                f"(judge.json evidence)"
            )
        return (
            f"{self.set_dir}: {self.added} judgments by {self.identity} added ({self.failures} unparseable answers "
            f"left ungraded, listed in {GRADES_NAME}); {self.human_only} of {self.queries} queries keep human-only "
            f"labels (judge.json human_only_queries){spans}"
        )


@dataclass
class EvidenceTally:
    """What became of the quotes a judge proposed on the pool (judge.json ``evidence``)."""

    asked: bool  # the prompt asked for quotes (the rubric has a span rule)
    pairs: int = 0  # pairs whose judgment carries evidence
    kept: int = 0  # spans kept
    dropped: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # query_id, doc_id, quote, reason

    def to_dict(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for quote in self.dropped:
            reasons[quote["reason"]] = reasons.get(quote["reason"], 0) + 1
        return {
            "asked": self.asked,
            "pairs_with_evidence": self.pairs,
            "spans_kept": self.kept,
            "quotes_dropped": len(self.dropped),
            "dropped_by_reason": dict(sorted(reasons.items())),
            "dropped": self.dropped,
        }


# Why a proposed quote is dropped (judge.json evidence.dropped_by_reason).
NOT_A_QUOTE = "not a quote"
ON_A_LOW_GRADE = "on a grade below 1"
NOT_IN_TEXT = "not in the document's text"
AMBIGUOUS = "occurs more than once, without occurrence"
NO_SUCH_OCCURRENCE = "occurrence past the quote's last"
OVERLAPS = "overlaps an earlier span"
BEYOND_MAX = "beyond the first three"


def placed_evidence(text: str, grade: int | None, quotes: Sequence[dict[str, Any]]) -> tuple[list, list]:
    """(the spans kept, [(quote, reason) dropped]) of a judge's ``quotes`` for a document ``text``
    (without its title) graded ``grade``: a quote is kept when it locates in the text exactly
    (:func:`releval.inputs.schemas.locate_span`: once, or at its ``occurrence``), the grade is 1 or
    more, fewer than three are kept before it and it overlaps none of them."""
    from releval.inputs.schemas import SpanError, locate_span, quote_places
    from releval.judging.judges import MAX_SPANS, SPAN_MIN_GRADE

    kept: list[dict[str, Any]] = []
    ranges: list[tuple[int, int]] = []
    dropped: list[tuple[str, str]] = []
    for quote in quotes:
        if grade is None or grade < SPAN_MIN_GRADE:
            dropped.append((quote["quote"], ON_A_LOW_GRADE))
            continue
        try:
            start, end = locate_span(text, quote)
        except SpanError as exc:
            found = quote_places(text, quote["quote"])
            reason = NO_SUCH_OCCURRENCE if exc.key == "occurrence" else AMBIGUOUS if found else NOT_IN_TEXT
            dropped.append((quote["quote"], reason))
            continue
        if any(start < other_end and other_start < end for other_start, other_end in ranges):
            dropped.append((quote["quote"], OVERLAPS))
        elif len(kept) >= MAX_SPANS:
            dropped.append((quote["quote"], BEYOND_MAX))
        else:
            kept.append(dict(quote))
            ranges.append((start, end))
    return kept, dropped


def judge_evidence(
    judge: OpenAIJudge | SimilarityJudge, pairs: Sequence[PairText], verdicts: Sequence[Verdict]
) -> tuple[list[list[dict[str, Any]]], EvidenceTally]:
    """Each pair's evidence from its answer (:func:`placed_evidence`; [] for none), and the tally.
    The quotes are read again from the recorded answer, so a resumed run keeps the same spans."""
    from releval.judging.judges import parse_reply

    tally = EvidenceTally(asked=bool(getattr(judge, "spans", False)))
    evidence: list[list[dict[str, Any]]] = []
    for pair, verdict in zip(pairs, verdicts):
        if not tally.asked or verdict.grade is None:
            evidence.append([])
            continue
        reply = parse_reply(verdict.answer, judge.scale, spans=True)
        kept, dropped = placed_evidence(pair.text, verdict.grade, reply.quotes)
        dropped += [("", NOT_A_QUOTE)] * reply.malformed
        for quote, reason in dropped:
            cut = quote if len(quote) <= 200 else quote[:200] + "…"
            tally.dropped.append({"query_id": pair.query_id, "doc_id": pair.doc_id, "quote": cut, "reason": reason})
        tally.pairs += bool(kept)
        tally.kept += len(kept)
        evidence.append(kept)
    return evidence, tally


def filled_pool_rows(identity: str, pairs: Sequence[PairText], verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    """The graded pool (releval.judging.pool.POOL_COLUMNS); a failure has an empty grade and says why in notes."""
    from releval.judging.pool import snippet

    rows = []
    for pair, verdict in zip(pairs, verdicts):
        rows.append(
            {
                "query_id": pair.query_id,
                "query": " ".join(pair.query.split()),
                "doc_id": pair.doc_id,
                "title": " ".join(pair.title.split()),
                "snippet": snippet(pair.text),
                "grade": verdict.grade,
                "annotator": identity,
                "notes": verdict.error if verdict.grade is None else "",
            }
        )
    return rows


def grade_into_version(
    judge: OpenAIJudge | SimilarityJudge,
    keys: Sequence[tuple[str, str]],
    pool_source: str,
    parent: "JudgmentSet",
    set_dir: Path,
    calibration: Calibration,
    texts: TextSource,
    date: str | None = None,
    journal: "AnswerJournal | None" = None,
) -> Written:
    """Grade ``keys`` and write SET_DIR: the parent plus the judge's grades (imported as ``releval pool
    --import`` imports), with calibration.json, judge.json and model_grades.jsonl; atomically. The
    import is staged beside SET_DIR from a copy of the parent whose rubric is a file of the set, so
    that it validates wherever the parent's rubric lives; the version then keeps the parent's rubric
    path when it names the same rubric from SET_DIR (:func:`version_rubric`)."""
    import shutil
    import tempfile

    from releval.judging import judgments as jmod
    from releval.judging.web import import_graded_pool, write_graded_pool

    pairs = texts.pairs(keys)
    verdicts = grade_pairs(judge, pairs, journal, "judge")
    rows = filled_pool_rows(judge.identity, pairs, verdicts)
    evidence, tally = judge_evidence(judge, pairs, verdicts)
    for row, spans in zip(rows, evidence):
        row["evidence"] = spans or None
    failures = [row for row in rows if row["grade"] is None]
    if len(failures) == len(rows):
        raise InputError(
            f"every one of the {len(rows)} answers failed (first: {failures[0]['notes']}); nothing written",
            file=pool_source,
            field="grade",
        )
    set_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".releval-judge-{set_dir.name}.", dir=set_dir.parent))
    try:
        filled = staging / GRADES_NAME
        write_graded_pool(filled, rows)  # the pool's columns, and each row's evidence
        staged_parent, copied_rubric = _stage_parent(parent, staging / "parent")
        imported = import_graded_pool(
            filled,
            staging / "new" / set_dir.name,
            annotator=judge.identity,
            parent=staged_parent,
            date=date,
            queries=texts.queries,
            queries_format=texts.queries_format,
            corpus=texts.corpus,
            corpus_format=texts.corpus_format,
        )
        staged = imported.judgment_set
        human_only = human_only_queries(staged)
        judge_doc = {
            "annotator": judge.identity,
            **judge.describe(),
            "grading_config": judge.grading_config(),
            "config_sha256": canonical_sha256(judge.grading_config()),
            "prompt_sha256": hashlib.sha256(judge.template.encode("utf-8")).hexdigest(),
            "calibration": calibration.summary(),
            "pool": pool_source,
            "graded": imported.added,
            "failures": [{"query_id": r["query_id"], "doc_id": r["doc_id"], "error": r["notes"]} for r in failures],
            "human_only_queries": human_only,
            "evidence": tally.to_dict(),
        }
        description = (
            f"{parent.version} plus {imported.added} labels by the model judge {judge.identity} ({pool_source}); "
            f"calibrated on {len(calibration.pairs)} double-judged pairs of {parent.version}: linear weighted kappa "
            f"{calibration.weighted_kappa:.4f} against the human reference (calibration.json, judge.json); "
            f"{len(human_only)} queries keep human-only labels"
        )
        rubric, files = version_rubric(parent, set_dir, jmod.set_files(staged.path), copied_rubric)
        manifest = dataclasses.replace(staged.manifest, description=description, rubric=rubric)
        files = {
            **files,
            CALIBRATION_NAME: (json.dumps(calibration.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
            JUDGE_NAME: (json.dumps(judge_doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8"),
            GRADES_NAME: filled.read_bytes(),
        }
        jmod.write_version(set_dir, manifest, (staged.path / jmod.JUDGMENTS_NAME).read_bytes(), files)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    final = jmod.load_version(set_dir)
    queries = final.judgments["query_id"].n_unique()
    return Written(set_dir, judge.identity, imported.added, len(failures), len(human_only), queries, tally)


# --------------------------------------------------------------------------- the rubric of the new version


def _stage_parent(parent: "JudgmentSet", into: Path) -> tuple[Path, str | None]:
    """A copy of the parent version in ``into``/<version> whose rubric is a file of the set (copied
    in when the parent's lies beside it, as ``../RUBRIC.md`` does), so that a version staged from it
    validates in any folder. Returns (its directory, the name the rubric was copied under or None)."""
    from releval.judging import judgments as jmod

    files = jmod.set_files(parent.path)
    manifest = parent.manifest
    rubric = (parent.path / manifest.rubric).resolve()
    relative = (
        rubric.relative_to(parent.path.resolve()).as_posix() if rubric.is_relative_to(parent.path.resolve()) else None
    )
    copied = None
    if relative is None or relative not in files:
        copied = _free_name(Path(manifest.rubric).name, files)
        files[copied] = rubric.read_bytes()
        manifest = dataclasses.replace(manifest, rubric=copied)
    directory = into / parent.path.name
    jmod.write_version(directory, manifest, (parent.path / jmod.JUDGMENTS_NAME).read_bytes(), files)
    return directory, copied


def version_rubric(
    parent: "JudgmentSet", set_dir: Path, files: dict[str, bytes], copied: str | None
) -> tuple[str, dict[str, bytes]]:
    """(the new version's ``rubric``, its files): the parent's rubric path when, from ``set_dir``, it
    names a rubric of the same bytes inside the set's folders (the shipped ``../RUBRIC.md``); else
    the copy ``copied`` that :func:`_stage_parent` made (or the set's own file, kept by set_files)."""
    from releval.judging import judgments as jmod

    reference = parent.manifest.rubric
    if copied is None:
        return reference, files  # the rubric is a file of the set: it travels with the set's files
    there = set_dir / reference
    if jmod.rubric_problem(set_dir, reference) is None and there.read_bytes() == files[copied]:
        return reference, {name: data for name, data in files.items() if name != copied}
    return copied, files


def _free_name(name: str, files: dict[str, bytes]) -> str:
    from releval.judging import judgments as jmod

    reserved = {jmod.JUDGMENTS_NAME, jmod.MANIFEST_NAME, *ARTIFACTS}
    for candidate in (name, jmod.RUBRIC_NAME, "rubric.md"):
        if candidate and not candidate.startswith(".") and candidate not in reserved and candidate not in files:
            return candidate
    number = 2
    while f"rubric-{number}.md" in files:
        number += 1
    return f"rubric-{number}.md"


# --------------------------------------------------------------------------- answers kept as they arrive


def pair_text_sha256(pair: PairText) -> str:
    """What an answer was given to: the query's and the document's texts (an edited page is asked again)."""
    return canonical_sha256([pair.query, pair.title, pair.text])


class AnswerJournal:
    """``model_grades.partial.jsonl``: one line per answer, appended and flushed as it arrives (from
    the judge's worker threads), so that a failure or a kill loses no answer an endpoint was paid
    for. Lines name the judge identity and the pair's text hash; only the lines of this identity, on
    this scale, for the same texts are reused. A line cut by a kill is dropped when the file is read."""

    def __init__(self, path: Path, identity: str, scale: Sequence[int]) -> None:
        self.path = path
        self.identity = identity
        self._lock = threading.Lock()
        self._answers: dict[tuple[str, str, str], Verdict] = {}
        self.others: dict[str, int] = {}
        self._read(set(scale))

    def _read(self, scale: set[int]) -> None:
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):  # a line cut by a kill: it held no answer that was recorded
            with open(self.path, "r+b") as fh:
                fh.truncate(len(complete))
        for raw in complete.splitlines():
            try:
                row = json.loads(raw)
                key = (str(row["query_id"]), str(row["doc_id"]), str(row["text_sha256"]))
                annotator, grade = row["annotator"], row["grade"]
                verdict = Verdict(grade, str(row["answer"]), str(row["error"]))
            except (ValueError, KeyError, TypeError):
                continue  # not a line this code wrote: never trusted as an answer
            if annotator != self.identity:
                self.others[annotator] = self.others.get(annotator, 0) + 1
            elif grade is None or (isinstance(grade, int) and not isinstance(grade, bool) and grade in scale):
                self._answers[key] = verdict

    def __len__(self) -> int:
        return len(self._answers)

    def note(self) -> str:
        """A line on what the file holds, or ""."""
        parts = []
        if self._answers:
            parts.append(f"{len(self._answers)} answers of {self.identity} recorded in {self.path} are reused")
        if self.others:
            names = ", ".join(f"{n} ({c})" for n, c in sorted(self.others.items()))
            parts.append(f"the answers of other judges there are not ({names}: another identity)")
        return "resuming: " + "; ".join(parts) if parts else ""

    def get(self, pair: PairText) -> Verdict | None:
        return self._answers.get((pair.query_id, pair.doc_id, pair_text_sha256(pair)))

    def record(self, pair: PairText, verdict: Verdict) -> None:
        """Append an answer (an endpoint failure is no answer: it is asked again next time)."""
        if not verdict.answered:
            return
        key = (pair.query_id, pair.doc_id, pair_text_sha256(pair))
        row = {
            "annotator": self.identity,
            "query_id": key[0],
            "doc_id": key[1],
            "text_sha256": key[2],
            "grade": verdict.grade,
            "answer": verdict.answer,
            "error": verdict.error,
        }
        line = (json.dumps(row) + "\n").encode("ascii")
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "ab") as fh:
                    fh.write(line)
                    fh.flush()
            except OSError as exc:
                raise InputError(
                    f"cannot keep the judge's answers ({exc.strerror or exc}); stopped before asking for more",
                    file=str(self.path),
                ) from None
            self._answers[key] = verdict


def grade_pairs(
    judge: OpenAIJudge | SimilarityJudge, pairs: Sequence[PairText], journal: AnswerJournal | None, desc: str
) -> list[Verdict]:
    """The judge's verdicts on ``pairs``, in order: those ``journal`` holds without asking, the others
    asked and recorded there as they arrive."""
    if journal is None:
        return judge.grade(pairs, desc=desc)
    known = [journal.get(pair) for pair in pairs]
    todo = [pair for pair, verdict in zip(pairs, known) if verdict is None]
    if len(todo) < len(pairs):
        print(f"{desc}: {len(pairs) - len(todo)} of {len(pairs)} answers taken from {journal.path}")
    fresh = iter(judge.grade(todo, desc=desc, on_verdict=journal.record) if todo else [])
    return [verdict if verdict is not None else next(fresh) for verdict in known]
