# The lane model of scripts/moe-i8-lanes.py for q6_K (kernels/moe_i8.cuh
# MoeI8Q6K): rows of 630 bytes (K 768) staged by 4-byte words from the word
# holding each block's first byte (mis 0 or 2), read back by three words and
# funnel shifts, two parts a sub-block with the other lanes' B masked, the
# 16-weight scales shuffled; against Σ d·sc·(q − 32)·dx·xq from ggml's layout.
#   python3 scripts/moe-i8-lanes-q6k.py   (needs numpy)
import numpy as np, struct
rng = np.random.default_rng(5)
K = 768; NSB = K // 256; BB = 210
rows = []
for n in range(8):
    b = bytearray()
    for sb in range(NSB):
        b += bytes(rng.integers(0, 256, 192, dtype=np.uint8))          # ql, qh
        b += bytes(rng.integers(0, 256, 16, dtype=np.uint8))           # int8 scales
        b += struct.pack('<e', np.float16(rng.uniform(0.001, 0.01)))   # d
    rows.append(bytes(b))
# the rows laid out one after another, as in a weight (row n at 630 n)
mem = b''.join(rows) + bytes(8)
def wq(row, k):  # ggml's q6_K: value q - 32 and scale index
    sb, w = divmod(k, 256); blk = row[BB * sb:BB * sb + BB]
    h, i = divmod(w, 128); c, l = divmod(i, 32)
    ql = blk[64 * h + 32 * (c & 1) + l]; qh = blk[128 + 32 * h + l]
    q = ((ql >> 4) if c >= 2 else (ql & 0xF)) | (((qh >> (2 * c)) & 3) << 4)
    sc = np.int8(blk[192 + w // 16]).item() if blk[192 + w // 16] < 128 else blk[192 + w // 16] - 256
    d = np.float32(np.frombuffer(blk[208:210], np.float16)[0])
    return q - 32, d * np.float32(sc)
X = rng.standard_normal((16, K)).astype(np.float32)
xq = np.zeros((16, K), np.int8); dx = np.zeros((16, K // 32), np.float32)
for r in range(16):
    for b in range(K // 32):
        v = X[r, 32 * b:32 * b + 32]; amax = np.float32(np.max(np.abs(v))); inv = np.float32(127) / amax
        xq[r, 32 * b:32 * b + 32] = np.rint(v * inv); dx[r, b] = amax / np.float32(127)
xqb = [bytes(xq[r].view(np.uint8)) for r in range(16)]
def u32(bs, off): return struct.unpack_from('<I', bs, off)[0]
def minus(v, off): return (((v | 0x80808080) - off * 0x01010101) & 0xFFFFFFFF) ^ 0x80808080
def stage(n, sb):  # the kernel's word staging: from the word holding the block's first byte
    blk = 630 * n + BB * sb; mis = blk & 3; w0 = blk - mis
    out = bytearray()
    for c in range(53):
        inn = blk + BB - (w0 + 4 * c); cnt = 4 if inn >= 4 else max(inn, 0)
        out += mem[w0 + 4 * c:w0 + 4 * c + cnt] + bytes(4 - cnt)
    return bytes(out) + bytes(224 - 212), mis
def ldsat(row, mis, o):
    at = mis + o; base = at & ~3; sh = 8 * (at & 3)
    w = [u32(row, base + 4 * i) for i in range(3)]
    fs = lambda lo, hi: ((hi << 32 | lo) >> sh) & 0xFFFFFFFF
    return (fs(w[0], w[1]), fs(w[1], w[2]))
acc = np.zeros((32, 4), np.float64)
for sb in range(NSB):
    st = [stage(n, sb) for n in range(8)]
    regs = {}; dsc = {}
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        row, mis = st[g]
        ql = [ldsat(row, mis, 64 * (i >> 1) + 32 * (i & 1) + 8 * t) for i in range(4)]
        qh = [ldsat(row, mis, 128 + 32 * h + 8 * t) for h in range(2)]
        regs[lane] = (ql, qh)
        dsc[lane] = {}
        for hh in range(2):
            crow, cmis = st[2 * t + hh]
            d = np.float32(np.frombuffer(crow[cmis + 208:cmis + 210], np.float16)[0])
            for p in range(2):
                scb = crow[cmis + 192 + 2 * g + p]; sc = scb - 256 if scb >= 128 else scb
                dsc[lane][(hh, p)] = d * np.float32(sc)
    for sub in range(8):
        for p in range(2):
            A = np.zeros((16, 32), np.int64); B = np.zeros((32, 8), np.int64)
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                ql, qh = regs[lane]; h, c = sub >> 2, sub & 3
                l = ql[2 * h + (c & 1)]; q = qh[h]; ls = 4 * (c >> 1); hs = 2 * c
                b = [minus(((l[i] >> ls) & 0x0F0F0F0F) | (((q[i] >> hs) & 0x03030303) << 4), 32) for i in range(2)]
                keep = 0xFFFFFFFF if (t >> 1) == p else 0
                for i in range(2):
                    for bb in range(4):
                        v = ((b[i] & keep) >> (8 * bb)) & 0xFF; B[4 * t + 16 * i + bb, g] = v - 256 if v >= 128 else v
                off = 256 * sb + 32 * sub + 8 * t
                x0 = (u32(xqb[g], off), u32(xqb[g], off + 4)); x1 = (u32(xqb[g + 8], off), u32(xqb[g + 8], off + 4))
                ar = (x0[0], x1[0], x0[1], x1[1])
                for i in range(4):
                    row_ = g + (8 if i in (1, 3) else 0); k0 = 4 * t + (16 if i >= 2 else 0)
                    for bb in range(4):
                        v = (ar[i] >> (8 * bb)) & 0xFF; A[row_, k0 + bb] = v - 256 if v >= 128 else v
            D = A @ B
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                src = 4 * sub + t
                for i in range(4):
                    r = g + (8 if i >= 2 else 0); c_ = 2 * t + (i & 1)
                    acc[lane, i] += D[r, c_] * dsc[src][(i & 1, p)] * dx[r, 8 * sb + sub]
Y = np.zeros((16, 8))
for lane in range(32):
    g, t = lane >> 2, lane & 3
    for i in range(4): Y[g + (8 if i >= 2 else 0), 2 * t + (i & 1)] = acc[lane, i]
R = np.zeros((16, 8))
for n in range(8):
    qs = [wq(rows[n], k) for k in range(K)]
    for r in range(16):
        R[r, n] = sum(qv * s * dx[r, k // 32] * xq[r, k] for k, (qv, s) in enumerate(qs))
err = np.max(np.abs(Y - R)) / np.max(np.abs(R)); print("q6_K max normalised error", err); assert err < 1e-6
