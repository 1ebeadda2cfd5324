#!/usr/bin/env python3
"""Writes the tokenizer fixtures of tests/unit/text (committed; rerun to regenerate).

    gen_tokenizers.py OUTDIR          # writes OUTDIR/<family>/{tokenizer.json,tokenizer.gguf,expected.json}
    gen_tokenizers.py --check DIR     # recomputes every expected.json with `tokenizers`; exit 1 on a difference

No network: each tokenizer is trained here, with the Hugging Face `tokenizers` library, on the small
multilingual corpus below, laid out the way the real families' tokenizer.json files are, and converted to
GGUF `tokenizer.ggml.*` metadata (no tensors) with the `gguf` package as llama.cpp's convert_hf_to_gguf.py
does. expected.json holds, for every text of TEXTS, the ids `tokenizers` gives (special tokens kept as
text, and parsed), and its decode of them. The C++ test compares fusegraph's tokenizer with these ids,
for both files of each family.

Families (what the model families of frontends/models/families use):
  llama3  byte-level BPE, llama3 split regex, ignore_merges, BOS <|begin_of_text|>   (GGUF gpt2 + llama-bpe)
  qwen2   byte-level BPE, qwen2 split regex, NFC normalizer, no BOS                  (GGUF gpt2 + qwen2)
  llama2  SentencePiece-style BPE with byte fallback, space prefix, BOS <s>           (GGUF llama)
  gemma   the same without the space prefix (add_space_prefix = false), BOS <bos>     (GGUF llama)
  gpt2    byte-level BPE with ByteLevel's own (GPT-2) regex, no BOS                   (GGUF gpt2 + gpt-2)

Exit status 3 (and a message) when tokenizers or gguf is missing.
"""
import json
import os
import sys

try:
    import gguf
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, Regex
except ImportError as e:  # the C++ regeneration test skips with this message
    print(f"missing Python package: {e.name} (pip install tokenizers gguf)")
    sys.exit(3)

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = """\
The quick brown fox jumps over the lazy dog. It's what they'd said; we'll see, you've done it, I'm here.
Tokenizers split text into pieces: words, numbers like 12345 and 3.14159, and punctuation!?
def main(argc, argv):\n    return sum(x * x for x in range(10))  # squares\n
for (int i = 0; i < n; ++i) { total += values[i]; }\n\tif (total > 1000) break;
Le cœur a ses raisons que la raison ne connaît point. Ça va très bien, merci.
Der schnelle braune Fuchs springt über den faulen Hund. Größe, Straße, Übermut.
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир!
日本語のテキストも分割されます。東京は日本の首都です。こんにちは世界。
中文文本也需要分词。北京是中国的首都。你好，世界！
한국어 문장도 토큰으로 나뉩니다. 안녕하세요 세계.
مرحبا بالعالم. هذه جملة باللغة العربية.
नमस्ते दुनिया। यह हिंदी में एक वाक्य है।
Emoji: 😀 🎉 👍🏽 🇫🇷 ❤️ and more 🚀🚀🚀.
Whitespace   runs,\ttabs\t\tand\n\nnewlines\r\n  matter.
Combining marks: e\u0301 a\u0308 n\u0303 and precomposed é ä ñ.
Numbers 0 1 22 333 4444 55555 and 2024-11-30T14:17:11Z.
"""

