#!/usr/bin/env python3
"""Writes the hostile inputs of issue 10's table into fuzz/corpus/ (run by hand; the
files are checked in, so ctest replays them in every build: fuzz-replay.<target>).

    python3 fuzz/known_inputs.py [build/fuzz/seeds/plan/llama-q8-cpu.plan]

With a seed plan of the quantised tiny model (written by the fuzz-seeds test) it also
forges plan/crash-quantised-slot-last-dim-0. Those that still fail until the reader fixes land are listed in fuzz/pending.txt.
Inputs that are not files (a link to /dev/zero, --ctx 2^63-1) are not here.
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_seeds as gs  # noqa: E402 (tiny configs, gen_models)

gm = gs.gm
CORPUS = os.path.join(HERE, "corpus")


def gguf_bytes(fam, block_count=None, patch=None):
    """A tiny GGUF of `fam`; block_count overrides the metadata only."""
    c = gs.tiny_config(fam)
    w = gm.hf_weights(fam, c)

    class Writer(gm.gguf.GGUFWriter):
        def add_block_count(self, n):
            n = block_count if block_count is not None else n
            if n < 2**32:
                return super().add_block_count(n)
            self.add_uint64(gm.gguf.Keys.LLM.BLOCK_COUNT.format(arch=self.arch), n)

    plain = gm.gguf.GGUFWriter
    gm.gguf.GGUFWriter = Writer
    path = os.path.join(CORPUS, ".tmp.gguf")
    try:
        gm.write_gguf(path, c, w)
    finally:
        gm.gguf.GGUFWriter = plain
    with open(path, "rb") as f:
        b = bytearray(f.read())
    os.remove(path)
    if patch:
        patch(b)
    return bytes(b)


def set_dims(name, dims):
    """Rewrites the dims (ggml order, innermost first) of tensor `name` in place."""
    def patch(b):
        key = struct.pack("<Q", len(name)) + name.encode()
        at = b.index(key) + len(key)
        n = struct.unpack_from("<I", b, at)[0]
        assert n == len(dims)
        struct.pack_into("<%dQ" % n, b, at + 4, *dims)
    return patch


def hf_bytes(fam, **config):
    c = gs.tiny_config(fam)
    w = gm.hf_weights(fam, c)
    folder = os.path.join(CORPUS, ".tmp-hf")
    gm.write_hf(folder, c, w)
    c.update(config)
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        tensors = f.read()
    for n in os.listdir(folder):
        os.remove(os.path.join(folder, n))
    os.rmdir(folder)
    return json.dumps(c, indent=2).encode() + b"\0" + tensors


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def forge_plan(seed, name="blk.0.attn_q"):
    """The plan with slot `name` (q8_0 [32, 32]) retyped f16 [32, 0] with stored q8_0."""
    with open(seed, "rb") as f:
        b = bytearray(f.read())
    key = struct.pack("<Q", len(name)) + name.encode()
    at = b.index(key) + len(key)  # type: u8 dtype, u64 rank, i64 dims (runtime/ProgramIO.cpp)
    assert b[at] == 5 and struct.unpack_from("<Q", b, at + 1)[0] == 2
    b[at] = 1  # f16
    struct.pack_into("<q", b, at + 9 + 8, 0)
    p = at + 9 + 16 + 1 + 8 + 5 * 8  # init: kind, seed, mean, std, min, max, value
    for _ in range(2):  # init file, init name
        p += 8 + struct.unpack_from("<Q", b, p)[0]
    p += 8  # embedded size
    p += 8 + struct.unpack_from("<Q", b, p)[0]  # file
    p += 16  # offset, file size
    p += 8 + struct.unpack_from("<Q", b, p)[0]  # tensor
    assert b[p] == 0xFF  # stored: none
    b[p] = 5  # q8_0
    return bytes(b)  # the crc is stale: the plan target recomputes it


def main():
    # token_embd f32 [2^57, 32]: 2^57 * 32 * 4 bytes wraps to 0 in 64 bits.
    write("gguf", "crash-token-embd-byte-size-overflow",
          gguf_bytes("llama3", patch=set_dims("token_embd.weight", [32, 2**57])))
    write("gguf", "crash-block-count-2p31-1", gguf_bytes("llama3", block_count=2**31 - 1))
    write("gguf", "crash-gemma3-block-count-2p40", gguf_bytes("gemma3", block_count=2**40))
    write("gguf", "crash-block-count-100000", gguf_bytes("qwen3", block_count=100000))
    write("hf", "crash-head-dim-0", hf_bytes("llama3", head_dim=0))  # llama: q/k rows permuted
    write("hf", "crash-llama3-rope-head-dim-2p31", hf_bytes("llama3", head_dim=2**31))
    # Under the parser's element cap; the reference interpreter cannot hold it.
    write("fg", "crash-huge-weight",
          b"graph @decode(input %tokens: i32[1], input %positions: i32[1],\n"
          b"    weight %emb: f32[16777216, 65536] {init = normal(seed = 5, std = 1.0)}) {\n"
          b"  %logits = get_rows(%emb, %tokens) : f32[1, 65536]\n"
          b"  return %logits\n}\n")
    if len(sys.argv) > 1:
        write("plan", "crash-quantised-slot-last-dim-0", forge_plan(sys.argv[1]))


if __name__ == "__main__":
    main()
