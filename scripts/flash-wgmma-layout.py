#!/usr/bin/env python3
"""The flash prefill's wgmma form (kernels/attention_prefill.cuh, C::kWgmma):
checks, without a GPU, that the shared-memory layout its cp.async staging
writes and the matrix descriptors its wgmmas pass describe the K and V
operands the math needs, by the PTX ISA's canonical no-swizzle layouts
(in elements, T = 8 16-bit elements = 16 bytes):
  K-major:  ((8,m),(T,2k)):((1T,SBO),(1,LBO))    row (M/N) r, column (K) k
  MN-major: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))  column (M/N) n, row (K) k
  python3 scripts/flash-wgmma-layout.py
"""
import numpy as np

BN, T8 = 64, 8


def stage(rows, E, NT=128):
    """smem (element offset -> (row, element)) as flashStageAsync<Core> writes it."""
    U = E // 8
    smem = {}
    for i in range(rows * U):
        r = (i & 7) + 8 * (i // (8 * U))
        c = (i >> 3) % U
        base = ((r >> 3) * U + c) * 64 + (r & 7) * 8
        for e in range(8):
            assert base + e not in smem
            smem[base + e] = (r, 8 * c + e)
    assert len(smem) == rows * E
    return smem


def kmajor(smem, start, lbo, sbo, N, K=16):
    """B[k][n] of a K-major operand (element offsets; lbo / sbo in bytes)."""
    out = {}
    for n in range(N):
        for k in range(K):
            off = start + (n % 8) * T8 + (n // 8) * (sbo // 2) + (k % T8) + (k // T8) * (lbo // 2)
            out[(k, n)] = smem[off]
    return out


def mnmajor(smem, start, lbo, sbo, N, K=16):
    out = {}
    for n in range(N):
        for k in range(K):
            off = start + (n % T8) + (n // T8) * (sbo // 2) + (k % 8) * T8 + (k // 8) * (lbo // 2)
            out[(k, n)] = smem[off]
    return out


def check(D, Dv):
    K = stage(BN, D)
    V = stage(BN, Dv)
    # S = q . K^T: ks-th step, B[k][n] = K[key n][d 16ks + k]
    for ks in range(D // 16):
        b = kmajor(K, 128 * ks, 128, D // 8 * 128, N=BN)
        for (k, n), (r, e) in b.items():
            assert (r, e) == (n, 16 * ks + k), (D, ks, k, n, r, e)
    # O += P . V: kk-th 16 keys, hb-th 64 columns, B[k][n] = V[key 16kk + k][dv 64hb + n]
    for kk in range(BN // 16):
        for hb in range(Dv // 64):
            b = mnmajor(V, (2 * kk * (Dv // 8) + 8 * hb) * 64, Dv // 8 * 128, 128, N=64)
            for (k, n), (r, e) in b.items():
                assert (r, e) == (16 * kk + k, 64 * hb + n), (Dv, kk, hb, k, n, r, e)
    # A warp's 32 copies (threads 32w .. 32w + 31 of one pass) land in 512
    # contiguous bytes: one 16-byte slot each, no two in one slot.
    U = D // 8
    for w in range(4):
        offs = sorted((((r >> 3) * U + c) * 64 + (r & 7) * 8)
                      for i in range(32 * w, 32 * w + 32)
                      for r, c in [((i & 7) + 8 * (i // (8 * U)), (i >> 3) % U)])
        assert offs == list(range(offs[0], offs[0] + 32 * 8, 8)), offs
    print(f"D {D} Dv {Dv}: every K and V element where the descriptors read it")


for D, Dv in [(128, 128), (64, 64), (80, 64), (128, 64), (64, 128), (48, 192)]:
    check(D, Dv)
