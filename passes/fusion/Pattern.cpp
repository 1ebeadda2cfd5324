//===- Pattern.cpp - tree matching, legality helpers, the registry ---------===//
#include "passes/fusion/Pattern.h"

#include "passes/fusion/FusionReport.h"
#include "passes/memory/LaunchDag.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace fg::fusion {

namespace {

/// Binds `c` (if any) to `v` in `m`; false when it is bound to another value.
bool bindCapture(Match &m, std::optional<Cap> c, ValueId v) {
  return !c || m.bind(*c, v);
}

} // namespace

llvm::StringRef capName(Cap c) {
  switch (c) {
#define FG_CAP_CASE(name)                                                                          \
  case Cap::name:                                                                                  \
    return #name;
    FG_CAPTURES(FG_CAP_CASE)
#undef FG_CAP_CASE
  case Cap::root:
    return "root";
  }
  return "?";
}

void Pat::matchAll(const Function &fn, ValueId v, const Match &in,
                   llvm::SmallVectorImpl<Match> &out) const {
  if (kind_ != Kind::Op) {
    Match m = in;
    if (bindCapture(m, cap_, v))
      out.push_back(std::move(m));
    return;
  }
  const Node *node = fn.producer(v);
  if (!node || node->kind != op_ || node->result() != v)
    return;
  if (pred_ && !pred_(fn, *node))
    return;
  Match m = in;
  if (!bindCapture(m, cap_, v))
    return;
  NodeId id = fn.value(v).def;
  if (!m.absorbs(id))
    m.nodes.push_back(id);
  if (single_)
    m.singleUse.push_back(v);
  matchOperands(fn, *node, /*swap=*/false, m, out);
  if (commutative_ && node->operands.size() >= 2 && node->operands[0] != node->operands[1])
    matchOperands(fn, *node, /*swap=*/true, m, out);
}

void Pat::matchOperands(const Function &fn, const Node &node, bool swap, const Match &in,
                        llvm::SmallVectorImpl<Match> &out) const {
  if (node.operands.size() > children_.size())
    return;
  llvm::SmallVector<Match, 4> states{in};
  for (size_t i = 0; i < children_.size() && !states.empty(); ++i) {
    size_t slot = swap && i < 2 ? 1 - i : i;
    llvm::SmallVector<Match, 4> next;
    for (const Match &s : states) {
      if (slot < node.operands.size()) {
        children_[i].matchAll(fn, node.operands[slot], s, next);
      } else if (children_[i].kind_ == Kind::Optional) {
        Match m = s;
        if (bindCapture(m, children_[i].cap_, kNoValue))
          next.push_back(std::move(m));
      }
    }
    states = std::move(next);
  }
  for (Match &s : states)
    out.push_back(std::move(s));
}

void TreePattern::match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const {
  const Node &node = fn.node(root);
  if (node.results.empty())
    return;
  for (const Variant &variant : variants_) {
    if (variant.pat.opKind() != node.kind)
      continue;
    Match start;
    start.root = root;
    llvm::SmallVector<Match, 4> found;
    variant.pat.matchAll(fn, node.result(), start, found);
    for (Match &m : found) {
      m.variant = variant.name;
      for (Cap o : variant.outputs)
        m.outputs.push_back(o == Cap::root ? node.result() : m.get(o));
      m.benefit = static_cast<unsigned>(m.nodes.size());
      out.push_back(std::move(m));
    }
  }
}

// --- legality helpers ----------------------------------------------------------------

std::string label(const Function &fn, ValueId v) { return valueLabel(fn, v); }

namespace {

/// Strides equal the dense ones, ignoring dimensions of size 1.
bool denseStrides(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides) {
  Shape dense = contiguousStrides(shape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && strides[d] != dense[d])
      return false;
  return true;
}

/// A permutation that keeps every dimension larger than 1 in order.
bool keepsOrder(const Function &fn, const Node &n, llvm::ArrayRef<int64_t> perm) {
  const TensorType &in = fn.type(n.operands[0]);
  int64_t last = -1;
  for (int64_t p : perm) {
    if (in.shape[p] == 1)
      continue;
    if (p < last)
      return false;
    last = p;
  }
  return true;
}

} // namespace

