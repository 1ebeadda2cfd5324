#!/usr/bin/env python3
"""Writes small models of every family in both formats, with the same weights.

    gen_models.py OUTDIR

For each family F: OUTDIR/F-hf/ (config.json + safetensors, as transformers'
save_pretrained lays it out), OUTDIR/F.gguf (written with the `gguf` package,
laid out like llama.cpp's convert_hf_to_gguf.py: llama q/k rows permuted,
gemma3 norms with +1 folded in, experts stacked, f32 norms, rope_freqs for
Llama-3 scaling), and OUTDIR/F.logits.bin: f32 [len(PROMPT), vocab] logits of
a float64 numpy forward pass written from the Hugging Face semantics (neox
rope on unpermuted rows, (1 + w) gemma norms, ...), independent of fusegraph.
OUTDIR/qwen3-q8_0.gguf has qwen3's layer matrices in q8_0.
OUTDIR/llama3big.gguf and OUTDIR/llama3big-hf/ (about 26 MB each, no logits) serve
the plan-size test. OUTDIR/quants.gguf holds random blocks of every block type with the gguf
package's own dequantisation beside them, plus metadata of every value type.

Exit status 3 (and a message) when numpy, gguf or safetensors is missing.
"""
import json
import math
import os
import struct
import sys
import zlib

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as QT
    from safetensors.numpy import save_file
except ImportError as e:  # the C++ tests skip with this message
    print(f"missing Python package: {e.name} (pip install gguf numpy safetensors)")
    sys.exit(3)

PROMPT = [3, 17, 42, 5, 77, 9, 31, 60]  # 8 tokens: prefill 7 + one decode step


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


# --- configurations (transformers' config.json keys) -------------------------------------

FAMILIES = {
    "llama3": dict(model_type="llama", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, intermediate_size=128, vocab_size=96,
                   rms_norm_eps=1e-5, rope_theta=500000.0, hidden_act="silu",
                   tie_word_embeddings=False,
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=64)),
    "smollm2": dict(model_type="llama", hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4, intermediate_size=96,
                    vocab_size=80, rms_norm_eps=1e-5, rope_theta=100000.0, hidden_act="silu",
                    tie_word_embeddings=True),
    "qwen2": dict(model_type="qwen2", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=128, vocab_size=96, rms_norm_eps=1e-6,
                  rope_theta=1000000.0, hidden_act="silu", tie_word_embeddings=True),
    "qwen3": dict(model_type="qwen3", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=32, intermediate_size=128, vocab_size=96,
                  rms_norm_eps=1e-6, rope_theta=1000000.0, hidden_act="silu",
                  tie_word_embeddings=False),
    "qwen3moe": dict(model_type="qwen3_moe", hidden_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                     moe_intermediate_size=32, intermediate_size=128, num_experts=4,
                     num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1,
                     mlp_only_layers=[], vocab_size=96, rms_norm_eps=1e-6,
                     rope_theta=1000000.0, hidden_act="silu", tie_word_embeddings=False),
    "gemma3": dict(model_type="gemma3_text", hidden_size=64, num_hidden_layers=7,
                   num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                   intermediate_size=128, vocab_size=96, rms_norm_eps=1e-6,
                   rope_theta=1000000.0, rope_local_base_freq=10000.0,
                   rope_scaling=dict(rope_type="linear", factor=8.0),
                   query_pre_attn_scalar=32, sliding_window=4, sliding_window_pattern=6,
                   hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
                   attn_logit_softcapping=None, tie_word_embeddings=True),
}
# Larger models (about 26 MB in each format, no logits) for the plan-size test: a plan
# refers to model weights by load-time recipe, so it stays under 1 % of the model file.
BIG = {
    "llama3big": dict(FAMILIES["llama3"], hidden_size=512, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=128, intermediate_size=1024,
                      vocab_size=2048),
}
GGUF_ARCH = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3_moe": "qwen3moe",
             "gemma3_text": "gemma3"}


