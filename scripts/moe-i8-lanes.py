# A lane-level model of kernels/moe_i8.cuh's data flow for one n8 tile and one
# m16 tile over three q4_K (or, with an argument, q5_K) super-blocks: each
# lane's registers as the kernel loads them (B bytes 8t .. of the qs groups,
# the fifth bits, A bytes 8t .. of x's 32-blocks, the scales decoded by lane
# (sub-block, t) and shuffled), the mma from the PTX ISA's m16n8k32 fragment
# layout, and the kernel's f32 accumulation; against Σ dx·xq·(d·sc·q) −
# dmin·m·x from ggml's block layout. Written in the thirty-third session, with
# no GPU, to check the k-permutation and the lane mapping before the kernel
# first runs:  python3 scripts/moe-i8-lanes.py [q5]   (needs numpy)
import numpy as np, struct, sys
Q5 = len(sys.argv) > 1
BB = 176 if Q5 else 144; QS = 48 if Q5 else 16
rng = np.random.default_rng(7)
K = 768; NSB = K // 256
def f16(x): return np.float16(x)
# 8 weight rows of q4_K blocks (144 bytes each)
rows = []
for n in range(8):
    b = bytearray()
    for sb in range(NSB):
        d = f16(rng.uniform(0.001, 0.02)); dmin = f16(rng.uniform(0.0, 0.02))
        b += struct.pack('<e', d) + struct.pack('<e', dmin)
        b += bytes(rng.integers(0, 256, 12, dtype=np.uint8))
        if Q5: b += bytes(rng.integers(0, 256, 32, dtype=np.uint8))
        b += bytes(rng.integers(0, 256, 128, dtype=np.uint8))
    rows.append(bytes(b))
def scale_min_ggml(j, q):
    if j < 4: return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)
def dequant(row):
    out = np.zeros(K); mins = np.zeros(K); scal = np.zeros(K); qv = np.zeros(K)
    for sb in range(NSB):
        blk = row[BB * sb:BB * sb + BB]
        d, dmin = struct.unpack('<ee', blk[:4]); sc = blk[4:16]; qs = blk[QS:]; qhb = blk[16:48]
        for j in range(4):
            s0, m0 = scale_min_ggml(2 * j, sc); s1, m1 = scale_min_ggml(2 * j + 1, sc)
            for l in range(32):
                k0 = 256 * sb + 64 * j + l; k1 = k0 + 32
                qv[k0] = qs[32 * j + l] & 0xF; qv[k1] = qs[32 * j + l] >> 4
                if Q5:
                    qv[k0] += ((qhb[l] >> (2 * j)) & 1) << 4; qv[k1] += ((qhb[l] >> (2 * j + 1)) & 1) << 4
                scal[k0] = np.float32(d) * s0; mins[k0] = np.float32(dmin) * m0
                scal[k1] = np.float32(d) * s1; mins[k1] = np.float32(dmin) * m1
    return qv, scal, mins