bool isContiguous(const Function &fn, ValueId v) {
  const Node *n = fn.producer(v);
  if (!n || !n->info().has(kViewLike))
    return true;
  switch (n->kind) {
  case OpKind::View:
    if (!denseStrides(op::View(*n).shape(), op::View(*n).strides()))
      return false;
    break;
  case OpKind::Permute:
    if (!keepsOrder(fn, *n, op::Permute(*n).perm()))
      return false;
    break;
  case OpKind::Transpose: {
    const TensorType &t = fn.type(v);
    if (t.rank() >= 2 && t.shape[t.rank() - 1] != 1 && t.shape[t.rank() - 2] != 1)
      return false;
    break;
  }
  default:
    break;
  }
  return isContiguous(fn, n->operands[0]);
}

bool hasContiguousRows(const Function &fn, ValueId v) {
  if (isContiguous(fn, v))
    return true;
  const Node *n = fn.producer(v);
  const TensorType &t = fn.type(v);
  if (t.rowLength() == 1)
    return true;
  switch (n->kind) {
  case OpKind::View:
    return op::View(*n).strides().back() == 1 && hasContiguousRows(fn, n->operands[0]);
  case OpKind::Permute:
    return op::Permute(*n).perm().back() == t.rank() - 1 && hasContiguousRows(fn, n->operands[0]);
  default:
    return false;
  }
}

Decision expectDType(const Function &fn, ValueId v, llvm::ArrayRef<DType> allowed,
                     llvm::StringRef what) {
  DType t = fn.type(v).dtype;
  if (llvm::is_contained(allowed, t))
    return Decision::yes();
  std::string names;
  for (DType a : allowed)
    names += (names.empty() ? "" : "/") + std::string(dtypeName(a));
  return Decision::no(what + " " + label(fn, v) + " is " + std::string(dtypeName(t)) +
                      ", the fused kernel takes " + names);
}

Decision expectSixteenBitConvert(const Function &fn, const Match &m) {
  DType to = fn.type(fn.node(m.root).result()).dtype;
  if (to != DType::F16 && to != DType::BF16)
    return Decision::no("the convert's target " + std::string(dtypeName(to)) +
                        " is not a 16-bit float");
  return Decision::yes();
}

Decision expectBroadcastsInto(const Function &fn, ValueId side, ValueId full,
                              llvm::StringRef what) {
  const TensorType &s = fn.type(side), &f = fn.type(full);
  auto b = broadcastShapes(s.shape, f.shape);
  if (b && *b == f.shape)
    return Decision::yes();
  return Decision::no(what + " " + label(fn, side) + " " + s.str() + " does not broadcast into " +
                      label(fn, full) + " " + f.str());
}

// --- the rms_norm / rope / set_rows family --------------------------------------------

Pat normMulPat() {
  return m::Mul(m::RmsNorm(m::Any(Cap::x)).bind(Cap::norm).singleUse(), m::Any(Cap::w))
      .commutative()
      .bind(Cap::mul);
}

Decision checkNormMul(const Function &fn, const Match &m) {
  ValueId x = m.get(Cap::x), w = m.get(Cap::w);
  for (auto [v, what] :
       {std::pair<ValueId, const char *>{x, "input"}, {w, "weight"}, {m.get(Cap::mul), "product"}})
    if (Decision d = expectDType(fn, v, {DType::F32}, what); !d)
      return d;
  if (!hasContiguousRows(fn, x) || !hasContiguousRows(fn, w))
    return Decision::no("the rows of " + label(fn, x) + " and " + label(fn, w) + " must be packed");
  if (fn.type(m.get(Cap::mul)).shape != fn.type(x).shape)
    return Decision::no("weight " + label(fn, w) + " " + fn.type(w).str() +
                        " does not broadcast into " + label(fn, x) + " " + fn.type(x).str());
  return Decision::yes();
}

Pat ropePat(Pat inner) {
  return m::Rope(std::move(inner), m::Any(Cap::positions), m::Opt(Cap::freqFactors))
      .bind(Cap::rope);
}

Decision checkRope(const Function &fn, const Node &rope) {
  const TensorType &x = fn.type(rope.operands[0]);
  if (x.rowLength() % 2)
    return Decision::no("rope head dim " + llvm::Twine(x.rowLength()) + " of " +
                        label(fn, rope.operands[0]) + " is odd");
  if (!hasContiguousRows(fn, rope.operands[0]))
    return Decision::no("the rows of rope input " + label(fn, rope.operands[0]) +
                        " must be packed");
  return Decision::yes();
}