TEXTS = [
    "Hello world",
    "Hello, world! How are you today?",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    " ",
    "  ",
    "\n",
    "\n\n\n",
    "\t",
    "a\n b\r\n\tc",
    "",
    "It's what they'd said; we'll see, YOU'VE done it, I'M here.",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < 10; ++i) {\n\tsum += a[i];\n}",
    "Le cœur a ses raisons. Ça va très bien.",
    "Größe und Straße über alles",
    "Быстрая лиса, привет мир!",
    "東京は日本の首都です。",
    "北京是中国的首都。你好，世界！",
    "안녕하세요 세계",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "😀🎉👍🏽🇫🇷❤️🚀",
    "emoji 🚀 in 🤖 text",
    "e\u0301 a\u0308 n\u0303 \u0301\u0301 x\u0323\u0307",
    "Numbers: 1 12 123 1234 12345 3.14159 2024-11-30",
    "    indented    with     runs    ",
    "tabs\t\tand\nnewlines\n\n  mixed \n",
    "supercalifragilistic words",
    " supercalifragilistic",
    "ZZZ qqq xyzzy ǅ ﬁ Ⅻ ½",
    "\u00a0non\u2009breaking\u3000spaces",
    "zero\u200bwidth\u200djoiner",
    "<s> and </s> and <|endoftext|> and <|begin_of_text|> look special",
    "<|im_start|>user\nhi<|im_end|>",
    "<bos>text<eos> <|eot_id|>",
    "\U0001F9D1\u200D\U0001F4BB\u2764\uFE0F",
    "a",
    "ÿ þ ß",
    "\r",
    " \r\n \n\n x",
    "next\u0085line and\u2028separator\u000bvt\u000cff",
    "Tiếng Việt có dấu; ภาษาไทย ไม่มีช่องว่าง",
    "'s 'S 'll 'LL 'd don't WON'T",
    "x = [1,2,3]; y = {'k': \"v\"}  // comment\n#include <stdio.h>",
    "12345678901234567890",
    "   \n   ",
    "$$$ %%% ^^^ ~~~ ``` |||",
    "🤖🤖🤖🤖🤖🤖🤖🤖",
    "case folding: it'ſ 'K 'İ 'ß",
]

# A vocabulary entry with no merge path to it: only ignore_merges (llama3) finds it whole.
EXTRA_WORD = " supercalifragilistic"


def byte_unicode():  # GPT-2's bytes_to_unicode
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
         list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def corpus_lines():
    return CORPUS.split("\n") * 3


def train_bytelevel(regex, vocab_size):
    tok = Tokenizer(models.BPE())
    if regex is None:  # GPT-2: ByteLevel splits with its own regex
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tr = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train_from_iterator(corpus_lines(), trainer=tr)
    m = json.loads(tok.to_str())["model"]
    vocab = sorted(m["vocab"].items(), key=lambda kv: kv[1])
    merges = [tuple(x.split(" ")) if isinstance(x, str) else tuple(x) for x in m["merges"]]
    return [t for t, _ in vocab], merges


def bytelevel_json(pieces, merges, regex, specials, bos, nfc, ignore_merges):
    vocab = {p: i for i, p in enumerate(pieces)}
    added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in specials]
    post = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    if bos:
        post = {"type": "Sequence", "processors": [post, {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}}}]}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"} if nfc else None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True} if regex is None else
        {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab, "merges": [list(m) for m in merges]},
    }


def make_bytelevel(name, regex, vocab_size, specials, bos, eos, nfc, ignore_merges):
    pieces, merges = train_bytelevel(regex, vocab_size)
    bu = byte_unicode()
    if ignore_merges:
        extra = "".join(bu[b] for b in EXTRA_WORD.encode())
        assert extra not in pieces
        pieces.append(extra)
    pieces += specials
    j = bytelevel_json(pieces, merges, regex, specials, bos, nfc, ignore_merges)
    types = [3 if p in specials else 1 for p in pieces]

    def gguf_meta(w):
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre({"llama3": "llama-bpe", "qwen2": "qwen2", "gpt2": "gpt-2"}[name])
        w.add_token_list(pieces)
        w.add_token_types(types)
        w.add_token_merges([f"{a} {b}" for a, b in merges])
        if bos:
            w.add_bos_token_id(pieces.index(bos))
        w.add_eos_token_id(pieces.index(eos))
        w.add_add_bos_token(bool(bos))
    return j, gguf_meta


