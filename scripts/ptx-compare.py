#!/usr/bin/env python3
"""Whether two fusegraph builds generate the same kernels, without a GPU.

    python3 scripts/ptx-compare.py OLD_FUSEGRAPH NEW_FUSEGRAPH [MODEL ...]

Compiles each MODEL (default: demo, w-tiny, w-moe-12, w-dense, w-dense-q4_k,
prefill buckets 64 and 512, a cache of 16384 rows) with both binaries into
empty kernel caches and compares the PTX of every kernel, with the names that
depend on the source text (kernel hashes, NVRTC's internal file names) and the
parameter structs' constants' global declarations taken out. Prints the counts and the kernel
families found on one side only; exits 1 when they differ. A refactor of a
kernel template or an emitter that leaves every body the same needs no GPU
run to keep the measured behaviour; one that changes a body does.
"""
import collections
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

MODELS = ["demo", "w-tiny", "w-moe-12", "w-dense", "w-dense-q4_k"]


def bodies(cache):
    """Normalised PTX digest -> count, and digest -> kernel family."""
    count, family = collections.Counter(), {}
    for root, _, files in os.walk(cache):
        for name in files:
            blob = open(os.path.join(root, name), "rb").read()
            if blob[:8] != b"FGKCACH1":
                continue
            ptx_size = struct.unpack("<Q", blob[16:24])[0]
            text = blob[len(blob) - ptx_size:].decode("latin1").rstrip("\0")
            m = re.search(r"\.entry (fg_\w+?)_[0-9a-f]+(?:_tf)?\(", text)
            lines = []
            for line in text.splitlines():
                s = line.strip()
                if not s or s.startswith("//"):
                    continue
                # The parameter structs' constants (Cfg, CfgD, Seg0, Seg0D, ...)
                # and fg's: declarations only, read as immediates.
                if s.startswith(".global") and re.search(r"_ZN(\d+(Cfg|Seg\d)|2fg)", s):
                    continue
                line = re.sub(r"_ZZN\d+_INTERNAL_\w+?_cu_[0-9a-f]+", "INTERNAL", line)
                lines.append(re.sub(r"fg_\w+?_[0-9a-f]{6,16}", "KERNEL", line))
            digest = hashlib.sha1("\n".join(lines).encode()).hexdigest()
            count[digest] += 1
            family[digest] = m.group(1) if m else "?"
    return count, family


def compile_all(binary, models, work, tag):
    cache = os.path.join(work, "cache-" + tag)
    env = dict(os.environ, FG_KERNEL_CACHE=cache)
    for model in models:
        out = os.path.join(work, tag + "-" + model + ".plan")
        r = subprocess.run([binary, "compile", model, "-o", out, "--prefill", "64,512", "--ctx",
                            "16384"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"ptx-compare: {binary} compile {model} failed:\n{r.stderr}")
    return bodies(cache)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old_bin, new_bin, models = sys.argv[1], sys.argv[2], sys.argv[3:] or MODELS
    with tempfile.TemporaryDirectory() as work:
        old, old_fam = compile_all(old_bin, models, work, "old")
        new, new_fam = compile_all(new_bin, models, work, "new")
    same = sum((old & new).values())
    print(f"kernels: old {sum(old.values())}, new {sum(new.values())}, same PTX {same}")
    for digest in old - new:
        print("only old:", old_fam[digest])
    for digest in new - old:
        print("only new:", new_fam[digest])
    sys.exit(0 if old == new else 1)


if __name__ == "__main__":
    main()
