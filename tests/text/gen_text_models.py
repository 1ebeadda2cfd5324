#!/usr/bin/env python3
"""Writes tiny models whose vocabulary is a fixture tokenizer's, for `run --prompt` tests.

    gen_text_models.py OUTDIR

OUTDIR/llama3-text-hf/: a llama model (gen_models.py's smollm2 family, random weights) with
vocab_size = the llama3 fixture's, tests/text/fixtures/llama3/tokenizer.json beside it and
eos_token_id = <|eot_id|> in config.json. OUTDIR/llama3-text.gguf: the same model as GGUF with
the fixture's `tokenizer.ggml.*` metadata (gen_tokenizers.py's llama3 tokenizer).

Exit status 3 (and a message) when numpy, gguf, safetensors or tokenizers is missing.
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, HERE)

try:
    import gen_models  # exits 3 itself when numpy, gguf or safetensors is missing
    import gguf
    import gen_tokenizers
except ImportError as e:
    print(f"missing Python package: {e.name}")
    sys.exit(3)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    fixture = os.path.join(HERE, "fixtures", "llama3", "tokenizer.json")
    with open(fixture, encoding="utf-8") as f:
        vocab = json.load(f)["model"]["vocab"]
    n = max(vocab.values()) + 1
    c = dict(gen_models.FAMILIES["smollm2"], vocab_size=n)
    c.pop("rope_scaling", None)
    w = gen_models.hf_weights("smollm2", c)
    hf = os.path.join(out, "llama3-text-hf")
    gen_models.write_hf(hf, c, w)
    shutil.copy(fixture, os.path.join(hf, "tokenizer.json"))
    with open(os.path.join(hf, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    with open(fixture, encoding="utf-8") as f:
        added = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    cfg["eos_token_id"] = added["<|eot_id|>"]
    with open(os.path.join(hf, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)

    # The GGUF twin: gen_models.write_gguf with the fixture tokenizer's metadata in place of
    # its placeholder vocabulary.
    _, meta = gen_tokenizers.FAMILIES["llama3"]()
    orig = gguf.GGUFWriter.add_tokenizer_model, gguf.GGUFWriter.add_token_list

    def restore():
        gguf.GGUFWriter.add_tokenizer_model, gguf.GGUFWriter.add_token_list = orig

    def tokenizer(writer, _model):
        restore()
        meta(writer)
        gguf.GGUFWriter.add_token_list = lambda self, _tokens: None

    gguf.GGUFWriter.add_tokenizer_model = tokenizer
    try:
        gen_models.write_gguf(os.path.join(out, "llama3-text.gguf"), c, w)
    finally:
        restore()


if __name__ == "__main__":
    main()
