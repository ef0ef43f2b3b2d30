"""The judging page: one (query, document) pair at a time, blind, saved at every keystroke that grades.

What is judged. The pairs come from the judging debt (:func:`releval.judging.pool.grid_debt`, what
``releval pool --missing`` computes) or from a pool file; they are recorded once, at the first
start, in ``SET_DIR.session/assignment.json`` with how they were chosen, so that a restart, a
finished import or the second annotator's start judge the same pairs. Pairs are shown sorted by
query_id then doc_id; the page and its JSON carry the query, the document and the annotator's own
grade and notes, never a system, score or rank.

Double judging. ``double_share`` of the queries (a seeded choice over the sorted query ids,
recorded in the assignment) are also assigned to a second annotator, who sees only those queries'
pairs and only his own grades: each annotator has his own session file.

Sessions. ``SET_DIR.session/<annotator>.json`` holds the grades, the documents added from the
search box, the pair on screen and which grades were already imported; it is rewritten atomically
(:func:`releval.io.write_json`) after every change, so closing the tab or killing the server loses
nothing, and restarting continues on the pair that was on screen.

Evidence spans. With a grade of :data:`~releval.judging.judges.SPAN_MIN_GRADE` (1) or more, the
judge may mark up to :data:`~releval.judging.judges.MAX_SPANS` (3) passages of the document's text
(never its title) that earn the grade, as the rubric's span rule says (data/judgments/RUBRIC-v4.md:
every pair graded 2 or 3, a grade-1 pair where one passage points the way): a text selection in the
document pane, added with the key ``e``, removed with ``x``. The page sends them as half-open
character offsets into the document's text exactly as the server sent it, counted in code points as
Python counts them (:meth:`Desk.grade` refuses offsets outside the text, blank or overlapping spans,
more than three, and any span on a grade below 1); they are saved with the grade, and a grade
changed to 0 drops them. The session keeps each span's offsets and the text they cover.

Finishing writes the session's graded pairs as a filled pool file
(``SET_DIR.session/<annotator>.graded.jsonl``, the columns of ``releval pool``) and imports it with
:func:`releval.judging.pool.import_filled_pool`, the code of ``releval pool --import``: the same
validation against the set's scale, the queries and the corpus, and a re-sealed manifest. A grade's
spans are written as the judgment's ``evidence``, each a quoted anchor computed from its offsets
(:func:`quote_span`: the exact characters, with an ``occurrence`` when they occur more than once),
which resolves to exactly those offsets. Anchors rather than offsets, because an anchor is checked
against the corpus whenever the set is validated against it: an edit of the document that changes
or removes the passage is an error naming the pair, where offsets would silently cover other
characters, and an edit elsewhere in the document leaves the anchor valid. The graded pool file
carries them in an ``evidence`` column, which :func:`import_graded_pool` places in the corpus's
texts. What is written is decided by the set itself, not by the session's record of it: a grade is
pending unless the set holds it (same pair, annotator, grade, notes and evidence: a grade with other
spans is another judgment), so a finish killed anywhere (after the
version was written but before the session said so included) is completed by the next one, with
no grade lost or written twice. A version killed between the two renames that replace it is put
back first (:func:`releval.io.restore_replaced_directory`).

One writer at a time. A server or ``--finish`` holds :class:`Claim`, an exclusive ``flock`` on
``SET_DIR.session/<annotator>.lock`` that the kernel drops when the process ends, however it
ends: a second one for the same set and annotator is refused, naming the first (pid, address);
another annotator of the same set is not. Writers of the set and of the assignment (every
annotator's finish, a first start) take ``SET_DIR.session/.set.lock`` in turn. At its start a
claim removes the temporary files that killed saves of that annotator's files left.

The server answers 127.0.0.1 only, reads a request body of at most :data:`MAX_BODY` bytes with
a ``Content-Length``, gives up on a client silent for :data:`READ_TIMEOUT` seconds, and answers
every bad request with a status and a one-line JSON error (``{"error": ...}``), never a dropped
connection.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import re
import secrets
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import parse_qs, urlsplit

import polars as pl

from releval import io
from releval.errors import InputError, InputErrors
from releval.inputs.schemas import EVIDENCE_KEYS, locate_span, quote_places
from releval.judging import judgments as jmod
from releval.judging.judge_page import PAGE_HTML, render_markdown
from releval.judging.judges import MAX_SPANS, SPAN_MIN_GRADE
from releval.judging.pool import POOL_COLUMNS, PoolImport, snippet

Pair = tuple[str, str]

SESSION_SUFFIX = ".session"
ASSIGNMENT_NAME = "assignment.json"
DEBT_SOURCE = "the judging debt of the grid"  # how an assignment of the debt names its source
SET_LOCK_NAME = ".set.lock"  # an annotator's name starts with a letter or digit: never this
SEARCH_RESULTS = 10
MAX_BODY = 1 << 20  # bytes of a request body: a grade and its notes are far less
READ_TIMEOUT = 5.0  # seconds a request may leave the server waiting for its next bytes
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def session_dir(set_dir: str | Path) -> Path:
    """``SET_DIR.session``: beside the set, never inside it (a version's files are copied to its children)."""
    set_dir = Path(set_dir)
    return set_dir.with_name(set_dir.name + SESSION_SUFFIX)


def session_file(set_dir: str | Path, annotator: str) -> Path:
    return session_dir(set_dir) / f"{annotator}.json"


def checked_name(name: str | None, option: str) -> str:
    """An annotator name, which also names a file: letters, digits, '.', '_', '-'."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(
            f"expected a name of letters, digits, '.', '_', '-', got {name!r}", file="<command line>", field=option
        )
    if name == Path(ASSIGNMENT_NAME).stem:  # its session file would be the assignment record
        raise InputError(
            f"{name!r} names the session's assignment record; choose another", file="<command line>", field=option
        )
    return name


# --------------------------------------------------------------------------- who writes: locks


def _lock_file(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # not inherited by a child (PEP 446)


@contextlib.contextmanager
def set_lock(set_dir: str | Path):
    """The writers of the set and of its assignment, one at a time: every annotator's finish, a first start."""
    fd = _lock_file(session_dir(set_dir) / SET_LOCK_NAME)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # drops the lock


class Claim:
    """This process's hold on one annotator's session of a set: an exclusive ``flock`` on
    ``SET_DIR.session/<annotator>.lock``. The kernel drops it when the process ends, however it ends,
    so a killed server never leaves a lock that blocks; the file's text says who holds it."""

    def __init__(self, set_dir: str | Path, annotator: str, doing: str):
        self.set_dir = Path(set_dir)
        self.annotator = checked_name(annotator, "annotator")
        self.path = session_dir(set_dir) / f"{annotator}.lock"
        self._fd: int | None = _lock_file(self.path)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise InputError(self._held_by(), file=str(self.path), field="annotator") from None
        self.note(doing=doing)

    def note(self, **facts: Any) -> None:
        """Record who holds the lock (this pid) and ``facts`` (what it does, its address) in the file."""
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), **facts}).encode("utf-8")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _held_by(self) -> str:
        try:
            holder = json.loads(self.path.read_text(encoding="utf-8"))
            holder = holder if isinstance(holder, dict) else {}
        except (OSError, ValueError):
            holder = {}  # locked, not yet written
        facts = [f"pid {holder['pid']}" if isinstance(holder.get("pid"), int) else "pid unknown"]
        if isinstance(holder.get("url"), str):
            facts.append(holder["url"])
        who, said = f"{self.annotator} on {self.set_dir}", ", ".join(facts)
        if holder.get("doing") == "finish":
            return f"the grades of {who} are being written by `releval judge --finish` ({said}); wait for it"
        return (
            f"a judging server of {who} is running ({said}): one server per set and annotator, "
            "or the second overwrites the first's grades; use its page (its finish button writes the grades), "
            "or stop it first"
        )


