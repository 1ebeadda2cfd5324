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
OUTDIR/qwen3-q8_0.gguf has qwen3's layer matrices in q8_0. OUTDIR/qmix.gguf is a
llama with tied embeddings quantised as llama.cpp's Q4_K_M (q4_K, q6_K, and the
q5_0 / q8_0 fallbacks for rows that are not whole 256-blocks), OUTDIR/qmix-f32.gguf
the same model with those tensors' dequantised values in f32.
OUTDIR/llama3big.gguf and OUTDIR/llama3big-hf/ (about 26 MB each, no logits) serve
the plan-size test. OUTDIR/quants.gguf holds random blocks of every block type with the gguf
package's own dequantisation beside them, values the gguf package quantised (the types it
can quantise) with their dequantisation, plus metadata of every value type.

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


def write_gguf(path, c, w, quant=None, dequantised=False):
    """quant: None (all f32), a type for the layers' matrices, or a function
    (gguf name, f32 tensor, config) -> type or None; dequantised: write the
    f32 values of those quantised tensors instead (an f32 twin)."""
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
        if callable(quant):
            qt = quant(name, t, c)
        elif quant is not None and name.startswith("blk.") and t.ndim == 2:
            qt = quant
        else:
            qt = None
        if qt is None:
            wr.add_tensor(name, t)
        elif dequantised:  # the f32 twin: the values the quantised file decodes to
            wr.add_tensor(name, gguf.quants.dequantize(quantize(t, qt), qt).astype(np.float32))
        else:
            wr.add_tensor(name, quantize(t, qt), raw_dtype=qt)
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


# --- quantisers the gguf package lacks (q4_K, q6_K), and llama.cpp's Q4_K_M mix -----------

def quantize_q4_k(x):
    """Round to nearest per block, ggml's block_q4_K layout (d, dmin, 12 scale bytes, qs)."""
    n = x.shape[0]
    x = x.reshape(n, 8, 32).astype(np.float32)
    lo = np.minimum(x.min(-1), 0)
    scale, minv = (x.max(-1) - lo) / 15, -lo
    d = (scale.max(-1) / 63).astype(np.float16)
    dmin = (minv.max(-1) / 63).astype(np.float16)
    with np.errstate(divide="ignore", invalid="ignore"):
        d32, m32 = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
        sc = np.where(d32 == 0, 0, np.rint(scale / d32)).clip(0, 63).astype(np.uint8)
        m = np.where(m32 == 0, 0, np.rint(minv / m32)).clip(0, 63).astype(np.uint8)
        dl, ml = (d32 * sc)[..., None], (m32 * m)[..., None]
        q = np.where(dl == 0, 0, np.rint((x + ml) / dl)).clip(0, 15).astype(np.uint8)
    q = q.reshape(n, 4, 2, 32)
    qs = (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(n, 128)
    s = np.concatenate([sc[:, :4] | ((sc[:, 4:] >> 4) << 6), m[:, :4] | ((m[:, 4:] >> 4) << 6),
                        (sc[:, 4:] & 0xF) | ((m[:, 4:] & 0xF) << 4)], axis=-1)
    return np.concatenate([d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2),
                           s.astype(np.uint8), qs], axis=-1)


def quantize_q6_k(x):
    """Round to nearest per block, ggml's block_q6_K layout (ql, qh, int8 scales, d)."""
    n = x.shape[0]
    x = x.reshape(n, 16, 16).astype(np.float32)
    ext = np.take_along_axis(x, np.abs(x).argmax(-1)[..., None], -1)[..., 0]
    scale = ext / -32
    big = np.take_along_axis(scale, np.abs(scale).argmax(-1)[:, None], -1)
    d = (big / -128).astype(np.float16)
    with np.errstate(divide="ignore", invalid="ignore"):
        d32 = d.astype(np.float32)
        ls = np.where(d32 == 0, 0, np.rint(scale / d32)).clip(-128, 127)
        dl = (d32 * ls)[..., None]
        q = (np.where(dl == 0, 0, np.rint(x / dl)).clip(-32, 31) + 32).astype(np.uint8)
    q = q.reshape(n, 2, 4, 32)  # element 128h + 32k + l
    ql = np.concatenate([(q[:, :, 0] & 0xF) | ((q[:, :, 2] & 0xF) << 4),
                         (q[:, :, 1] & 0xF) | ((q[:, :, 3] & 0xF) << 4)], axis=-1)
    qh = sum((q[:, :, k] >> 4) << (2 * k) for k in range(4)).astype(np.uint8)
    return np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64),
                           ls.astype(np.int8).view(np.uint8), d.view(np.uint8).reshape(n, 2)],
                          axis=-1)