W = [dequant(r) for r in rows]
# x: 16 rows, quantised per 32 as moeQuantX
X = rng.standard_normal((16, K)).astype(np.float32)
X[3, 32:64] = 0
xq = np.zeros((16, K), np.int8); dx = np.zeros((16, K // 32), np.float32); sx = np.zeros_like(dx)
for r in range(16):
    for b in range(K // 32):
        v = X[r, 32 * b:32 * b + 32]; amax = np.float32(np.max(np.abs(v)))
        inv = np.float32(127) / amax if amax > 1e-30 else np.float32(0)
        xq[r, 32 * b:32 * b + 32] = np.rint(v * inv).astype(np.int8)
        dx[r, b] = amax / np.float32(127); sx[r, b] = v.sum(dtype=np.float32)
xqb = [bytes(xq[r].view(np.uint8)) for r in range(16)]
def u32(bs, off): return struct.unpack_from('<I', bs, off)[0]
def u16(bs, off): return struct.unpack_from('<H', bs, off)[0]
# the kernel's moeK4ScaleMin(h, s): h = (dm, s0, s1, s2) words of the header
def k4scale(blk, s):
    dm, s0, s1, s2 = u32(blk, 0), u32(blk, 4), u32(blk, 8), u32(blk, 12)
    lo = s < 4
    scw = (s0 & 0x3F3F3F3F) if lo else ((s2 & 0x0F0F0F0F) | ((s0 >> 2) & 0x30303030))
    mw = (s1 & 0x3F3F3F3F) if lo else (((s2 >> 4) & 0x0F0F0F0F) | ((s1 >> 2) & 0x30303030))
    sh = 8 * (s & 3)
    sc = (scw >> sh) & 0xFF; mn = (mw >> sh) & 0xFF
    d = np.frombuffer(struct.pack('<H', dm & 0xFFFF), np.float16)[0]
    dmin = np.frombuffer(struct.pack('<H', dm >> 16), np.float16)[0]
    return np.float32(d) * np.float32(sc), np.float32(dmin) * np.float32(mn)
acc = np.zeros((32, 4), np.float32)  # per lane
for sb in range(NSB):
    # per lane registers
    q = {}; dsc = {}; dmn = {}
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        blk = rows[g][BB * sb:BB * sb + BB]
        q[lane] = [(u32(blk, QS + 32 * c + 8 * t), u32(blk, QS + 32 * c + 8 * t + 4)) for c in range(4)]
        qh = (u32(blk, 16 + 8 * t), u32(blk, 20 + 8 * t)) if Q5 else (0, 0)
        q[lane].append(qh)
        dsc[lane] = []; dmn[lane] = []
        for h in range(2):
            cb = rows[2 * t + h][BB * sb:BB * sb + BB]
            a, b = k4scale(cb, g); dsc[lane].append(a); dmn[lane].append(b)
    for sub in range(8):
        regsA = {}; regsB = {}; scl = {}
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            src = 4 * sub + t
            scl[lane] = (dsc[src], dmn[src])
            w = q[lane][sub >> 1]; sh = 4 * (sub & 1)
            hh = q[lane][4]
            regsB[lane] = (((w[0] >> sh) & 0x0F0F0F0F) | (((hh[0] >> sub) & 0x01010101) << 4),
                           ((w[1] >> sh) & 0x0F0F0F0F) | (((hh[1] >> sub) & 0x01010101) << 4))
            x0 = (u32(xqb[g], 256 * sb + 32 * sub + 8 * t), u32(xqb[g], 256 * sb + 32 * sub + 8 * t + 4))
            x1 = (u32(xqb[g + 8], 256 * sb + 32 * sub + 8 * t), u32(xqb[g + 8], 256 * sb + 32 * sub + 8 * t + 4))
            regsA[lane] = (x0[0], x1[0], x0[1], x1[1])
        # the mma per the PTX layout
        A = np.zeros((16, 32), np.int64); B = np.zeros((32, 8), np.int64)
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for i in range(4):
                row = g + (8 if i in (1, 3) else 0); k0 = 4 * t + (16 if i >= 2 else 0)
                for bb in range(4):
                    v = (regsA[lane][i] >> (8 * bb)) & 0xFF
                    A[row, k0 + bb] = v - 256 if v >= 128 else v
            for i in range(2):
                k0 = 4 * t + 16 * i
                for bb in range(4):
                    B[k0 + bb, g] = (regsB[lane][i] >> (8 * bb)) & 0xFF
        D = A @ B
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            sc, mn = scl[lane]
            for i in range(4):
                r = g + (8 if i >= 2 else 0); c = 2 * t + (i & 1); h = i & 1
                f = np.float32(D[r, c])
                blkx = (dx[r, 8 * sb + sub], sx[r, 8 * sb + sub])
                acc[lane, i] = np.float32(np.float32(f * np.float32(sc[h] * blkx[0])) + acc[lane, i])
                acc[lane, i] = np.float32(acc[lane, i] - np.float32(mn[h] * blkx[1]))
Y = np.zeros((16, 8))
for lane in range(32):
    g, t = lane >> 2, lane & 3
    for i in range(4):
        Y[g + (8 if i >= 2 else 0), 2 * t + (i & 1)] = acc[lane, i]
# reference: Σ dx·xq·(d·sc·q) − (dmin·m)·x
R = np.zeros((16, 8))
for r in range(16):
    xhat = np.repeat(dx[r], 32).astype(np.float64) * xq[r]
    for n in range(8):
        qv, scal, mins = W[n]
        R[r, n] = np.sum(xhat * scal * qv) - np.sum(X[r].astype(np.float64) * mins)
err = np.max(np.abs(Y - R)) / np.max(np.abs(R))
print("max normalised error", err)
assert err < 1e-5
