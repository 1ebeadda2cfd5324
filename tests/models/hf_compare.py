#!/usr/bin/env python3
"""Teacher-forced logits of fusegraph against the `transformers` library.

    hf_compare.py [--fusegraph BIN] [--device cuda|cpu] [--out DIR]
                  [--families llama,qwen2,...] [--dtypes f32,bf16] [--tokens 64]

For each family (llama with llama3 rope_scaling, qwen2, qwen3, qwen3moe, gemma3
text with sliding_window 8) a small model with random weights is built by
transformers from a config (no download; attn_implementation="eager"), saved
with save_pretrained (safetensors) in f32 and in bf16, and run teacher-forced
over `--tokens` random tokens in PyTorch (f32 compute; for bf16 the f32 model
holds the bf16-rounded weights, the same numbers fusegraph reads). Then

    fusegraph run DIR --device D --kv-dtype f32 --all-logits --prompt-ids <first 16>
                      --teacher-forced <the rest> --dump-logits X.npy

gives one logits row per token (every prefill row: --all-logits, which --dump-logits
implies anyway; then the decode steps), compared as
the largest normalised error ||a - b|| / ||b|| over the rows (threshold 1e-3
for f32 weights, 1e-2 for bf16) and greedy-token agreement on every row whose
top-2 margin, relative to the row's RMS, exceeds that error. One summary line
per family and dtype; exit status 1 when any fails, 3 when torch or
transformers is missing.

Without a GPU (or with --device cpu) it is a smoke test on tiny configs
through the CPU reference.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
except ImportError as e:
    print(f"missing Python package: {e.name} (pip install torch transformers numpy)")
    sys.exit(3)

PROMPT = 16  # prompt rows go through prefill_16; the rest are teacher-forced decode steps


def configs(tiny):
    """transformers config objects per family; `tiny` for the CPU smoke test."""
    from transformers import (Gemma3TextConfig, LlamaConfig, Qwen2Config, Qwen3Config,
                              Qwen3MoeConfig)
    h, heads, kv, hd, ff, vocab, layers = (64, 4, 2, 16, 128, 128, 2) if tiny else \
        (256, 4, 2, 64, 512, 512, 2)
    common = dict(vocab_size=vocab, hidden_size=h, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=kv, head_dim=hd,
                  max_position_embeddings=256, tie_word_embeddings=False)
    return {
        "llama": LlamaConfig(**common, intermediate_size=ff, rms_norm_eps=1e-5,
                             rope_theta=500000.0,
                             rope_scaling=dict(rope_type="llama3", factor=8.0,
                                               low_freq_factor=1.0, high_freq_factor=4.0,
                                               original_max_position_embeddings=32)),
        "qwen2": Qwen2Config(**common, intermediate_size=ff, rms_norm_eps=1e-6,
                             rope_theta=1000000.0),
        "qwen3": Qwen3Config(**common, intermediate_size=ff, rms_norm_eps=1e-6,
                             rope_theta=1000000.0),
        "qwen3moe": Qwen3MoeConfig(**common, intermediate_size=ff, moe_intermediate_size=ff // 4,
                                   num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
                                   decoder_sparse_step=1, mlp_only_layers=[],
                                   rms_norm_eps=1e-6, rope_theta=1000000.0),
        "gemma3": Gemma3TextConfig(**dict(common, num_hidden_layers=3), intermediate_size=ff,
                                   rms_norm_eps=1e-6, sliding_window=8,
                                   layer_types=["sliding_attention", "sliding_attention",
                                                "full_attention"],
                                   rope_theta=1000000.0, rope_local_base_freq=10000.0,
                                   query_pre_attn_scalar=hd, final_logit_softcapping=None,
                                   attn_logit_softcapping=None,
                                   hidden_activation="gelu_pytorch_tanh"),
    }


def build(name, cfg, seed):
    """A model with random weights large enough for informative logits."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                             dtype=torch.float32)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1 and "norm" in pname:
                # gemma stores w and applies (1 + w); the others apply w.
                base = 0.0 if name == "gemma3" else 1.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:  # biases
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1]
                std = 1.0 if "embed" in pname else fan_in ** -0.5
                p.copy_(std * torch.randn(p.shape, generator=g))
    return model.eval()