def quantize(t, qt):
    """Rows of t in type qt (the gguf package's quantiser where it has one)."""
    if qt in (QT.Q4_K, QT.Q6_K):
        rows = t.reshape(-1, t.shape[-1])
        blocks = rows.reshape(-1, 256)
        raw = (quantize_q4_k if qt == QT.Q4_K else quantize_q6_k)(blocks)
        size = gguf.GGML_QUANT_SIZES[qt][1]
        out = raw.reshape(*t.shape[:-1], t.shape[-1] // 256 * size)
        back = gguf.quants.dequantize(out, qt)
        err = np.linalg.norm(back - t) / np.linalg.norm(t)
        assert err < 0.1, f"{qt.name} quantiser: error {err}"  # a layout slip shows here
        return out
    return gguf.quants.quantize(t, qt)


def use_more_bits(i, n):  # llama-quant.cpp
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


FALLBACK = {QT.Q4_K: QT.Q5_0, QT.Q6_K: QT.Q8_0}  # llama-quant.cpp, rows not whole 256-blocks


def q4_k_m(name, t, c):
    """llama.cpp's Q4_K_M: q4_K; q6_K for the output (token_embd when tied)
    and for attn_v / ffn_down of the layers use_more_bits picks; a tensor
    whose rows are not whole 256-blocks takes the fallback type."""
    if t.ndim < 2 or "norm" in name:
        return None
    qt = QT.Q4_K
    n = c["num_hidden_layers"]
    if name == "output.weight" or (name == "token_embd.weight" and c["tie_word_embeddings"]):
        qt = QT.Q6_K
    elif name.startswith("blk.") and name.split(".")[2] in ("attn_v", "ffn_down", "ffn_down_exps"):
        if use_more_bits(int(name.split(".")[1]), n):
            qt = QT.Q6_K
    if t.shape[-1] % 256:
        qt = FALLBACK[qt]
    return qt


# A llama with tied embeddings whose matrices are whole 256-blocks, but for
# ffn_down (rows of 288): Q4_K_M gives q4_K, q6_K (token_embd, attn_v and
# ffn_down of layer 1), q5_0 and q8_0 (the fallbacks of ffn_down).
QMIX = dict(model_type="llama", hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=288, vocab_size=96, rms_norm_eps=1e-5,
            rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=True)


# --- quantised blocks and metadata of every type ------------------------------------------

ALL_QUANTS = (QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K,
              QT.Q6_K, QT.IQ4_NL, QT.IQ4_XS)


def random_blocks(qt, n_blocks, g):
    elems, size = gguf.GGML_QUANT_SIZES[qt]
    raw = g.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    scale_at = {QT.Q8_0: [0], QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q4_K: [0, 2], QT.Q6_K: [208],
                QT.Q5_0: [0], QT.Q5_1: [0, 2], QT.Q2_K: [80, 82], QT.Q3_K: [108],
                QT.Q5_K: [0, 2], QT.IQ4_NL: [0], QT.IQ4_XS: [0]}[qt]
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
    for qt in ALL_QUANTS:
        elems, size = gguf.GGML_QUANT_SIZES[qt]
        per_row = 2
        raw = random_blocks(qt, rows * per_row, g).reshape(rows, per_row * size)
        ref = gguf.quants.dequantize(raw, qt).astype(np.float32)
        assert ref.shape == (rows, per_row * elems)
        name = qt.name.lower()
        wr.add_tensor(name, raw, raw_dtype=qt)
        wr.add_tensor(name + ".ref", ref)
    # Values the gguf package quantised itself (the types it has a quantiser for).
    for qt in (QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0):
        x = (g.standard_normal((rows, 64)) * 0.02).astype(np.float32)
        raw = gguf.quants.quantize(x, qt)
        name = qt.name.lower() + ".quantised"
        wr.add_tensor(name, raw, raw_dtype=qt)
        wr.add_tensor(name + ".ref", gguf.quants.dequantize(raw, qt).astype(np.float32))
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
    # A Q4_K_M-like mix with tied embeddings and fallback types, and its f32 twin.
    w = hf_weights("qmix", QMIX)
    write_gguf(os.path.join(out, "qmix.gguf"), QMIX, w, quant=q4_k_m)
    write_gguf(os.path.join(out, "qmix-f32.gguf"), QMIX, w, quant=q4_k_m, dequantised=True)
    with open(os.path.join(out, "prompt.txt"), "w") as f:
        f.write(",".join(map(str, PROMPT)))


if __name__ == "__main__":
    main()
