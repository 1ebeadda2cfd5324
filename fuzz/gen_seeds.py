#!/usr/bin/env python3
"""Writes the model seeds of the fuzz targets, with tests/models/gen_models.py.

    gen_seeds.py OUT

OUT/gguf/<family>.gguf      tiny models of every family (f32, as llama.cpp lays them out),
                            llama-q8.gguf (q8_0/q4_0/q4_1 matrices), llama-q4_k_m.gguf
                            (llama.cpp's Q4_K_M mix with fallback types) and quants.gguf
                            (every block type and metadata value type)
OUT/models/<family>/        the same models as Hugging Face folders (for plan seeds)
OUT/hf/<family>.bin         config.json, a NUL byte, model.safetensors: the hf target's input

Tiny means hidden size 32, one layer (gemma3: two), vocab 16, so that each seed stays a few
tens of KiB and mutations stay fast. Without numpy, gguf and safetensors it
prints why and writes nothing (exit 0): the other seeds do not need them.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
try:
    import gen_models as gm
except SystemExit:  # gen_models exits 3 when a package is missing
    print("gen_seeds.py: numpy, gguf or safetensors missing; no model seeds written")
    sys.exit(0)
import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

TINY = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
            head_dim=16, intermediate_size=16, vocab_size=16)
SPECIAL = {
    "smollm2": dict(head_dim=None, num_key_value_heads=2),  # head_dim from hidden / heads
    "qwen2": dict(head_dim=None),
    "qwen3moe": dict(moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2),
    "gemma3": dict(num_hidden_layers=2, sliding_window_pattern=2, query_pre_attn_scalar=16, sliding_window=2),
}


def tiny_config(fam):
    c = dict(gm.FAMILIES[fam])
    c.update(TINY)
    c.update(SPECIAL.get(fam, {}))
    return {k: v for k, v in c.items() if v is not None}


class QuantWriter(gguf.GGUFWriter):
    """Stores the layer matrices quantised (q8_0, q4_0 for ffn_down, q4_1 for ffn_up)."""
    KINDS = {"ffn_down": QT.Q4_0, "ffn_up": QT.Q4_1}

    def add_tensor(self, name, tensor, *args, **kw):
        if name.startswith("blk.") and tensor.ndim == 2 and tensor.shape[-1] % 32 == 0:
            qt = next((q for k, q in self.KINDS.items() if k in name), QT.Q8_0)
            return super().add_tensor(name, gguf.quants.quantize(tensor, qt), raw_dtype=qt)
        return super().add_tensor(name, tensor, *args, **kw)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    out = sys.argv[1]
    for d in ("gguf", "models", "hf"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    for fam in gm.FAMILIES:
        c = tiny_config(fam)
        w = gm.hf_weights(fam, c)
        gm.write_gguf(os.path.join(out, "gguf", fam + ".gguf"), c, w)
        folder = os.path.join(out, "models", fam)
        gm.write_hf(folder, c, w)
        with open(os.path.join(folder, "config.json"), "rb") as f:
            config = f.read()
        with open(os.path.join(folder, "model.safetensors"), "rb") as f:
            tensors = f.read()
        with open(os.path.join(out, "hf", fam + ".bin"), "wb") as f:
            f.write(config + b"\0" + tensors)
        if fam == "smollm2":
            plain = gm.gguf.GGUFWriter
            gm.gguf.GGUFWriter = QuantWriter
            try:
                gm.write_gguf(os.path.join(out, "gguf", "llama-q8.gguf"), c, w)
            finally:
                gm.gguf.GGUFWriter = plain
    # A Q4_K_M-like mix (q4_K, q6_K, the q5_0 / q8_0 fallbacks, tied embeddings): hidden
    # size 256 so the k-quants have whole blocks, one small head to keep it ~60 KiB.
    c = dict(tiny_config("smollm2"), hidden_size=256, num_attention_heads=1,
             num_key_value_heads=1, head_dim=64, intermediate_size=32)
    gm.write_gguf(os.path.join(out, "gguf", "llama-q4_k_m.gguf"), c, gm.hf_weights("qmix", c),
                  quant=gm.q4_k_m)
    gm.write_quants(os.path.join(out, "gguf", "quants.gguf"))


if __name__ == "__main__":
    main()