UserTable valueUsers(const Function &fn) {
  UserTable users(fn.numValues());
  for (NodeId i = 0; i < fn.numNodes(); ++i)
    for (ValueId o : fn.node(i).operands)
      if (users[o].empty() || users[o].back() != i)
        users[o].push_back(i);
  return users;
}

bool isNormPrologueGemv(const Node &n) {
  return n.kind == OpKind::MatMul || n.kind == OpKind::FusedMatmulMulti ||
         (n.kind == OpKind::FusedGatedMatmul && n.operands.size() == 3);
}

Decision checkNormRowF32(const Function &fn, ValueId n) {
  if (DType d = fn.type(n).dtype; d != DType::F32)
    return Decision::no("the normalised row " + label(fn, n) + " is stored in " +
                        std::string(dtypeName(d)) + "; the GEMV prologue computes it in f32");
  return Decision::yes();
}

Decision checkNormPrologue(const Function &fn, ValueId x, ValueId w, const Target *target) {
  const int64_t tokens = fn.type(x).numRows();
  const int64_t maxTokens = target ? target->maxGemvTokens() : INT64_MAX;
  if (tokens < 1 || tokens > maxTokens)
    return Decision::no(label(fn, x) + " has " + llvm::Twine(tokens) +
                        " tokens; the fused GEMV takes 1 to " + llvm::Twine(maxTokens));
  if (!isContiguous(fn, x) || !isContiguous(fn, w))
    return Decision::no("input " + label(fn, x) + " and norm weight " + label(fn, w) +
                        " must be contiguous");
  if (fn.type(w).numElements() != fn.type(x).rowLength())
    return Decision::no("norm weight " + label(fn, w) + " " + fn.type(w).str() +
                        " is not one value per column of " + label(fn, x));
  // The driver compares the fused op's cost with the ops it replaces; without
  // a target there is no estimate, and no prologue.
  if (!target)
    return Decision::no("the norm prologue is decided by the target's cost estimate; there "
                        "is no target");
  return Decision::yes();
}

Pat setRowsPat(Pat inner) {
  return m::SetRows(m::Any(Cap::dest), std::move(inner), m::Any(Cap::indices))
      .bind(Cap::setRows);
}

Decision checkSetRows(const Function &fn, const Node &setRows) {
  DType cache = fn.type(setRows.result()).dtype, src = fn.type(setRows.operands[1]).dtype;
  if (Decision d =
          expectDType(fn, setRows.result(), {DType::F32, DType::F16, DType::BF16}, "cache");
      !d)
    return d;
  if (Decision d = expectDType(fn, setRows.operands[1], {DType::F32, DType::F16}, "rows"); !d)
    return d;
  if (src == DType::F16 && cache != DType::F16)
    return Decision::no("f16 rows " + label(fn, setRows.operands[1]) +
                        " may only be written to an "
                        "f16 cache, not " +
                        std::string(dtypeName(cache)));
  return Decision::yes();
}

// --- the registry ------------------------------------------------------------------------

std::vector<std::unique_ptr<FusionPattern>> fusionPatterns() {
  std::vector<std::unique_ptr<FusionPattern>> p;
  p.push_back(createTopkMoePattern());
  p.push_back(createRmsNormMatmulTopkMoePattern());
  p.push_back(createMoeWeightedSumPattern());
  p.push_back(createMoeWeightedSumAddPattern());
  p.push_back(createMatmulIdSumAddPattern());
  p.push_back(createGatedMatmulIdPattern());
  p.push_back(createGatedMatmulIdChunkPattern());
  p.push_back(createGatedMatmulPattern());
  p.push_back(createGatedGemmPattern());
  p.push_back(createMatmulAddPattern());
  p.push_back(createMatmulMultiPattern());
  p.push_back(createRmsNormMatmulPattern());
  p.push_back(createRmsNormMulMatmulPattern());
  p.push_back(createRmsNormMulRopeSetRowsPattern());
  p.push_back(createRmsNormMulRopePattern());
  p.push_back(createRmsNormMulAddPattern());
  p.push_back(createRmsNormMulConvertPattern());
  p.push_back(createAddChainPattern());
  p.push_back(createMulChainPattern());
  p.push_back(createSoftcapPattern());
  p.push_back(createRopeKvAttentionPattern());
  p.push_back(createRopeAttentionPattern());
  p.push_back(createAttentionConvertPattern());
  p.push_back(createRopeSetRowsPattern());
  p.push_back(createRmsNormMulPattern());
  p.push_back(createUnaryMulPattern());
  p.push_back(createReluSqrPattern());
  p.push_back(createGluConvertPattern());
  return p;
}

} // namespace fg::fusion

