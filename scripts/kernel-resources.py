#!/usr/bin/env python3
"""Registers, stack frame (spills) and static shared memory of every kernel in
an NVRTC kernel cache folder, read from the cubins' ELF sections: what ptxas
decided, without a GPU (this machine has no cuobjdump). Typical use:

  rm -rf /tmp/fgk && FG_KERNEL_CACHE=/tmp/fgk \\
    build/bench/fg_bench_kernels --compile-only --benchmark_filter='/q4_k/T1'
  python3 scripts/kernel-resources.py /tmp/fgk

A frame above 0 bytes usually means spilled registers (local memory).
"""
import pathlib
import struct
import sys

EIATTR_FRAME_SIZE, EIATTR_REGCOUNT = 0x11, 0x2F


def sections(elf):
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    entsize, num, strndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * entsize) for i in range(num)]
    names_at = heads[strndx][4]
    for h in heads:
        end = elf.index(b"\0", names_at + h[0])
        yield elf[names_at + h[0]:end].decode(), h[4], h[5]  # name, offset, size


def attributes(elf, off, size):
    """The (attribute, symbol index, value) triples of a .nv.info section
    (its EIFMT_SVAL entries: u16 size, u32 symbol, u32 value)."""
    p = off
    while p + 4 <= off + size:
        fmt, attr = elf[p], elf[p + 1]
        if fmt == 4:
            n = struct.unpack_from("<H", elf, p + 2)[0]
            if n >= 8:
                sym, value = struct.unpack_from("<II", elf, p + 4)
                yield attr, sym, value
            p += 4 + n
        elif fmt == 3:  # EIFMT_HVAL
            p += 4
        elif fmt in (1, 2):
            p += fmt + 1
        else:
            break


def symbols(elf, secs):
    """Symbol index -> name, from .symtab and .strtab."""
    tab = next((s for s in secs if s[0] == ".symtab"), None)
    strs = next((s for s in secs if s[0] == ".strtab"), None)
    out = {}
    if not tab or not strs:
        return out
    for i in range(tab[2] // 24):
        st_name = struct.unpack_from("<I", elf, tab[1] + 24 * i)[0]
        end = elf.index(b"\0", strs[1] + st_name)
        out[i] = elf[strs[1] + st_name:end].decode()
    return out


def kernels(path):
    data = path.read_bytes()
    at = data.find(b"\x7fELF")
    if at < 0:
        return
    elf = data[at:]
    secs = list(sections(elf))
    syms = symbols(elf, secs)
    regs, frame, shared, names = {}, {}, {}, []
    for name, off, size in secs:
        if name.startswith(".text."):
            names.append(name[6:])
        elif name.startswith(".nv.shared."):
            shared[name[11:]] = size
        elif name == ".nv.info" or name.startswith(".nv.info."):
            for attr, sym, value in attributes(elf, off, size):
                kernel = name[9:] if name.startswith(".nv.info.") else syms.get(sym, "?")
                if attr == EIATTR_REGCOUNT:
                    regs[kernel] = value
                elif attr == EIATTR_FRAME_SIZE:
                    frame[kernel] = value
    for k in names:
        yield k, regs.get(k, -1), frame.get(k, -1), shared.get(k, 0)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = []
    for f in sorted(pathlib.Path(sys.argv[1]).rglob("*.fgk")):
        rows.extend(kernels(f))
    print(f"{'kernel':<48} {'regs':>5} {'frame B':>8} {'shared B':>9}")
    for k, r, fr, sh in sorted(rows):
        print(f"{k:<48} {r:>5} {fr:>8} {sh:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