def head_dim(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


# --- weights in Hugging Face layout ------------------------------------------------------

def hf_weights(fam, c):
    g = rng_for(fam)
    n, d = c["hidden_size"], head_dim(c)
    hq, hk = c["num_attention_heads"], c["num_key_value_heads"]
    gemma = c["model_type"] == "gemma3_text"
    w = {}

    def mat(name, *shape, std=0.08):
        w[name] = (g.standard_normal(shape) * std).astype(np.float32)

    def norm(name, size):
        # gemma stores w with (1 + w) applied: centre on 0; the others on 1
        w[name] = ((0.0 if gemma else 1.0) + g.standard_normal(size) * 0.1).astype(np.float32)

    mat("model.embed_tokens.weight", c["vocab_size"], n, std=0.5 if not gemma else 0.1)
    for il in range(c["num_hidden_layers"]):
        p = f"model.layers.{il}."
        norm(p + "input_layernorm.weight", n)
        mat(p + "self_attn.q_proj.weight", hq * d, n)
        mat(p + "self_attn.k_proj.weight", hk * d, n)
        mat(p + "self_attn.v_proj.weight", hk * d, n)
        mat(p + "self_attn.o_proj.weight", n, hq * d)
        if c["model_type"] == "qwen2":
            mat(p + "self_attn.q_proj.bias", hq * d, std=0.1)
            mat(p + "self_attn.k_proj.bias", hk * d, std=0.1)
            mat(p + "self_attn.v_proj.bias", hk * d, std=0.1)
        if c["model_type"] in ("qwen3", "qwen3_moe", "gemma3_text"):
            norm(p + "self_attn.q_norm.weight", d)
            norm(p + "self_attn.k_norm.weight", d)
        norm(p + "post_attention_layernorm.weight", n)
        if gemma:
            norm(p + "pre_feedforward_layernorm.weight", n)
            norm(p + "post_feedforward_layernorm.weight", n)
        if c["model_type"] == "qwen3_moe":
            mat(p + "mlp.gate.weight", c["num_experts"], n, std=0.3)
            f = c["moe_intermediate_size"]
            for e in range(c["num_experts"]):
                mat(p + f"mlp.experts.{e}.gate_proj.weight", f, n)
                mat(p + f"mlp.experts.{e}.up_proj.weight", f, n)
                mat(p + f"mlp.experts.{e}.down_proj.weight", n, f)
        else:
            f = c["intermediate_size"]
            mat(p + "mlp.gate_proj.weight", f, n)
            mat(p + "mlp.up_proj.weight", f, n)
            mat(p + "mlp.down_proj.weight", n, f)
    norm("model.norm.weight", n)
    if not c["tie_word_embeddings"]:
        mat("lm_head.weight", c["vocab_size"], n)
    return w


def write_hf(folder, c, w, shards=1):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    names = sorted(w)
    if shards == 1:
        save_file({k: w[k] for k in names}, os.path.join(folder, "model.safetensors"),
                  metadata={"format": "pt"})
        return
    weight_map = {}
    per = (len(names) + shards - 1) // shards
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = names[s * per:(s + 1) * per]
        save_file({k: w[k] for k in part}, os.path.join(folder, fn), metadata={"format": "pt"})
        weight_map.update({k: fn for k in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


# --- GGUF, the way convert_hf_to_gguf.py writes it ----------------------------------------

def permute(weights, n_head, n_head_kv):  # convert_hf_to_gguf.py, LlamaModel.permute
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def llama3_factors(c):  # convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors
    rs = c["rope_scaling"]
    base, dim = c["rope_theta"], head_dim(c)
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wl, high_wl = old / low, old / high
    out = []
    for freq in freqs:
        wl = 2 * math.pi / freq
        if wl < high_wl:
            out.append(1)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


HF_TO_GGUF = [("input_layernorm", "attn_norm"), ("self_attn.q_proj", "attn_q"),
              ("self_attn.k_proj", "attn_k"), ("self_attn.v_proj", "attn_v"),
              ("self_attn.o_proj", "attn_output"), ("self_attn.q_norm", "attn_q_norm"),
              ("self_attn.k_norm", "attn_k_norm"), ("mlp.gate_proj", "ffn_gate"),
              ("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down"),
              ("mlp.gate", "ffn_gate_inp")]


def gguf_name(hf, gemma):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    il, rest = parts[2], ".".join(parts[3:])
    mapping = dict(HF_TO_GGUF)
    if gemma:
        mapping.update({"post_attention_layernorm": "post_attention_norm",
                        "pre_feedforward_layernorm": "ffn_norm",
                        "post_feedforward_layernorm": "post_ffw_norm"})
    else:
        mapping["post_attention_layernorm"] = "ffn_norm"
    base, suffix = rest.rsplit(".", 1)
    return f"blk.{il}.{mapping[base]}.{suffix}"


def write_gguf(path, c, w, quant=None):
    arch = GGUF_ARCH[c["model_type"]]
    gemma = arch == "gemma3"
    wr = gguf.GGUFWriter(path, arch)
    wr.add_name("fusegraph test " + arch)
    wr.add_context_length(2048)
    wr.add_embedding_length(c["hidden_size"])
    wr.add_block_count(c["num_hidden_layers"])
    wr.add_head_count(c["num_attention_heads"])
    wr.add_head_count_kv(c["num_key_value_heads"])
    wr.add_key_length(head_dim(c))
    wr.add_value_length(head_dim(c))
    wr.add_layer_norm_rms_eps(c["rms_norm_eps"])
    wr.add_rope_freq_base(c["rope_theta"])
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    if arch == "qwen3moe":
        wr.add_feed_forward_length(c["intermediate_size"])
        wr.add_expert_count(c["num_experts"])
        wr.add_expert_used_count(c["num_experts_per_tok"])
        wr.add_expert_feed_forward_length(c["moe_intermediate_size"])
    else:
        wr.add_feed_forward_length(c["intermediate_size"])
    if gemma:
        wr.add_sliding_window(c["sliding_window"])
        wr.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        wr.add_rope_scaling_factor(c["rope_scaling"]["factor"])
    wr.add_tokenizer_model("gpt2")
    wr.add_token_list([f"<t{i}>" for i in range(c["vocab_size"])])
    tensors = {}
    stacked = {}
    for hf, t in w.items():
        if ".mlp.experts." in hf:  # model.layers.L.mlp.experts.E.gate_proj.weight
            parts = hf.split(".")
            il, e, kind = parts[2], int(parts[5]), parts[6].split("_")[0]
            stacked.setdefault(f"blk.{il}.ffn_{kind}_exps.weight", {})[e] = t
            continue
        name = gguf_name(hf, gemma)
        if arch == "llama" and name.endswith("attn_q.weight"):
            t = permute(t, c["num_attention_heads"], c["num_attention_heads"])
        elif arch == "llama" and name.endswith("attn_k.weight"):
            t = permute(t, c["num_attention_heads"], c["num_key_value_heads"])
        if gemma and name.endswith("norm.weight"):
            t = t + 1  # Gemma3Model.modify_tensors
        tensors[name] = t
    for name, experts in stacked.items():
        tensors[name] = np.stack([experts[e] for e in sorted(experts)])
    if arch == "llama" and "rope_scaling" in c:
        tensors["rope_freqs.weight"] = llama3_factors(c)
    for name in sorted(tensors, key=lambda n: (n.split(".")[0] != "token_embd", n)):
        t = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if quant is not None and name.startswith("blk.") and t.ndim == 2:
            wr.add_tensor(name, gguf.quants.quantize(t, quant), raw_dtype=quant)
        else:
            wr.add_tensor(name, t)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


# --- the reference forward pass (Hugging Face semantics, float64) --------------------------

def forward(c, w, tokens):
    mt = c["model_type"]
    gemma = mt == "gemma3_text"
    n, d = c["hidden_size"], head_dim(c)
    hq, hk = c["num_attention_heads"], c["num_key_value_heads"]
    eps = c["rms_norm_eps"]
    W = {k: v.astype(np.float64) for k, v in w.items()}
    T = len(tokens)
    pos = np.arange(T, dtype=np.float64)

    def rms(x, name):
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
        return y * ((1 + W[name]) if gemma else W[name])

    def inv_freq(theta, layer_global=True):
        inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
        rs = c.get("rope_scaling")
        if rs and rs["rope_type"] == "llama3":
            factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
            old = rs["original_max_position_embeddings"]
            wl = 2 * math.pi / inv
            smooth = (old / wl - lo) / (hi - lo)
            scaled = np.where(wl > old / lo, inv / factor, inv)
            mid = ~(wl < old / hi) & ~(wl > old / lo)
            inv = np.where(mid, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
        if rs and rs["rope_type"] == "linear" and layer_global:
            inv = inv / rs["factor"]
        return inv

    def rope(x, inv):  # neox (rotate_half) on [T, H, d]
        ang = pos[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x1, x2 = x[..., :d // 2], x[..., d // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def lin(x, name):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    x = W["model.embed_tokens.weight"][tokens]
    if gemma:
        x = x * math.sqrt(n)
    for il in range(c["num_hidden_layers"]):
        p = f"model.layers.{il}."
        sliding = gemma and (il + 1) % c["sliding_window_pattern"] != 0
        h = rms(x, p + "input_layernorm.weight")
        q = lin(h, p + "self_attn.q_proj").reshape(T, hq, d)
        k = lin(h, p + "self_attn.k_proj").reshape(T, hk, d)
        v = lin(h, p + "self_attn.v_proj").reshape(T, hk, d)
        if p + "self_attn.q_norm.weight" in W:
            q = rms(q, p + "self_attn.q_norm.weight")
            k = rms(k, p + "self_attn.k_norm.weight")
        theta = c["rope_local_base_freq"] if sliding else c["rope_theta"]
        inv = inv_freq(theta, layer_global=not sliding)
        q, k = rope(q, inv), rope(k, inv)
        scale = (c["query_pre_attn_scalar"] ** -0.5) if gemma else d ** -0.5
        out = np.zeros((T, hq, d))
        for t in range(T):
            for hh in range(hq):
                kv = hh // (hq // hk)
                js = [j for j in range(t + 1)
                      if not sliding or j > t - c["sliding_window"]]
                s = np.array([scale * q[t, hh] @ k[j, kv] for j in js])
                pr = np.exp(s - s.max())
                pr /= pr.sum()
                out[t, hh] = sum(pr[i] * v[j, kv] for i, j in enumerate(js))
        a = lin(out.reshape(T, hq * d), p + "self_attn.o_proj")
        if gemma:
            a = rms(a, p + "post_attention_layernorm.weight")
        x = x + a
        h = rms(x, p + ("pre_feedforward_layernorm.weight" if gemma
                        else "post_attention_layernorm.weight"))
        if mt == "qwen3_moe":
            logits = h @ W[p + "mlp.gate.weight"].T
            probs = np.exp(logits - logits.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            m = np.zeros_like(h)
            for t in range(T):
                top = np.argsort(-probs[t], kind="stable")[:c["num_experts_per_tok"]]
                wts = probs[t, top]
                if c["norm_topk_prob"]:
                    wts = wts / wts.sum()
                for e, we in zip(top, wts):
                    q_ = f"{p}mlp.experts.{e}."
                    g_ = h[t] @ W[q_ + "gate_proj.weight"].T
                    u_ = h[t] @ W[q_ + "up_proj.weight"].T
                    m[t] += we * ((g_ / (1 + np.exp(-g_)) * u_) @ W[q_ + "down_proj.weight"].T)
        else:
            g_ = lin(h, p + "mlp.gate_proj")
            u_ = lin(h, p + "mlp.up_proj")
            if gemma:
                act = 0.5 * g_ * (1 + np.tanh(math.sqrt(2 / math.pi) * (g_ + 0.044715 * g_ ** 3)))
            else:
                act = g_ / (1 + np.exp(-g_))
            m = lin(act * u_, p + "mlp.down_proj")
        if gemma:
            m = rms(m, p + "post_feedforward_layernorm.weight")
        x = x + m
    x = rms(x, "model.norm.weight")
    head = W["model.embed_tokens.weight"] if c["tie_word_embeddings"] else W["lm_head.weight"]
    return x @ head.T


# --- quantised blocks and metadata of every type ------------------------------------------

def random_blocks(qt, n_blocks, g):
    elems, size = gguf.GGML_QUANT_SIZES[qt]
    raw = g.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    scale_at = {QT.Q8_0: [0], QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q4_K: [0, 2], QT.Q6_K: [208]}[qt]
    for off in scale_at:
        d = (g.uniform(0.005, 0.05, size=n_blocks)).astype(np.float16)
        raw[:, off:off + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return raw


def write_quants(path):
    g = np.random.default_rng(7)
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_custom_alignment(64)
    wr.add_uint8("test.u8", 200)
    wr.add_int8("test.i8", -100)
    wr.add_uint16("test.u16", 60000)
    wr.add_int16("test.i16", -30000)
    wr.add_uint32("test.u32", 4000000000)
    wr.add_int32("test.i32", -2000000000)
    wr.add_float32("test.f32", 0.25)
    wr.add_bool("test.bool", True)
    wr.add_string("test.string", "héllo")
    wr.add_uint64("test.u64", 2**63 + 5)
    wr.add_int64("test.i64", -(2**40))
    wr.add_float64("test.f64", -1.5e-300)
    wr.add_array("test.ints", [1, -2, 3])
    wr.add_array("test.strings", ["a", "", "ccc"])
    wr.add_array("test.floats", [0.5, -2.0])
    rows = 3
    for qt in (QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q4_K, QT.Q6_K):
        elems, size = gguf.GGML_QUANT_SIZES[qt]
        per_row = 2
        raw = random_blocks(qt, rows * per_row, g).reshape(rows, per_row * size)
        ref = gguf.quants.dequantize(raw, qt).astype(np.float32)
        assert ref.shape == (rows, per_row * elems)
        name = qt.name.lower()
        wr.add_tensor(name, raw, raw_dtype=qt)
        wr.add_tensor(name + ".ref", ref)
    f16 = g.standard_normal((2, 8)).astype(np.float16)
    wr.add_tensor("f16", f16)
    wr.add_tensor("f16.ref", f16.astype(np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for fam, c in FAMILIES.items():
        w = hf_weights(fam, c)
        write_hf(os.path.join(out, fam + "-hf"), c, w, shards=2 if fam == "qwen3moe" else 1)
        write_gguf(os.path.join(out, fam + ".gguf"), c, w)
        forward(c, w, PROMPT).astype(np.float32).tofile(os.path.join(out, fam + ".logits.bin"))
    # qwen3 with q8_0 layer matrices: read as stored by the GPU kernels (no convert step).
    write_gguf(os.path.join(out, "qwen3-q8_0.gguf"), FAMILIES["qwen3"], hf_weights("qwen3", FAMILIES["qwen3"]),
               quant=QT.Q8_0)
    for fam, c in BIG.items():
        w = hf_weights(fam, c)
        write_hf(os.path.join(out, fam + "-hf"), c, w)
        write_gguf(os.path.join(out, fam + ".gguf"), c, w)
    write_quants(os.path.join(out, "quants.gguf"))
    with open(os.path.join(out, "prompt.txt"), "w") as f:
        f.write(",".join(map(str, PROMPT)))


if __name__ == "__main__":
    main()