namespace fg {

std::vector<std::string> fusionPatternNames() {
  std::vector<std::string> names;
  for (const auto &p : fusion::fusionPatterns())
    names.push_back(p->name().str());
  return names;
}

const std::vector<std::string> &optInFusionPatterns() {
  // rms_norm_matmul left this list in the tenth session: it is decided by
  // the target's cost (rms_norm_matmul.cpp), which fuses only small GEMVs.
  // matmul_multi left it in the sixteenth session: on DP4A (quantised
  // weights at T = 1) the merged launch is 1.4-10 % faster a step; the
  // tensor-core form, slower (sixth session: W-dense f16 4.108 -> 4.169 ms),
  // is refused by the CUDA target's cost (CudaCostModel::mergedTensorCoreSlowdown).
  // moe_weighted_sum_add left it in the eleventh session: its GPU cases
  // passed, and it saves one launch a MoE layer (W-moe-12 0.8673 -> 0.8631 ms,
  // W-moe-48 2.967 -> 2.948, one call).
  // rope_attention (q's rope in decode attention): measured slower (H200,
  // eleventh session, one call, three rounds: W-tiny 0.1712 -> 0.1745 ms,
  // W-dense 4.055 -> 4.078): the K path (the k GEMV, then rope_set_rows)
  // is as deep as q's was, so attention waits as long, and the fused kernel
  // is 0.5 us slower than the plain one. It pays only once K's rope and
  // cache write leave their own launch too.
  // rms_norm_matmul_topk_moe (the FFN norm, the router GEMV and the routing
  // in one launch): correct on the H200 (its GPU cases, memcheck, racecheck)
  // but slower. As one 8-block cluster (twenty-first session) W-moe-12 q4_K
  // 0.5277 -> 0.5690 ms, f16 0.8270 -> 0.8836; as a warp an expert over the
  // whole GPU with the last block ranking (twenty-second) 0.532-0.545 ->
  // 0.559-0.562 and 0.837 -> 0.849: the two launches it removes cost little
  // under programmatic launch, and its ranking tail is topk_moe's.
  // gated_gemm left it in the twenty-ninth session: its GPU cases and
  // memcheck passed, and on random weights (the plan's) the stacked gate|up
  // GEMM of W-dense's 512-token prefill takes 167.6 µs where the two GEMMs
  // took 2 × 98.6 (Nsight Compute; 15.72 -> 14.97 ms a prefill in one call).
  // rope_kv_attention (both ropes and both cache writes in decode attention,
  // thirty-sixth session): correct on the H200 (six GPU cases, the demo and
  // session tests, memcheck) and 3 launches a layer fewer, but slower, one
  // call, two rounds: W-tiny 0.1442-0.1454 -> 0.1499-0.1519 ms, W-dense
  // 4.007-4.032 -> 4.069-4.072, W-moe-12 0.758 -> 0.773-0.779, W-dense q4_K
  // 1.79-1.81 -> 1.85-1.86, W-moe-12 q4_K 0.486-0.490 -> 0.504-0.505. The
  // launch takes 5.6 us where attention took 3.6 (W-tiny): the q rope's
  // loads now wait for the position, and the block that writes the rows is
  // the cluster's last to start its keys; the launches it removes ran beside
  // q's path under programmatic launch.
  // rms_norm_mul_matmul (the FFN norm stored by a MoE layer's router GEMV,
  // fortieth session): correct on the H100 (its GPU cases, memcheck) and one
  // launch a MoE layer fewer, but not faster, one call: W-moe-12 q4_K
  // 0.5236-0.5244 -> 0.5253-0.5259 ms, f16 0.917-0.918 -> 0.919-0.930,
  // W-moe-48 3.049 -> 3.062 (q8_0 0.745 -> 0.735). The fused router takes
  // 3.55 us where the router and the norm took 2.0 + 1.5: programmatic
  // launch had hidden the hop, and the norm's work stays on the chain.
  static const std::vector<std::string> names = {"rope_kv_attention", "rope_attention",
                                                 "rms_norm_matmul_topk_moe",
                                                 "rms_norm_mul_matmul"};
  return names;
}

bool foldsGemmInputConverts(const FusionOptions &o) {
  return llvm::any_of(fusion::fusionPatterns(), [&](const auto &p) {
    return p->foldsGemmInputConverts() && o.isEnabled(p->name());
  });
}

bool FusionOptions::isEnabled(llvm::StringRef pattern) const {
  if (!enabled || llvm::is_contained(disabled, pattern.str()))
    return false;
  return !llvm::is_contained(optInFusionPatterns(), pattern.str()) ||
         llvm::is_contained(optIn, pattern.str());
}

bool FusionOptions::isDebugged(llvm::StringRef pattern) const {
  return llvm::is_contained(debug, pattern.str()) || llvm::is_contained(debug, "all");
}

void FusionReport::addApplied(llvm::StringRef entry, llvm::StringRef pattern, int64_t delta,
                              llvm::StringRef root) {
  Applied *a = nullptr;
  for (Applied &o : applied)
    if (o.entry == entry && o.pattern == pattern)
      a = &o;
  if (!a) {
    applied.push_back({entry.str(), pattern.str(), 0, {}});
    a = &applied.back();
  }
  a->count += delta;
  if (root.empty())
    return;
  if (delta > 0)
    a->roots.push_back(root.str());
  else if (auto it = llvm::find(a->roots, root); it != a->roots.end())
    a->roots.erase(it);
}

void FusionReport::withdraw(llvm::StringRef entry, llvm::StringRef root) {
  for (auto a = applied.begin(); a != applied.end(); ++a) {
    if (a->entry != entry)
      continue;
    auto it = llvm::find(a->roots, root);
    if (it == a->roots.end())
      continue;
    a->roots.erase(it);
    if (--a->count <= 0 && a->roots.empty())
      applied.erase(a);
    return;
  }
}

void FusionReport::addRefusal(Refusal r) {
  for (const Refusal &o : refused)
    if (o.entry == r.entry && o.pattern == r.pattern && o.root == r.root && o.reason == r.reason)
      return;
  refused.push_back(std::move(r));
}

int64_t FusionReport::count(llvm::StringRef pattern, llvm::StringRef entry) const {
  int64_t n = 0;
  for (const Applied &a : applied)
    if (a.pattern == pattern && (entry.empty() || a.entry == entry))
      n += a.count;
  return n;
}

int64_t FusionReport::total(llvm::StringRef entry) const {
  int64_t n = 0;
  for (const Applied &a : applied)
    if (entry.empty() || a.entry == entry)
      n += a.count;
  return n;
}

namespace {

/// `text` with each layer number of a canonical tensor name (`blk.12.`)
/// replaced by N; the first layer number found goes to `layer`.
std::string withoutLayers(llvm::StringRef text, int64_t &layer) {
  std::string out;
  layer = -1;
  while (!text.empty()) {
    size_t at = text.find("blk.");
    if (at == llvm::StringRef::npos) {
      out += text.str();
      break;
    }
    out += text.take_front(at + 4).str();
    text = text.drop_front(at + 4);
    llvm::StringRef digits = text.take_while([](char c) { return c >= '0' && c <= '9'; });
    if (digits.empty() || !text.drop_front(digits.size()).startswith("."))
      continue;
    if (layer < 0)
      digits.getAsInteger(10, layer);
    out += "N";
    text = text.drop_front(digits.size());
  }
  return out;
}

/// "0-3, 7, 9-31".
std::string layerRanges(std::vector<int64_t> layers) {
  llvm::sort(layers);
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1)
      ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(layers[i]) +
           (j > i ? "-" + std::to_string(layers[j]) : std::string());
    i = j + 1;
  }
  return out;
}

} // namespace

