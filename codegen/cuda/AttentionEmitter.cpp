//===- AttentionEmitter.cpp - flash-decoding attention ---------------------===//
//
// attention(q [T, Hq, D], k [ctx, Hkv, D], v [ctx, Hkv, Dv], pos [T], sinks [Hq]?)
// in two launches:
//   1. split: grid (T·S, Hq); block (t, s, h) covers key rows
//      [s·chunk, (s+1)·chunk) ∩ visible(t), where visible(t) = [lo, pos[t]]
//      (lo = pos[t] − window + 1 with a window, else 0), read from device
//      memory so one graph serves every step; blocks past the live rows exit
//      at once. Each warp runs an online softmax over its keys (lane-parallel
//      dot products); the block merges its warps and writes (max, sum, acc[Dv])
//      to scratch.
//   2. combine: grid (T, Hq); merges the S partials (and the sink logit, which
//      only adds to the denominator) and writes out[t, h, :].
// S is sized from ctx, T·Hq and the SM count (16 blocks per SM, chunks of at
// least 32 keys).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace fg::cuda::detail {
namespace {
constexpr unsigned kWarps = 4;
constexpr int64_t kMaxHeadDim = 512;
} // namespace

llvm::Expected<std::vector<Launch>> emitAttention(const Function &fn, const Node &node,
                                                  llvm::ArrayRef<Layout> ls,
                                                  const EmitOptions &o) {
  const TensorType &qt = fn.type(node.operands[0]), &kt = fn.type(node.operands[1]),
                   &vt = fn.type(node.operands[2]), &pt = fn.type(node.operands[3]);
  bool hasSinks = node.operands.size() > 4;
  int64_t T = qt.shape[0], Hq = qt.shape[1], D = qt.shape[2];
  int64_t ctx = kt.shape[0], Hkv = kt.shape[1], Dv = vt.shape[2];
  if (D > kMaxHeadDim || Dv > kMaxHeadDim)
    return unsupported(node, llvm::formatv("head dim {0}/{1} (at most {2})", D, Dv, kMaxHeadDim)
                                 .str());
  if (Hq > 65535)
    return unsupported(node, llvm::formatv("{0} query heads (at most 65535)", Hq).str());
  int64_t group = Hq / Hkv;
  int64_t window = node.i("window");
  double softcap = node.f("softcap");

  // Splits: each block's warps walk their keys one at a time (a warp-wide dot
  // product per key), so a block is latency-bound and short chunks win: aim
  // for 16 blocks per SM over the whole cache (only the live part launches
  // work), each at least 32 keys (8 per warp).
  int64_t target = static_cast<int64_t>(o.smCount) * 16;
  int64_t S = std::clamp<int64_t>((target + T * Hq - 1) / (T * Hq), 1, (ctx + 31) / 32);
  S = std::min<int64_t>(S, 256);
  int64_t chunk = (ctx + S - 1) / S;
  S = (ctx + chunk - 1) / chunk;
  int64_t UQ = (D + 31) / 32, UV = (Dv + 31) / 32;
  int64_t part = Dv + 2;
  uint64_t scratch = static_cast<uint64_t>(T * Hq * S * part) * 4;

  const Layout &ql = ls[0], &kl = ls[1], &vl = ls[2], &pl = ls[3];
  std::string b = "#define NW " + std::to_string(kWarps) + "\n#define UQ " + std::to_string(UQ) +
                  "\n#define UV " + std::to_string(UV) + "\n";
  b += "extern \"C\" __global__ void __launch_bounds__(NW * 32) KERNEL(float* part, const " +
       ctype(qt.dtype) + "* q, const " + ctype(kt.dtype) + "* kc, const " + ctype(vt.dtype) +
       "* vc, const " + ctype(pt.dtype) + "* pos) {\n";
  b += "  const long long t = blockIdx.x / " + ilit(S) + ", s = blockIdx.x % " + ilit(S) + ";\n";
  b += "  const long long h = blockIdx.y, hk = h / " + ilit(group) + ";\n";
  b += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
  b += "  const long long p = (long long)pos[" + offsetExpr(pl, {"t"}) + "];\n";
  b += "  long long j0 = s * " + ilit(chunk) + ", j1 = min(j0 + " + ilit(chunk) + ", " +
       ilit(ctx) + ") - 1;\n";
  b += "  j1 = min(j1, min(p, " + ilit(ctx - 1) + "));\n";
  if (window > 0)
    b += "  j0 = max(j0, p - " + ilit(window) + " + 1);\n";
  b += "  float qr[UQ];\n#pragma unroll\n  for (int u = 0; u < UQ; ++u) {\n";
  b += "    const long long d = lane + 32 * u;\n";
  b += "    qr[u] = d < " + ilit(D) + " ? fg_to_f(q[" + offsetExpr(ql, {"t", "h", "d"}) +
       "]) : 0.0f;\n  }\n";
  b += "  float m = -FG_INF, l = 0.0f, acc[UV];\n#pragma unroll\n  for (int u = 0; u < UV; ++u) "
       "acc[u] = 0.0f;\n";
  b += "  for (long long j = j0 + warp; j <= j1; j += NW) {\n";
  b += "    float dot = 0.0f;\n#pragma unroll\n    for (int u = 0; u < UQ; ++u) {\n";
  b += "      const long long d = lane + 32 * u;\n";
  b += "      if (d < " + ilit(D) + ") dot += qr[u] * fg_to_f(kc[" +
       offsetExpr(kl, {"j", "hk", "d"}) + "]);\n    }\n";
  b += "    float sc = fg_warp_sum(dot) * " + flit(node.f("scale")) + ";\n";
  if (softcap > 0)
    b += "    sc = " + flit(softcap) + " * tanhf(sc / " + flit(softcap) + ");\n";
  b += "    const float mn = fmaxf(m, sc);\n";
  b += "    const float corr = expf(m - mn), pe = expf(sc - mn);\n";
  b += "    l = l * corr + pe;\n";
  b += "#pragma unroll\n    for (int u = 0; u < UV; ++u) {\n";
  b += "      const long long d = lane + 32 * u;\n";
  b += "      const float vv = d < " + ilit(Dv) + " ? fg_to_f(vc[" +
       offsetExpr(vl, {"j", "hk", "d"}) + "]) : 0.0f;\n";
  b += "      acc[u] = acc[u] * corr + pe * vv;\n    }\n";
  b += "    m = mn;\n  }\n";
  // Merge the warps of this block.
  b += "  __shared__ float sm[NW], sl[NW], sacc[NW][UV * 32];\n";
  b += "  if (lane == 0) { sm[warp] = m; sl[warp] = l; }\n";
  b += "#pragma unroll\n  for (int u = 0; u < UV; ++u) sacc[warp][lane + 32 * u] = acc[u];\n";
  b += "  __syncthreads();\n";
  b += "  float M = -FG_INF;\n  for (int w = 0; w < NW; ++w) M = fmaxf(M, sm[w]);\n";
  b += "  float* out = part + ((t * " + ilit(Hq) + " + h) * " + ilit(S) + " + s) * " + ilit(part) +
       ";\n";
  b += "  float L = 0.0f;\n  for (int w = 0; w < NW; ++w) L += sm[w] == -FG_INF ? 0.0f : sl[w] * "
       "expf(sm[w] - M);\n";
  b += "  if (threadIdx.x == 0) { out[0] = M; out[1] = L; }\n";
  b += "  for (int d = threadIdx.x; d < " + ilit(Dv) + "; d += NW * 32) {\n";
  b += "    float a = 0.0f;\n";
  b += "    for (int w = 0; w < NW; ++w) a += sm[w] == -FG_INF ? 0.0f : sacc[w][d] * expf(sm[w] - "
       "M);\n";
  b += "    out[2 + d] = a;\n  }\n}\n";
  KernelSpec split = finishSpec("attention_split", b);
  split.grid[0] = static_cast<unsigned>(T * S);
  split.grid[1] = static_cast<unsigned>(Hq);
  split.block[0] = 32 * kWarps;
  split.params = {Param::scratch(), Param::operand(0), Param::operand(1), Param::operand(2),
                  Param::operand(3)};
  split.scratchBytes = scratch;

  // Combine.
  unsigned nt = threadsForRow(Dv, 256);
  std::string c = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(nt) +
                  ") KERNEL(float* y, const float* part";
  if (hasSinks)
    c += ", const " + ctype(fn.type(node.operands[4]).dtype) + "* sinks";
  c += ") {\n";
  c += "  for (long long t = blockIdx.x; t < " + ilit(T) + "; t += gridDim.x) {\n";
  c += "    const long long h = blockIdx.y;\n";
  c += "    const float* pp = part + (t * " + ilit(Hq) + " + h) * " + ilit(S * part) + ";\n";
  c += "    float M = -FG_INF;\n";
  c += "    for (int s = 0; s < " + ilit(S) + "; ++s) M = fmaxf(M, pp[s * " + ilit(part) + "]);\n";
  if (hasSinks) {
    c += "    const float sink = fg_to_f(sinks[" + offsetExpr(ls[4], {"h"}) + "]);\n";
    c += "    M = fmaxf(M, sink);\n";
  }
  c += "    float L = 0.0f;\n";
  c += "    for (int s = 0; s < " + ilit(S) + "; ++s) { const float ms = pp[s * " + ilit(part) +
       "]; L += ms == -FG_INF ? 0.0f : pp[s * " + ilit(part) + " + 1] * expf(ms - M); }\n";
  if (hasSinks)
    c += "    L += expf(sink - M);\n";
  c += "    const float inv = L > 0.0f ? 1.0f / L : 0.0f;\n";
  c += "    for (int d = threadIdx.x; d < " + ilit(Dv) + "; d += " + std::to_string(nt) + ") {\n";
  c += "      float a = 0.0f;\n";
  c += "      for (int s = 0; s < " + ilit(S) + "; ++s) { const float ms = pp[s * " + ilit(part) +
       "]; if (ms != -FG_INF) a += pp[s * " + ilit(part) + " + 2 + d] * expf(ms - M); }\n";
  c += "      y[(t * " + ilit(Hq) + " + h) * " + ilit(Dv) + " + d] = a * inv;\n    }\n  }\n}\n";
  KernelSpec comb = finishSpec("attention_combine", c);
  comb.grid[0] = static_cast<unsigned>(std::clamp<int64_t>(T, 1, int64_t(1) << 20));
  comb.grid[1] = static_cast<unsigned>(Hq);
  comb.block[0] = nt;
  comb.params = {Param::result(0), Param::scratch()};
  if (hasSinks)
    comb.params.push_back(Param::operand(4));
  comb.scratchBytes = scratch;
  return std::vector<Launch>{std::move(split), std::move(comb)};
}

} // namespace fg::cuda::detail