def claim(set_dir: str | Path, annotator: str, doing: str = "serve") -> Claim:
    """Hold ``annotator``'s session of ``set_dir`` for this process (``doing``: serve or finish), or an
    InputError naming the process that holds it; then remove what killed saves of this annotator's
    files (and of the assignment) left in the session folder."""
    held = Claim(set_dir, annotator, doing)
    folder = session_dir(set_dir)
    for name in (f"{held.annotator}.json", f"{held.annotator}.graded.jsonl"):
        io.remove_leftovers(folder / name)
    with set_lock(set_dir):
        io.remove_leftovers(folder / ASSIGNMENT_NAME)
    return held


def restore_set(set_dir: str | Path) -> bool:
    """Put back a version that a write killed between its two renames left moved aside (and absent)."""
    set_dir = Path(set_dir)
    if set_dir.exists() or not set_dir.parent.is_dir():
        return False
    aside = f"{io.OLD_PREFIX}{set_dir.name}."
    if not any(p.name.startswith(aside) for p in set_dir.parent.iterdir()):
        return False
    with set_lock(set_dir):
        return io.restore_replaced_directory(set_dir) is not None


# --------------------------------------------------------------------------- the assignment


@dataclass(frozen=True)
class Assignment:
    """The pairs to judge and who judges which, recorded at the first start."""

    pairs: tuple[Pair, ...]  # sorted by query_id, doc_id
    source: str  # how the pairs were chosen, in words
    primary: str  # judges every pair
    second: str | None = None  # judges the pairs of ``double_queries``
    double_share: float = 0.0
    seed: int = 0
    double_queries: tuple[str, ...] = ()
    parent: str | None = None  # the version the set revises, when it did not exist at the start

    def pairs_for(self, annotator: str) -> list[Pair]:
        if annotator == self.primary:
            return list(self.pairs)
        if annotator == self.second:
            chosen = set(self.double_queries)
            return [pair for pair in self.pairs if pair[0] in chosen]
        second = f" and {self.second} (the double-judged queries)" if self.second else ""
        raise InputError(
            f"this set's judging session is assigned to {self.primary} (every pair){second}, not {annotator!r}",
            file="<command line>",
            field="annotator",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": [list(pair) for pair in self.pairs],
            "source": self.source,
            "primary": self.primary,
            "second": self.second,
            "double_share": self.double_share,
            "seed": self.seed,
            "double_queries": list(self.double_queries),
            "parent": self.parent,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> "Assignment":
        return cls(
            pairs=tuple((str(q), str(d)) for q, d in document["pairs"]),
            source=str(document["source"]),
            primary=str(document["primary"]),
            second=document.get("second"),
            double_share=float(document.get("double_share", 0.0)),
            seed=int(document.get("seed", 0)),
            double_queries=tuple(document.get("double_queries", ())),
            parent=document.get("parent"),
        )


def choose_double_queries(query_ids: Iterable[str], share: float, seed: int) -> tuple[str, ...]:
    """``round(share * n)`` of the distinct query ids, drawn with ``random.Random(seed)`` from their
    sorted list (at least one when share > 0), returned sorted: the same ids for the same inputs."""
    ids = sorted(set(query_ids))
    if share <= 0 or not ids:
        return ()
    count = min(len(ids), max(1, round(share * len(ids))))
    return tuple(sorted(random.Random(seed).sample(ids, count)))


def new_assignment(
    pairs: Iterable[Pair],
    source: str,
    primary: str,
    *,
    second: str | None = None,
    double_share: float = 0.0,
    seed: int = 0,
    parent: str | None = None,
) -> Assignment:
    ordered = tuple(sorted(set(pairs)))
    chosen = choose_double_queries((q for q, _ in ordered), double_share, seed) if second else ()
    return Assignment(ordered, source, primary, second, double_share if second else 0.0, seed, chosen, parent)


def read_assignment(set_dir: str | Path) -> Assignment | None:
    path = session_dir(set_dir) / ASSIGNMENT_NAME
    if not path.is_file():
        return None
    try:
        return Assignment.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a readable assignment: {exc}", file=str(path), field="assignment") from None


def write_assignment(set_dir: str | Path, assignment: Assignment) -> None:
    io.write_json(session_dir(set_dir) / ASSIGNMENT_NAME, assignment.to_json())


# --------------------------------------------------------------------------- one annotator's session


@dataclass
class Session:
    """One annotator's work: saved whole after every change."""

    annotator: str
    # pair -> {"grade": int, "notes": str}, and "evidence": [{"start", "end", "quote"}] when it has spans
    grades: dict[Pair, dict[str, Any]] = field(default_factory=dict)
    added: list[Pair] = field(default_factory=list)  # documents added from the search box
    cursor: Pair | None = None  # the pair on screen
    imported: set[Pair] = field(default_factory=set)  # grades already written into the set

    def to_json(self) -> dict[str, Any]:
        return {
            "annotator": self.annotator,
            "grades": [
                {
                    "query_id": q,
                    "doc_id": d,
                    "grade": g["grade"],
                    "notes": g.get("notes", ""),
                    **({"evidence": [dict(span) for span in g["evidence"]]} if g.get("evidence") else {}),
                }
                for (q, d), g in sorted(self.grades.items())
            ],
            "added": [list(pair) for pair in self.added],
            "cursor": list(self.cursor) if self.cursor else None,
            "imported": [list(pair) for pair in sorted(self.imported)],
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> "Session":
        return cls(
            annotator=str(document["annotator"]),
            grades={(str(g["query_id"]), str(g["doc_id"])): _session_grade(g) for g in document.get("grades", [])},
            added=[(str(q), str(d)) for q, d in document.get("added", [])],
            cursor=tuple(document["cursor"]) if document.get("cursor") else None,
            imported={(str(q), str(d)) for q, d in document.get("imported", [])},
        )


def _session_grade(given: Mapping[str, Any]) -> dict[str, Any]:
    grade = {"grade": int(given["grade"]), "notes": str(given.get("notes", ""))}
    if given.get("evidence"):
        grade["evidence"] = [
            {"start": int(span["start"]), "end": int(span["end"]), "quote": str(span["quote"])}
            for span in given["evidence"]
        ]
    return grade


def load_session(path: str | Path, annotator: str) -> Session:
    path = Path(path)
    if not path.is_file():
        return Session(annotator)
    try:
        session = Session.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a readable judging session: {exc}", file=str(path), field="session") from None
    if session.annotator != annotator:
        raise InputError(f"the session of {session.annotator!r}, not {annotator!r}", file=str(path), field="annotator")
    return session


def save_session(path: str | Path, session: Session) -> None:
    io.write_json(path, session.to_json())


# --------------------------------------------------------------------------- the desk: what the page asks


@dataclass(frozen=True)
class Material:
    """What the page shows: query texts, documents, the set's scale and rubric, and the pairs the set
    already holds (by anyone), which the search box does not add again."""

    queries: Mapping[str, str]
    docs: pl.DataFrame  # doc_id, title, text
    scale: Mapping[int, str]
    rubric: str
    judged: frozenset[Pair]


class Desk:
    """One annotator's judging: the pairs, the session, and every action the page can take.

    Every method returns JSON-ready data and saves the session before returning. ``importer``
    takes the filled pool file and imports it (:func:`releval.judging.pool.import_filled_pool`).
    """

    def __init__(
        self,
        set_dir: str | Path,
        annotator: str,
        assignment: Assignment,
        material: Material,
        importer: Callable[[Path], PoolImport],
    ):
        self.set_dir = Path(set_dir)
        self.annotator = annotator
        self.assigned = assignment.pairs_for(annotator)
        self.material = material
        self.importer = importer
        self.path = session_file(set_dir, annotator)
        self.session = load_session(self.path, annotator)
        self._lock = threading.Lock()
        self._row = {doc_id: i for i, doc_id in enumerate(material.docs["doc_id"].to_list())}
        self._texts = material.docs["text"].to_list()
        self._titles = material.docs["title"].to_list()
        self._search_index = None
        self._pairs = sorted(set(self.assigned) | set(self.session.added))
        if self.session.cursor not in self._pairs:
            self.session.cursor = self._next_ungraded(-1)

    # ---- reading

    @property
    def pairs(self) -> list[Pair]:
        return list(self._pairs)

    def setup(self) -> dict[str, Any]:
        return {
            "annotator": self.annotator,
            "set": self.set_dir.name,
            "scale": [{"grade": g, "label": self.material.scale[g]} for g in sorted(self.material.scale)],
            "rubric": self.material.rubric,
            "rubric_html": render_markdown(self.material.rubric),
            "spans": {"max": MAX_SPANS, "min_grade": SPAN_MIN_GRADE},
        }

    def state(self) -> dict[str, Any]:
        with self._lock:
            return self._state()

    def _state(self) -> dict[str, Any]:
        graded = sum(1 for pair in self._pairs if pair in self.session.grades)
        view: dict[str, Any] = {
            "total": len(self._pairs),
            "graded": graded,
            "done": graded == len(self._pairs),
            "pair": None,
        }
        cursor = self.session.cursor
        if cursor is None:
            return view
        query_id, doc_id = cursor
        of_query = [pair for pair in self._pairs if pair[0] == query_id]
        query_ids = list(dict.fromkeys(q for q, _ in self._pairs))
        given = self.session.grades.get(cursor, {})
        row = self._row[doc_id]
        view["position"] = self._pairs.index(cursor) + 1
        view["query_progress"] = {
            "graded": sum(1 for pair in of_query if pair in self.session.grades),
            "total": len(of_query),
            "number": query_ids.index(query_id) + 1,
            "queries": len(query_ids),
        }
        view["pair"] = {
            "query_id": query_id,
            "query": self.material.queries[query_id],
            "doc_id": doc_id,
            "title": self._titles[row] or "",
            "text": self._texts[row] or "",
            "grade": given.get("grade"),
            "notes": given.get("notes", ""),
            "evidence": [{"start": span["start"], "end": span["end"]} for span in given.get("evidence", ())],
        }
        return view

    # ---- acting

    def grade(
        self, query_id: str, doc_id: str, grade: Any, notes: Any = "", advance: bool = True, evidence: Any = None
    ) -> dict[str, Any]:
        """Grade a pair (with notes). ``evidence``: the pair's spans, a list of ``{"start": S, "end": E}``
        character offsets into its document's text (:meth:`_checked_spans`), replacing those it had;
        None keeps them, unless the grade is below 1, which drops them."""
        with self._lock:
            pair = self._known_pair(query_id, doc_id)
            if isinstance(grade, bool) or not isinstance(grade, int) or grade not in self.material.scale:
                raise InputError(
                    f"expected one of the scale's grades {sorted(self.material.scale)}, got {grade!r}", field="grade"
                )
            if not isinstance(notes, str):
                raise InputError(f"expected text, got {notes!r}", field="notes")
            if not notes.isascii():
                try:
                    notes.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise InputError(f"not text: a lone surrogate at character {exc.start}", field="notes") from None
            spans = self._checked_spans(pair, grade, evidence)
            if spans is None:  # kept, where the grade still takes spans
                spans = self.session.grades.get(pair, {}).get("evidence") if grade >= SPAN_MIN_GRADE else None
            self.session.grades[pair] = {"grade": grade, "notes": notes.strip()}
            if spans:
                self.session.grades[pair]["evidence"] = spans
            self.session.imported.discard(pair)  # a changed grade is imported again (and refused if it repeats)
            if advance:
                following = self._next_ungraded(self._pairs.index(pair))
                self.session.cursor = following or pair
            else:
                self.session.cursor = pair
            self._save()
            return self._state()

    def move(self, to: str) -> dict[str, Any]:
        with self._lock:
            if not isinstance(to, str) or to not in ("back", "skip"):
                raise InputError(f"expected back or skip, got {to!r}", field="to")
            if self._pairs and self.session.cursor is not None:
                here = self._pairs.index(self.session.cursor)
                step = -1 if to == "back" else 1
                self.session.cursor = self._pairs[(here + step) % len(self._pairs)]
                self._save()
            return self._state()

    def search(self, text: str) -> dict[str, Any]:
        """The corpus's best BM25 matches for ``text`` (no score shown), each marked when it is already
        a pair of the query on screen or judged for it in the set."""
        from releval.retrieval.bm25 import tokenize

        tokens = tokenize(text, _SEARCH_TOKENS)
        with self._lock:
            query_id = self.session.cursor[0] if self.session.cursor else None
            results = []
            if tokens:
                indices, scores = self._index().top_k([tokens], SEARCH_RESULTS)
                for i, score in zip(indices[0].tolist(), scores[0].tolist()):
                    if score <= 0:
                        break
                    doc_id = self.material.docs["doc_id"][i]
                    results.append(
                        {
                            "doc_id": doc_id,
                            "title": self._titles[i] or "",
                            "snippet": snippet(self._texts[i] or "", 200),
                            "status": self._status((query_id, doc_id)) if query_id else None,
                        }
                    )
            return {"query_id": query_id, "results": results}

    def add(self, query_id: str, doc_id: str) -> dict[str, Any]:
        """A document the pool missed becomes a pair of this query, and the pair on screen."""
        _check_ids(query_id, doc_id)
        with self._lock:
            if query_id not in {q for q, _ in self._pairs}:
                raise InputError(f"query {query_id!r} has no pairs in this session", field="query_id")
            if doc_id not in self._row:
                raise InputError(f"document {doc_id!r} is not in the corpus", field="doc_id")
            pair = (query_id, doc_id)
            status = self._status(pair)
            if status == "judged":
                raise InputError(f"{doc_id!r} is already judged for query {query_id!r} in the set", field="doc_id")
            if status is None:
                self.session.added.append(pair)
                self._pairs = sorted(set(self._pairs) | {pair})
            self.session.cursor = pair
            self._save()
            return self._state()

    def finish(self) -> dict[str, Any]:
        """Import the grades the set does not hold yet, through `releval pool --import`'s code.

        The set decides what is pending (:meth:`_in_set`), so this is idempotent: a finish killed at
        any point, the version written and the session not told included, is completed by the next."""
        with self._lock, set_lock(self.set_dir):
            restore_set_locked(self.set_dir)
            written = self._in_set()
            found = {pair for pair in written if pair not in self.session.imported}  # a stopped finish wrote them
            if written != self.session.imported:
                self.session.imported = written
                self._save()
            pending = sorted(pair for pair in self.session.grades if pair not in written)
            ungraded = len(self._pairs) - sum(1 for p in self._pairs if p in self.session.grades)
            already = (
                f"{len(found)} grades of {self.annotator} were in {self.set_dir.name} already "
                "(written by a finish that was stopped before it recorded them)"
            )
            if not pending and found:
                return {"version": self.set_dir.name, "added": 0, "ungraded": ungraded, "message": already}
            if not pending:
                raise InputError(
                    "no new grades to write" + (" (all were written already)" if written else ""),
                    file=str(self.path),
                    field="grades",
                )
            filled = session_dir(self.set_dir) / f"{self.annotator}.graded.jsonl"
            write_graded_pool(filled, self._filled_pool(pending))
            result = self.importer(filled)
            self.session.imported = written | set(pending)
            self._save()
            moved = "" if result.idcg_moved is None else f"; IDCG@10 moved for {result.idcg_moved} queries"
            return {
                "version": result.judgment_set.version,
                "added": result.added,
                "ungraded": ungraded,
                "message": (
                    f"{result.added} judgments of {self.annotator} written to {result.judgment_set.version} "
                    f"({self.set_dir}){moved}; manifest sealed with judgments_sha256 "
                    f"{result.judgment_set.manifest.judgments_sha256[:12]}…" + (f"; {already}" if found else "")
                ),
            }

    # ---- internals

    def _in_set(self) -> set[Pair]:
        """The session's grades that the set holds as they are: same pair, annotator, grade, notes and
        evidence (a grade with other spans is another judgment)."""
        if not self.set_dir.is_dir():
            return set()
        rows = jmod.load_version(self.set_dir).judgments.filter(pl.col("annotator") == self.annotator)
        if "evidence" not in rows.columns:
            rows = rows.with_columns(pl.lit(None).alias("evidence"))
        held = {
            (q, d): (grade, notes or "", evidence_key(evidence))
            for q, d, grade, notes, evidence in rows.select(
                "query_id", "doc_id", "grade", "notes", "evidence"
            ).iter_rows()
        }
        return {
            pair
            for pair, given in self.session.grades.items()
            if pair in held
            and held[pair] == (given["grade"], given.get("notes") or "", evidence_key(self._quote_spans(pair)))
        }

    def _checked_spans(self, pair: Pair, grade: int, raw: Any) -> list[dict[str, Any]] | None:
        """The spans a grade request gives (None: it gives none, the pair keeps its own), each
        ``{"start", "end", "quote"}``: integer offsets, 0 <= start < end <= the text's length in
        characters, not only blanks, not overlapping another, at most :data:`MAX_SPANS`, and none
        on a grade below :data:`SPAN_MIN_GRADE`. An InputError names the first span at fault."""
        if raw is None:
            return None
        if not isinstance(raw, list):
            raise InputError(
                f'expected a list of spans ({{"start": S, "end": E}}), got {type(raw).__name__}', field="evidence"
            )
        if raw and grade < SPAN_MIN_GRADE:
            raise InputError(
                f"evidence spans go with grades of {SPAN_MIN_GRADE} or more, not {grade}: grade {grade} drops them",
                field="evidence",
            )
        if len(raw) > MAX_SPANS:
            raise InputError(f"at most {MAX_SPANS} evidence spans per pair, got {len(raw)}", field="evidence")
        text = self._texts[self._row[pair[1]]] or ""
        spans: list[dict[str, Any]] = []
        for index, item in enumerate(raw):
            where = f"evidence[{index}]"
            if not isinstance(item, dict) or set(item) != {"start", "end"}:
                raise InputError('expected {"start": S, "end": E} (character offsets)', field=where)
            start, end = item["start"], item["end"]
            for key, value in (("start", start), ("end", end)):
                if type(value) is not int:
                    raise InputError(f"expected an integer character offset, got {value!r:.40}", field=f"{where}.{key}")
            if not 0 <= start < end <= len(text):
                raise InputError(
                    f"expected 0 <= start < end <= {len(text)} (the document text's length in characters), "
                    f"got start {start}, end {end}",
                    field=where,
                )
            if not text[start:end].strip():
                raise InputError("the span holds only blanks: select the passage's words", field=where)
            for other, span in enumerate(spans):
                if start < span["end"] and span["start"] < end:
                    raise InputError(
                        f"overlaps evidence[{other}] ({span['start']}-{span['end']}): mark separate passages apart",
                        field=where,
                    )
            spans.append({"start": start, "end": end, "quote": text[start:end]})
        return spans

    def _quote_spans(self, pair: Pair) -> list[dict[str, Any]]:
        """The evidence of a graded pair as the judgment holds it: an anchor per span (:func:`quote_span`).
        The text under each span must still be the text it covered when it was marked."""
        text = self._texts[self._row[pair[1]]] or ""
        spans = []
        for index, span in enumerate(self.session.grades[pair].get("evidence", ())):
            if text[span["start"] : span["end"]] != span["quote"]:
                raise InputError(
                    f"the text of document {pair[1]!r} changed under evidence span {index + 1} of query "
                    f"{pair[0]!r} since it was marked: open the pair, remove the span and mark it again",
                    file=str(self.path),
                    field="evidence",
                )
            spans.append(quote_span(text, span["start"], span["end"]))
        return spans

    def _known_pair(self, query_id: Any, doc_id: Any) -> Pair:
        _check_ids(query_id, doc_id)
        pair = (query_id, doc_id)
        if pair not in set(self._pairs):
            raise InputError(f"({query_id!r}, {doc_id!r}) is not a pair of this session", field="doc_id")
        return pair

    def _status(self, pair: Pair) -> str | None:
        if pair in self._pairs:
            return "queued"
        if pair in self.material.judged:
            return "judged"
        return None

    def _next_ungraded(self, after: int) -> Pair | None:
        """The first ungraded pair after index ``after``, wrapping round; else the first pair (or None)."""
        n = len(self._pairs)
        for step in range(1, n + 1):
            pair = self._pairs[(after + step) % n]
            if pair not in self.session.grades:
                return pair
        return self._pairs[0] if self._pairs and after < 0 else None

    def _index(self):
        if self._search_index is None:
            from releval.retrieval.bm25 import BM25Index, tokenize

            self._search_index = BM25Index.build(
                [
                    tokenize(f"{title or ''} {text or ''}", _SEARCH_TOKENS)
                    for title, text in zip(self._titles, self._texts)
                ]
            )
        return self._search_index

    def _filled_pool(self, pending: list[Pair]) -> list[dict[str, Any]]:
        """The graded pool's rows (:data:`POOL_COLUMNS`, grades as text) with each pair's ``evidence``."""
        rows = []
        for query_id, doc_id in pending:
            given = self.session.grades[(query_id, doc_id)]
            row = self._row[doc_id]
            rows.append(
                {
                    "query_id": query_id,
                    "query": self.material.queries[query_id],
                    "doc_id": doc_id,
                    "title": self._titles[row] or "",
                    "snippet": snippet(self._texts[row] or ""),
                    "grade": str(given["grade"]),
                    "annotator": self.annotator,
                    "notes": given.get("notes", ""),
                    "evidence": self._quote_spans((query_id, doc_id)) or None,
                }
            )
        return rows

    def _save(self) -> None:
        save_session(self.path, self.session)


def quote_span(text: str, start: int, end: int) -> dict[str, Any]:
    """The evidence span ``{"quote": text[start:end]}`` of offsets into ``text``, with the
    ``occurrence`` that picks this place when the quote occurs more than once (overlapping places
    counted, as :func:`releval.inputs.schemas.locate_span` counts them): it locates at exactly
    ``(start, end)``."""
    quote = text[start:end]
    places = quote_places(text, quote)
    span: dict[str, Any] = {"quote": quote}
    if len(places) > 1:
        span["occurrence"] = places.index(start) + 1
    if locate_span(text, span) != (start, end):  # cannot happen: the anchor is the offsets' own text
        raise AssertionError(f"the anchor of {start}-{end} does not locate there")
    return span


def evidence_key(spans: Iterable[Mapping[str, Any]] | None) -> tuple[tuple[Any, ...], ...]:
    """Spans as comparable values: each span's :data:`EVIDENCE_KEYS` (None where unused), in order."""
    return tuple(tuple(span.get(key) for key in EVIDENCE_KEYS) for span in spans or ())


def write_graded_pool(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """A graded pool file, JSONL: each row's :data:`POOL_COLUMNS`, then its ``evidence`` (a list of
    spans as judgments.jsonl writes them) when it has any; a row without spans is the line
    :func:`releval.judging.pool.write_pool` writes."""
    lines = []
    for row in rows:
        line = {column: row.get(column) for column in POOL_COLUMNS}
        if row.get("evidence"):
            line["evidence"] = [dict(span) for span in row["evidence"]]
        lines.append(json.dumps(line, ensure_ascii=False) + "\n")
    io.write_text(path, "".join(lines))


def import_graded_pool(
    filled: str | Path,
    into: str | Path,
    *,
    annotator: str | None = None,
    parent: str | Path | None = None,
    date: str | None = None,
    queries: str | Path | None = None,
    queries_format: str = "jsonl",
    corpus: str | Path | None = None,
    corpus_format: str = "jsonl",
    completeness: str | None = None,
) -> PoolImport:
    """Import a graded pool that :func:`write_graded_pool` wrote: without evidence, exactly
    :func:`releval.judging.pool.import_filled_pool`; with evidence, the same steps (its records, the
    set's references, the re-sealed version) with each row's spans kept in its judgment and placed
    in the corpus's texts (every anchor found, once or at its occurrence; every offset within the
    text), a problem naming the file, line and ``evidence[i]`` field. (``read_filled_pool`` reads
    the pool's columns only, so the evidence is read here, by line.)"""
    from releval.inputs.corpus import read_docs
    from releval.inputs.datasets import references_for
    from releval.inputs.schemas import Record, read_jsonl
    from releval.judging.completeness import Completeness
    from releval.judging.pool import import_filled_pool, read_filled_pool, read_query_texts, refuse_reported

    found: list[InputError] = []
    spans = {r.line: r.values.get("evidence") for r in read_jsonl(filled, found, first_field="query_id")}
    spans = {line: evidence for line, evidence in spans.items() if evidence is not None}
    if not spans:
        return import_filled_pool(
            filled,
            into,
            annotator=annotator,
            parent=parent,
            date=date,
            queries=queries,
            queries_format=queries_format,
            corpus=corpus,
            corpus_format=corpus_format,
            completeness=completeness,
        )
    into = Path(into)
    records, ungraded, errors = read_filled_pool(filled, annotator)
    records = [Record(r.line, {**r.values, "evidence": spans[r.line]}) if r.line in spans else r for r in records]
    base = into if (into / jmod.MANIFEST_NAME).exists() else (Path(parent) if parent else None)
    if base == into:
        refuse_reported(into)
    references = references_for(
        base, queries=queries, queries_format=queries_format, corpus=corpus, corpus_format=corpus_format
    )
    query_ids = read_query_texts(references.queries, references.queries_format)["query_id"].to_list()
    docs = read_docs(references.corpus, references.corpus_format)
    base_dir = into if into.exists() else (Path(parent) if parent else None)
    base_qrels = jmod.load_version(base_dir).qrels() if base_dir is not None and base_dir.exists() else None
    if date is not None and jmod._date_text(date) is None:
        raise InputError(f"expected YYYY-MM-DD, got {date!r}", file="<command line>", field="date")
    judgment_set, added = jmod.add_judgments(
        records,
        str(filled),
        into,
        parent=parent,
        date=date,
        query_ids=query_ids,
        doc_lengths=jmod.doc_lengths(docs),
        doc_texts=jmod.doc_texts(docs),
        errors=errors,
        dataset=references.dataset,
        completeness=None if completeness is None else Completeness(completeness),
    )
    moved = None if base_qrels is None else jmod.idcg_change_report(base_qrels, judgment_set.qrels(), (10,)).height
    checked = f"{references.how}: queries {references.queries} and corpus {references.corpus}"
    return PoolImport(judgment_set, added, ungraded, checked, moved)


def _check_ids(query_id: Any, doc_id: Any) -> None:
    for name, value in (("query_id", query_id), ("doc_id", doc_id)):
        if not isinstance(value, str):
            raise InputError(f"expected an id (text), got {type(value).__name__}", field=name)


def restore_set_locked(set_dir: Path) -> None:
    """:func:`restore_set` for a caller holding :func:`set_lock`."""
    if not set_dir.exists():
        io.restore_replaced_directory(set_dir)


def _search_tokens():
    from releval.retrieval.bm25 import TokenizerConfig

    return TokenizerConfig(stopwords="english")


_SEARCH_TOKENS = _search_tokens()


# --------------------------------------------------------------------------- the server


class JudgeServer(ThreadingHTTPServer):
    """The judging page's server. ``finished`` is set once a finish from the page has written every
    grade and no pair is left ungraded: the command then stops serving (its work is done)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]):
        super().__init__(address, handler)
        self.finished = threading.Event()
        self.finish_message = ""


def make_server(desk: Desk, port: int = 0) -> JudgeServer:
    """A server on 127.0.0.1 only (``port`` 0: a free one; the bound port is ``server_address[1]``)."""
    handler = type("JudgeHandler", (_Handler,), {"desk": desk})
    return JudgeServer(("127.0.0.1", port), handler)


class _Refused(Exception):
    """A request answered with an error status before its action ran."""

    def __init__(self, status: int, message: str, unread: int = 0):
        super().__init__(message)
        self.status, self.message, self.unread = status, message, unread


_BYTE_COUNT = re.compile(r"[0-9]{1,18}")
_DRAIN = 4 * MAX_BODY  # bytes of a refused body read and dropped, so the client gets the answer, not a reset


class _Handler(BaseHTTPRequestHandler):
    desk: Desk
    server_version = "releval-judge"
    timeout = READ_TIMEOUT  # StreamRequestHandler sets it on the socket: a silent client is let go

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # the terminal shows the URL and the finish message, not every request

    def do_GET(self) -> None:
        if not self._local_host():
            return
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html"):
            self._page()
        elif url.path == "/api/setup":
            self._answer(self.desk.setup)
        elif url.path == "/api/state":
            self._answer(self.desk.state)
        elif url.path == "/api/search":
            text = parse_qs(url.query).get("q", [""])[0]
            self._answer(lambda: self.desk.search(text))
        else:
            self._json(404, {"error": f"no such page: {url.path}"})

    def do_POST(self) -> None:
        if not self._local_host():
            return
        try:
            body = self._body()
        except _Refused as refused:
            self._json(refused.status, {"error": refused.message}, close=True)
            self._drain(refused.unread)
            return

        def advance() -> bool:
            value = body.get("advance", True)
            if not isinstance(value, bool):
                raise InputError(f"expected true or false, got {type(value).__name__}", field="advance")
            return value

        actions: dict[str, Callable[[], Any]] = {
            "/api/grade": lambda: self.desk.grade(
                body.get("query_id"),
                body.get("doc_id"),
                body.get("grade"),
                body.get("notes", ""),
                advance=advance(),
                evidence=body.get("evidence"),
            ),
            "/api/move": lambda: self.desk.move(body.get("to")),
            "/api/add": lambda: self.desk.add(body.get("query_id"), body.get("doc_id")),
            "/api/finish": self._finish,
        }
        action = actions.get(urlsplit(self.path).path)
        if action is None:
            self._json(404, {"error": f"no such action: {urlsplit(self.path).path}"})
            return
        self._answer(action)

    def _body(self) -> dict[str, Any]:
        """The request's JSON object, read within the limits; _Refused (status, one line) otherwise."""
        # JSON only: a page of another site cannot send it here without a preflight this server refuses.
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            raise _Refused(415, "expected application/json")
        if self.headers.get("Transfer-Encoding") is not None:
            raise _Refused(400, "a body sent in chunks is not accepted: send it with a Content-Length")
        given = self.headers.get_all("Content-Length") or []
        if not given:
            raise _Refused(400, "the request has no Content-Length")
        if len({value.strip() for value in given}) > 1:
            raise _Refused(400, f"the request has {len(given)} different Content-Length headers")
        text = given[0].strip()
        if not _BYTE_COUNT.fullmatch(text):
            raise _Refused(400, f"expected Content-Length to be a count of bytes, got {text[:40]!r}")
        length = int(text)
        if length > MAX_BODY:
            raise _Refused(413, f"the request body has {length} bytes; at most {MAX_BODY} are accepted", length)
        try:
            data = self.rfile.read(length)
        except TimeoutError:
            raise _Refused(408, f"the request body did not come within {READ_TIMEOUT:g} s") from None
        if len(data) < length:
            raise _Refused(400, f"the request body ended after {len(data)} of its {length} bytes")
        try:
            body = json.loads(data or b"{}")
        except (ValueError, RecursionError):
            raise _Refused(400, "the request body is not JSON (or nests too deep)") from None
        if not isinstance(body, dict):
            raise _Refused(400, "expected a JSON object")
        return body

    def _drain(self, unread: int) -> None:
        """After refusing a body unread: say we are done, then read and drop some of it (a client still
        sending would otherwise get a reset instead of the answer)."""
        if unread <= 0:
            return
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            left = min(unread, _DRAIN)
            while left > 0:
                chunk = self.rfile.read1(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:  # TimeoutError included: the client stopped sending
            pass

    def _local_host(self) -> bool:
        """Refuse a Host header naming anything but this machine (a DNS-rebinding page)."""
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        if host in ("127.0.0.1", "localhost"):
            return True
        self._json(403, {"error": "this server answers only to 127.0.0.1 or localhost"}, close=True)
        return False

    def _finish(self) -> dict[str, Any]:
        result = self.desk.finish()
        if result["ungraded"] == 0 and isinstance(self.server, JudgeServer):
            self.server.finish_message = result["message"]
            self.server.finished.set()  # set before the answer goes out; the command stops after it
        return result

    def _answer(self, action: Callable[[], Any]) -> None:
        try:
            result = action()
        except InputErrors as exc:
            self._json(400, {"error": "\n".join(str(e) for e in exc.errors)})
            return
        except InputError as exc:
            self._json(400, {"error": str(exc)})
            return
        except Exception as exc:  # noqa: BLE001 - a bug answers 500 in one line; the server goes on serving
            line = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            print(f"judge: internal error on {self.command} {urlsplit(self.path).path}: {line}", file=sys.stderr)
            self._json(500, {"error": f"internal error: {line}"})
            return
        self._json(200, result)

    def _page(self) -> None:
        nonce = secrets.token_urlsafe(16)
        html = PAGE_HTML.replace("<script>", f'<script nonce="{nonce}">', 1)
        policy = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; connect-src 'self'; "
            "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        self._send(200, html.encode("utf-8"), "text/html; charset=utf-8", {"Content-Security-Policy": policy})

    def _json(self, status: int, document: Any, close: bool = False) -> None:
        text = json.dumps(document, ensure_ascii=False)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: JSON's \u escapes carry it
            data = json.dumps(document).encode("ascii")
        self._send(status, data, "application/json", {"Connection": "close"} if close else {})

    def _send(self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


# --------------------------------------------------------------------------- opening a desk from the command's options


def open_desk(
    set_dir: str | Path,
    annotator: str,
    *,
    pool: str | Path | None = None,
    parent: str | Path | None = None,
    queries: str | Path | None = None,
    queries_format: str | None = None,
    corpus: str | Path | None = None,
    corpus_format: str | None = None,
    depth: int | None = None,
    second: str | None = None,
    double_share: float | None = None,
    seed: int | None = None,
    date: str | None = None,
) -> Desk:
    """The desk of ``annotator`` on the set ``set_dir`` (an existing version, or a new one revising
    ``parent``: by default the active judgment version of params.yaml).

    At the first start the pairs (``pool``, else the judging debt of params.yaml's grid at ``depth``)
    and the double-judging choice are recorded; later starts, the second annotator's included, read
    that record, and options that contradict it are errors. Queries and corpus: the options, else the
    pipeline's tables (data/work/queries.parquet, docs.parquet) when the set belongs to the active
    dataset, else its dataset's files (:func:`releval.inputs.datasets.references_for`).
    """
    from releval import paths
    from releval.inputs.corpus import read_docs
    from releval.inputs.datasets import active_dataset, dataset_of_set, references_for
    from releval.config import load_params
    from releval.judging.judgments import active_set_path
    from releval.judging.pool import debt_pairs, read_pool_pairs, read_query_texts

    set_dir = Path(set_dir)
    annotator = checked_name(annotator, "annotator")
    share = _checked_share(second, double_share, annotator)
    restore_set(set_dir)  # a version a killed write left moved aside: else it would be made again from its parent
    recorded = read_assignment(set_dir)
    parent = parent or (recorded.parent if recorded else None)
    if not set_dir.exists() and parent is None:
        parent = active_set_path(load_params() if Path(paths.PARAMS).is_file() else {})
    base = set_dir if set_dir.exists() else Path(parent)
    base_set = jmod.load_version(base)
    own = dataset_of_set(base).dataset
    active = active_dataset()
    of_the_grid = own is not None and active is not None and own.name == active.name
    tables = Path(paths.QUERIES).is_file() and Path(paths.DOCS).is_file()
    if queries is None and corpus is None and of_the_grid and tables:
        # the set belongs to the active dataset: the pipeline's tables of it (its subset, as the runs saw it)
        queries_path, queries_format, corpus_path, corpus_format = (
            Path(paths.QUERIES),
            "parquet",
            Path(paths.DOCS),
            "parquet",
        )
    else:
        references = references_for(
            base, queries=queries, queries_format=queries_format, corpus=corpus, corpus_format=corpus_format
        )
        queries_path, queries_format = references.queries, references.queries_format
        corpus_path, corpus_format = references.corpus, references.corpus_format
    if recorded is None and pool is None and not of_the_grid:
        raise InputError(
            f"the judging debt is that of the active grid (dataset {active.name if active else 'none'}), but "
            f"{base} belongs to {'dataset ' + repr(own.name) if own else 'no configured dataset'}: name the pairs "
            "to judge with --pool FILE, or make its dataset the active one (`releval params dataset=...`)",
            file="<command line>",
            field="pool",
        )
    query_texts = read_query_texts(queries_path, queries_format)
    docs = read_docs(corpus_path, corpus_format)
    rubric = base / base_set.manifest.rubric
    material = Material(
        queries=dict(zip(query_texts["query_id"].to_list(), query_texts["text"].to_list())),
        docs=docs,
        scale=base_set.manifest.scale,
        rubric=rubric.read_text(encoding="utf-8"),
        judged=frozenset(base_set.judgments.select("query_id", "doc_id").iter_rows()),
    )
    if recorded is None:
        if pool is not None:
            pairs = read_pool_pairs(pool, material.queries, docs["doc_id"].to_list())
            source = f"the pool file {pool}"
        else:
            pairs, depth = debt_pairs(
                load_params(),
                {"path": str(base), "format": "releval", "version": base.name},
                depth,
                queries_path,
                queries_format,
                corpus_path,
                corpus_format,
                desc="judge: the judging debt",
            )
            if not pairs:
                raise InputError(
                    f"no judging debt: every configuration's top {depth} is judged in {base}; "
                    "pass --pool to judge other pairs",
                    file="<command line>",
                    field="pool",
                )
            source = f"{DEBT_SOURCE} at depth {depth} against {base_set.version}"
        recorded = new_assignment(
            pairs,
            source,
            annotator,
            second=second,
            double_share=share,
            seed=0 if seed is None else seed,
            parent=None if set_dir.exists() else str(parent),
        )
        with set_lock(set_dir):
            if read_assignment(set_dir) is not None:
                raise InputError(
                    "another judge started this set's session at the same moment; start again to join it",
                    file=str(session_dir(set_dir) / ASSIGNMENT_NAME),
                    field="assignment",
                )
            write_assignment(set_dir, recorded)
    else:
        _check_against_record(recorded, set_dir, pool, second, double_share, seed)

    # Grades of the grid's whole judging debt make the set pooled at that depth, whatever the parent
    # declared (labels a team had, positives-only, with every top-k pair of the grid now judged on top).
    from_debt = recorded.source.startswith(DEBT_SOURCE)

    def importer(filled: Path) -> PoolImport:
        return import_graded_pool(
            filled,
            set_dir,
            annotator=annotator,
            parent=parent,
            date=date,
            queries=queries_path,
            queries_format=queries_format,
            corpus=corpus_path,
            corpus_format=corpus_format,
            completeness="pooled" if from_debt else None,
        )

    return Desk(set_dir, annotator, recorded, material, importer)


def _checked_share(second: str | None, share: float | None, annotator: str) -> float:
    if second is None:
        if share is not None:
            raise InputError("--double-share needs --second-annotator", file="<command line>", field="double-share")
        return 0.0
    if checked_name(second, "second-annotator") == annotator:
        raise InputError("the second annotator must be another person", file="<command line>", field="second-annotator")
    share = 0.25 if share is None else share
    if not 0.0 < share <= 1.0:
        raise InputError(f"expected a share in (0, 1], got {share}", file="<command line>", field="double-share")
    return share


def _check_against_record(
    recorded: Assignment,
    set_dir: Path,
    pool: str | Path | None,
    second: str | None,
    share: float | None,
    seed: int | None,
) -> None:
    """Options given again at a later start must agree with what the first start recorded."""
    where = str(session_dir(set_dir) / ASSIGNMENT_NAME)
    if pool is not None and recorded.source != f"the pool file {pool}":
        raise InputError(f"this session judges {recorded.source}, not the pool file {pool}", file=where, field="pool")
    if second is not None and second != recorded.second:
        raise InputError(
            f"the recorded second annotator is {recorded.second!r}, not {second!r}", file=where, field="second"
        )
    if share is not None and share != recorded.double_share:
        raise InputError(
            f"the recorded double-judged share is {recorded.double_share}, not {share}",
            file=where,
            field="double_share",
        )
    if seed is not None and recorded.second is not None and seed != recorded.seed:
        raise InputError(f"the recorded seed is {recorded.seed}, not {seed}", file=where, field="seed")