def train_spm(vocab_size):
    """A SentencePiece-like BPE: pieces over '▁'-joined words, then the vocabulary laid out as
    llama's: <unk> <s> </s>, 256 byte tokens <0xXX>, then pieces by score (id order)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False)
    tok.train_from_iterator(corpus_lines(), trainer=tr)
    m = json.loads(tok.to_str())["model"]
    trained = [t for t, _ in sorted(m["vocab"].items(), key=lambda kv: kv[1])]
    return trained


def make_spm(name, vocab_size, prefix):
    bos, eos, unk = ("<s>", "</s>", "<unk>") if name == "llama2" else ("<bos>", "<eos>", "<unk>")
    specials = [unk, bos, eos] + (["<start_of_turn>", "<end_of_turn>"] if name == "gemma" else [])
    bytes_ = [f"<0x{b:02X}>" for b in range(256)]
    trained = train_spm(vocab_size)
    pieces = specials + bytes_ + [p for p in trained if p not in specials]
    vocab = {p: i for i, p in enumerate(pieces)}
    first = len(specials) + 256
    normal = set(pieces[first:])
    # Merges laid out as HF's SpmConverter does: every split of a piece into two pieces, ordered
    # by the merged piece's score (its id here), so rank-BPE and score-BPE agree.
    merges = []
    for m in pieces[first:]:
        for k in range(1, len(m)):
            a, b = m[:k], m[k:]
            if a in normal and b in normal:
                merges.append((vocab[m], vocab[a], vocab[b], a, b))
    merges.sort()
    merges = [[a, b] for _, _, _, a, b in merges]
    added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in specials]
    norms = ([{"type": "Prepend", "prepend": "▁"}] if prefix else []) + \
            [{"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]
    decs = [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}] + ([{"type": "Strip", "content": " ", "start": 1, "stop": 0}] if prefix else [])
    j = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": norms},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}}},
        "decoder": {"type": "Sequence", "decoders": decs},
        "model": {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }
    types = [2 if p == unk else 3 if p in specials else 6 if p in bytes_ else 1 for p in pieces]
    scores = [0.0 if t != 1 else -float(i) for i, t in enumerate(types)]

    def gguf_meta(w):
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(pieces)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(vocab[bos])
        w.add_eos_token_id(vocab[eos])
        w.add_unk_token_id(vocab[unk])
        w.add_add_bos_token(True)
        w.add_add_space_prefix(prefix)
    return j, gguf_meta


FAMILIES = {
    "llama3": lambda: make_bytelevel("llama3", LLAMA3_RE, 700,
                                     ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
                                     "<|begin_of_text|>", "<|end_of_text|>", nfc=False, ignore_merges=True),
    "qwen2": lambda: make_bytelevel("qwen2", QWEN2_RE, 700, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                    None, "<|endoftext|>", nfc=True, ignore_merges=False),
    "gpt2": lambda: make_bytelevel("gpt2", None, 600, ["<|endoftext|>"], None, "<|endoftext|>", nfc=False,
                                   ignore_merges=False),
    "llama2": lambda: make_spm("llama2", 500, prefix=True),
    "gemma": lambda: make_spm("gemma", 500, prefix=False),
}


def expected(tokenizer_json):
    tok = Tokenizer.from_str(json.dumps(tokenizer_json))
    cases = []
    for text in TEXTS:
        tok.encode_special_tokens = True
        ids = tok.encode(text).ids
        tok.encode_special_tokens = False
        special = tok.encode(text).ids
        tok.encode_special_tokens = True
        cases.append({"text": text, "ids": ids, "ids_parse_special": special,
                      "ids_no_bos": tok.encode(text, add_special_tokens=False).ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False),
                      "decoded_skip_special": tok.decode(special, skip_special_tokens=True)})
    return cases


def write_gguf(path, gguf_meta):
    w = gguf.GGUFWriter(path, "llama")
    gguf_meta(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def dump(obj):
    return json.dumps(obj, ensure_ascii=False, indent=1) + "\n"


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--check":
        bad = 0
        for name in FAMILIES:
            d = os.path.join(args[1], name)
            with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
                j = json.load(f)
            with open(os.path.join(d, "expected.json"), encoding="utf-8") as f:
                want = json.load(f)
            got = expected(j)
            if got != want["texts"]:
                print(f"{name}: expected.json differs from what tokenizers gives now")
                bad += 1
        sys.exit(1 if bad else 0)
    if len(args) != 1:
        print(__doc__)
        sys.exit(2)
    for name, make in FAMILIES.items():
        d = os.path.join(args[0], name)
        os.makedirs(d, exist_ok=True)
        j, gguf_meta = make()
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(j, ensure_ascii=False) + "\n")
        write_gguf(os.path.join(d, "tokenizer.gguf"), gguf_meta)
        with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
            f.write(dump({"texts": expected(j)}))


if __name__ == "__main__":
    main()
