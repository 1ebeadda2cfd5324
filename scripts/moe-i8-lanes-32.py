# The lane model of scripts/moe-i8-lanes.py for the 32-weight block types of
# kernels/moe_i8.cuh, q8_0 and q4_0 (MoeI8Q8_0, MoeI8Q4_0): a staged step's
# 2-byte-aligned bytes by three words and funnel shifts (moeLds8), q4_0's
# nibbles made signed by the borrow-free byte subtraction, the scales of
# sub-block g shuffled from lane (g, t), against Σ d·(q)·dx·xq.
#   python3 scripts/moe-i8-lanes-32.py q8_0|q4_0   (needs numpy)
import numpy as np, struct, sys
rng = np.random.default_rng(3)
T = sys.argv[1]  # q8_0 or q4_0
BB = 34 if T == 'q8_0' else 18
K = 512; NB = K // 32
rows = []
for n in range(8):
    b = bytearray()
    for j in range(NB):
        b += struct.pack('<e', np.float16(rng.uniform(0.001, 0.05)))
        b += bytes(rng.integers(0, 256, BB - 2, dtype=np.uint8))
    rows.append(bytes(b))
def wval(row, k):
    j, l = divmod(k, 32); blk = row[BB * j:BB * j + BB]
    d = np.float32(np.frombuffer(blk[:2], np.float16)[0])
    if T == 'q8_0': q = np.int8(blk[2 + l]).item() if blk[2 + l] < 128 else blk[2 + l] - 256
    else: q = ((blk[2 + l] & 0xF) if l < 16 else (blk[2 + l - 16] >> 4)) - 8
    return d, q
X = rng.standard_normal((16, K)).astype(np.float32)
xq = np.zeros((16, K), np.int8); dx = np.zeros((16, K // 32), np.float32)
for r in range(16):
    for b in range(K // 32):
        v = X[r, 32 * b:32 * b + 32]; amax = np.float32(np.max(np.abs(v))); inv = np.float32(127) / amax
        xq[r, 32 * b:32 * b + 32] = np.rint(v * inv); dx[r, b] = amax / np.float32(127)
xqb = [bytes(xq[r].view(np.uint8)) for r in range(16)]
def u32(bs, off): return struct.unpack_from('<I', bs, off)[0]
def lds8(row, p8, o):  # row: the staged step bytes (padded), p8: 8-aligned offset
    a = p8 + o
    if o & 7 == 0 or o & 3 == 0: return (u32(row, a), u32(row, a + 4))
    base = p8 + (o & ~3); w = [u32(row, base + 4 * i) for i in range(3)]
    fs = lambda lo, hi: ((hi << 32 | lo) >> 16) & 0xFFFFFFFF
    return (fs(w[0], w[1]), fs(w[1], w[2]))
def minus(v, off): return (((v | 0x80808080) - off * 0x01010101) & 0xFFFFFFFF) ^ 0x80808080
acc = np.zeros((32, 4), np.float64)
for sb in range(K // 256):
    step = [r[8 * BB * sb: 8 * BB * sb + 8 * BB] + bytes(32) for r in rows]  # staged + padding
    regs = {}; dsc = {}
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        if T == 'q8_0': regs[lane] = [lds8(step[g], 8 * t, 34 * j + 2) for j in range(8)]
        else: regs[lane] = [lds8(step[g], 8 * (t & 1), 18 * j + 2) for j in range(8)]
        dsc[lane] = [np.float32(np.frombuffer(step[2 * t + h][BB * g:BB * g + 2], np.float16)[0]) for h in range(2)]
    for sub in range(8):
        A = np.zeros((16, 32), np.int64); B = np.zeros((32, 8), np.int64)
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            w = regs[lane][sub]
            if T == 'q8_0': b = w
            else:
                sh = 4 * (t >> 1); b = (minus((w[0] >> sh) & 0x0F0F0F0F, 8), minus((w[1] >> sh) & 0x0F0F0F0F, 8))
            for i in range(2):
                for bb in range(4):
                    v = (b[i] >> (8 * bb)) & 0xFF; B[4 * t + 16 * i + bb, g] = v - 256 if v >= 128 else v
            off = 256 * sb + 32 * sub + 8 * t
            x0 = (u32(xqb[g], off), u32(xqb[g], off + 4)); x1 = (u32(xqb[g + 8], off), u32(xqb[g + 8], off + 4))
            ar = (x0[0], x1[0], x0[1], x1[1])
            for i in range(4):
                row = g + (8 if i in (1, 3) else 0); k0 = 4 * t + (16 if i >= 2 else 0)
                for bb in range(4):
                    v = (ar[i] >> (8 * bb)) & 0xFF; A[row, k0 + bb] = v - 256 if v >= 128 else v
        D = A @ B
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            sc = dsc[4 * sub + t]
            for i in range(4):
                r = g + (8 if i >= 2 else 0); c = 2 * t + (i & 1)
                acc[lane, i] += D[r, c] * sc[i & 1] * dx[r, 8 * sb + sub]
Y = np.zeros((16, 8))
for lane in range(32):
    g, t = lane >> 2, lane & 3
    for i in range(4): Y[g + (8 if i >= 2 else 0), 2 * t + (i & 1)] = acc[lane, i]
R = np.zeros((16, 8))
for r in range(16):
    for n in range(8):
        R[r, n] = sum(wval(rows[n], k)[0] * wval(rows[n], k)[1] * dx[r, k // 32] * xq[r, k] for k in range(K))
err = np.max(np.abs(Y - R)) / np.max(np.abs(R)); print(T, "max normalised error", err); assert err < 1e-6