std::vector<FusionReport::RefusalGroup> FusionReport::groupedRefusals() const {
  std::vector<RefusalGroup> groups;
  for (const Refusal &r : refused) {
    int64_t rootLayer, reasonLayer;
    std::string root = withoutLayers(r.root, rootLayer);
    std::string reason = withoutLayers(r.reason, reasonLayer);
    auto it = llvm::find_if(groups, [&](const RefusalGroup &g) {
      return g.entry == r.entry && g.pattern == r.pattern && g.root == root && g.reason == reason;
    });
    if (it == groups.end()) {
      groups.push_back({r.entry, r.pattern, root, reason, 0, {}});
      it = std::prev(groups.end());
    }
    ++it->count;
    if (rootLayer >= 0)
      it->layers.push_back(rootLayer);
  }
  // A group of one keeps its own names.
  for (RefusalGroup &g : groups)
    if (g.count == 1)
      for (const Refusal &r : refused) {
        int64_t l;
        if (r.entry == g.entry && r.pattern == g.pattern && withoutLayers(r.root, l) == g.root &&
            withoutLayers(r.reason, l) == g.reason) {
          g.root = r.root;
          g.reason = r.reason;
          g.layers.clear();
          break;
        }
      }
  return groups;
}

void FusionReport::print(llvm::raw_ostream &os) const {
  os << "fusions applied:";
  if (applied.empty())
    os << " none";
  os << "\n";
  for (const Applied &a : applied)
    if (a.count)
      os << "  @" << a.entry << "  " << a.pattern << " x" << a.count << "\n";
  if (splitBack)
    os << "  (" << splitBack << " split back by the overlap proof)\n";
  os << "fusion candidates refused:";
  if (refused.empty())
    os << " none";
  os << "\n";
  // The same refusal in every layer is one line: "refused 30× (layers 0-29)".
  for (const RefusalGroup &g : groupedRefusals()) {
    os << "  @" << g.entry << "  " << g.pattern;
    if (g.count > 1)
      os << " refused " << g.count << "\u00d7"
         << (g.layers.empty() ? std::string() : " (layers " + layerRanges(g.layers) + ")");
    os << " at " << g.root << ": " << g.reason << "\n";
  }
}