def split_fused_experts(folder):
    """transformers 5 may save qwen3moe experts fused (mlp.experts.gate_up_proj
    [E, 2F, H], mlp.experts.down_proj [E, H, F]); returns True when it did."""
    from safetensors.torch import load_file
    path = os.path.join(folder, "model.safetensors")
    if not os.path.exists(path):
        return False
    names = load_file(path).keys()
    return any(n.endswith("experts.gate_up_proj") or n.endswith("experts.down_proj")
               for n in names)


def normalised_error(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def compare(fam, dtype, got, want, threshold):
    err = normalised_error(got, want)
    agree = needed = 0
    for a, b in zip(got, want):
        top = np.sort(b)[-2:]
        rms = float(np.sqrt(np.mean(b.astype(np.float64) ** 2)))
        if (top[1] - top[0]) / max(rms, 1e-30) > err:
            needed += 1
            agree += int(np.argmax(a) == np.argmax(b))
    ok = err <= threshold and agree == needed
    line = (f"{fam:9s} {dtype:5s} max normalised error {err:.3g} "
            f"({'<=' if err <= threshold else '>'} {threshold:.0e}), greedy {agree}/{needed} "
            f"agree where the top-2 margin exceeds it, {'ok' if ok else 'FAILED'}")
    return ok, line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fusegraph", default=shutil.which("fusegraph") or "build/fusegraph")
    ap.add_argument("--device", choices=["cuda", "cpu"],
                    default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", help="keep models and logits here (default: a temp dir)")
    ap.add_argument("--families", default="llama,qwen2,qwen3,qwen3moe,gemma3")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--size", choices=["tiny", "small"],
                    help="model configs (default: small on cuda, tiny on the CPU)")
    args = ap.parse_args()
    tiny = (args.size or ("small" if args.device == "cuda" else "tiny")) == "tiny"
    out = args.out or tempfile.mkdtemp(prefix="hf_compare.")
    os.makedirs(out, exist_ok=True)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"fusegraph {args.fusegraph} --device {args.device}, {args.tokens} tokens, "
          f"{'tiny' if tiny else 'small'} configs, files in {out}")
    cfgs = configs(tiny)
    failed = False
    lines = []
    for fam in args.families.split(","):
        cfg = cfgs[fam]
        rng = np.random.default_rng(7)
        tokens = rng.integers(0, cfg.vocab_size, size=args.tokens).tolist()
        for dtype in args.dtypes.split(","):
            tdt = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
            folder = os.path.join(out, f"{fam}-{dtype}")
            m = build(fam, cfg, seed=1234).to(tdt)
            m.save_pretrained(folder)
            if split_fused_experts(folder):
                print(f"NOTE {fam} {dtype}: transformers {transformers.__version__} saved the "
                      f"experts fused (mlp.experts.gate_up_proj); fusegraph reads per-expert "
                      f"tensors")
            # The reference: f32 compute over the (rounded) weights that were saved.
            ref = m.to(torch.float32)
            with torch.no_grad():
                want = ref(torch.tensor([tokens])).logits[0].float().numpy()
            dump = os.path.join(out, f"{fam}-{dtype}.npy")
            cmd = [args.fusegraph, "run", folder, "--device", args.device, "--kv-dtype", "f32",
                   "--ctx", str(max(128, args.tokens)), "--prefill", str(PROMPT), "--all-logits",
                   "--prompt-ids", ",".join(map(str, tokens[:PROMPT])),
                   "--teacher-forced", ",".join(map(str, tokens[PROMPT:])),
                   "--dump-logits", dump]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                failed = True
                line = (f"{fam:9s} {dtype:5s} fusegraph failed (exit {r.returncode}): "
                        f"{(r.stderr or r.stdout).strip().splitlines()[-1:]}")
                print(" ".join(cmd), file=sys.stderr)
                print(r.stdout + r.stderr, file=sys.stderr)
            else:
                got = np.load(dump)
                if got.shape != want.shape:
                    ok, line = False, (f"{fam:9s} {dtype:5s} fusegraph gave logits {got.shape}, "
                                       f"transformers {want.shape}, FAILED")
                else:
                    ok, line = compare(fam, dtype, got, want, 1e-3 if dtype == "f32" else 1e-2)
                failed |= not ok
                np.save(os.path.join(out, f"{fam}-{dtype}.ref.npy"), want)
            lines.append(line)
            print(line, flush=True)
    print("summary:")
    for line in lines:
        print("  " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