namespace {
/// One field of a record: tabs and line breaks become spaces.
std::string field(llvm::StringRef s) {
  std::string out = s.str();
  for (char &c : out)
    if (c == '\t' || c == '\n' || c == '\r')
      c = ' ';
  return out;
}
} // namespace

std::string FusionReport::serialize() const {
  std::string out = "fusion-report 1\n";
  for (const Applied &a : applied) {
    std::vector<std::string> roots;
    for (const std::string &r : a.roots)
      roots.push_back(field(r));
    out += "applied\t" + field(a.entry) + "\t" + field(a.pattern) + "\t" +
           std::to_string(a.count) + "\t" + llvm::join(roots, ",") + "\n";
  }
  for (const Refusal &r : refused)
    out += "refused\t" + field(r.entry) + "\t" + field(r.pattern) + "\t" + field(r.root) + "\t" +
           field(r.reason) + "\n";
  out += "split_back\t" + std::to_string(splitBack) + "\n";
  return out;
}

llvm::Expected<FusionReport> FusionReport::parse(llvm::StringRef text) {
  auto bad = [](size_t line, const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "fusion section, line " + llvm::Twine(line) + ": " + why);
  };
  llvm::SmallVector<llvm::StringRef, 64> lines;
  text.split(lines, '\n', -1, /*KeepEmpty=*/false);
  if (lines.empty() || lines.front() != "fusion-report 1")
    return bad(1, "not a structured fusion report (written by an older fusegraph?)");
  FusionReport r;
  for (size_t i = 1; i < lines.size(); ++i) {
    llvm::SmallVector<llvm::StringRef, 5> f;
    lines[i].split(f, '\t');
    int64_t n = 0;
    if (f[0] == "applied" && f.size() == 5 && !f[3].getAsInteger(10, n)) {
      Applied a{f[1].str(), f[2].str(), n, {}};
      llvm::SmallVector<llvm::StringRef, 8> roots;
      f[4].split(roots, ',', -1, /*KeepEmpty=*/false);
      for (llvm::StringRef root : roots)
        a.roots.push_back(root.str());
      r.applied.push_back(std::move(a));
    } else if (f[0] == "refused" && f.size() == 5) {
      r.refused.push_back({f[1].str(), f[2].str(), f[3].str(), f[4].str()});
    } else if (f[0] == "split_back" && f.size() == 2 && !f[1].getAsInteger(10, n)) {
      r.splitBack = n;
    } else {
      return bad(i + 1, "unknown record '" + f[0] + "'");
    }
  }
  return r;
}

} // namespace fg
