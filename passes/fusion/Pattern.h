//===- Pattern.h - declarative use-def fusion patterns -----------*- C++ -*-===//
//
// A fusion pattern has three pieces (STYLE.md §3-6):
//   - match: use-def structure from a root op, with typed captures (Cap: a
//     misspelt capture does not compile), commutativity declared once,
//     optional trailing operands. Tree patterns are data
//     (m::Mul(m::RmsNorm(m::Any(Cap::x)).bind(Cap::norm).singleUse(),
//     m::Any(Cap::w)).commutative()); the m:: builders follow from the op
//     rows of ir/Ops.def; variants come from small factories;
//   - check: legality, yes() or no("why") — it declines, never asserts. The
//     driver adds the rules every fusion shares: an elided intermediate has no
//     consumer outside the group and is not a result of the entry;
//   - rewrite: the fused op replacing the group's outputs, built from its
//     typed argument struct (FusedOp::of(op::FusedSoftcapArgs{...})).
// Each candidate carries a benefit (the ops it absorbs); the driver applies
// larger benefits first, so when two patterns overlap the larger one wins.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "ir/OpViews.h"
#include "passes/Target.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <cassert>
#include <array>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace fg::fusion {

/// A legality decision: yes, or no with a reason a user can read.
class Decision {
public:
  static Decision yes() { return Decision(true, {}); }
  static Decision no(const llvm::Twine &why) { return Decision(false, why.str()); }
  explicit operator bool() const { return ok_; }
  const std::string &reason() const { return reason_; }

private:
  Decision(bool ok, std::string r) : ok_(ok), reason_(std::move(r)) {}
  bool ok_;
  std::string reason_;
};

/// The captures patterns bind, one enumerator each: a misspelt capture does
/// not compile. Names follow the fused ops' operand names where they are one.
#define FG_CAPTURES(X)                                                                             \
  X(x) X(w) X(b) X(p) X(logits) X(ids) X(bias) X(scale) X(positions) X(freqFactors) X(clamp)        \
  X(weights) X(weighted) X(residual) X(mul) X(add) X(indices) X(experts) X(expertScale) X(dest)    \
  X(wGate) X(wUp) X(bGate) X(bUp) X(gate) X(up) X(glu) X(delayed) X(act) X(unnormed) X(tanh)      \
  X(setRows) X(rope) X(relu) X(norm) X(in) X(out) X(b0) X(b1) X(b2) X(b3) X(b4) X(b5) X(b6) X(b7)   \
  X(matmul) X(w0) X(w1) X(w2) X(y0) X(y1) X(y2) X(kCache) X(vCache) X(attnPositions) X(sinks)   \
  X(attn) X(k) X(v) X(kRope) X(kRows) X(vRows)
enum class Cap : uint8_t {
#define FG_CAP_ENUM(name) name,
  FG_CAPTURES(FG_CAP_ENUM)
#undef FG_CAP_ENUM
  root, ///< an output that is the root's own value (TreePattern outputs)
};
constexpr unsigned kNumCaps = static_cast<unsigned>(Cap::root);
/// The capture's name, for reasons and logs.
llvm::StringRef capName(Cap c);
/// b0 .. b7 of a chain by position.
inline Cap chainCap(unsigned i) {
  assert(i < 8 && "a chain has at most 8 operands after x");
  return static_cast<Cap>(static_cast<unsigned>(Cap::b0) + i);
}

/// One structural match: captures, the nodes absorbed, the surviving outputs.
struct Match {
  NodeId root = ~0u;
  llvm::SmallVector<NodeId, 8> nodes;      ///< every node the fusion absorbs
  llvm::SmallVector<ValueId, 2> outputs;   ///< replaced by the fused op's results, in order
  llvm::SmallVector<ValueId, 2> singleUse; ///< values that must have exactly one use
  /// Nodes whose work the fused op repeats without absorbing them (a norm
  /// prologue): they stay while other consumers need them and die with their
  /// last consumer; the cost comparison credits the fusion with a share of
  /// each (its cost over its consumers).
  llvm::SmallVector<NodeId, 1> recomputed;
  unsigned benefit = 0;                    ///< default: nodes.size()
  std::string variant;                     ///< which variant matched (for logs)

  /// Whether `c` is bound to a value (not unbound, not an absent optional operand).
  bool has(Cap c) const { return get(c) != kNoValue; }
  /// The value bound to `c`; kNoValue when unbound or an absent optional operand.
  ValueId get(Cap c) const { return values_[index(c)]; }
  /// Binds `c` to `v` (kNoValue: an absent optional operand); false when it is
  /// already bound to another value.
  bool bind(Cap c, ValueId v) {
    uint64_t bit = uint64_t(1) << index(c);
    if (bound_ & bit)
      return values_[index(c)] == v;
    bound_ |= bit;
    values_[index(c)] = v;
    return true;
  }
  /// Binds `c` to `v`, replacing any earlier binding (hand-written matchers).
  void set(Cap c, ValueId v) {
    bound_ |= uint64_t(1) << index(c);
    values_[index(c)] = v;
  }
  /// The typed view of the node producing capture `c`, or nullopt when `c`
  /// is unbound, an argument, or another op.
  template <typename View> std::optional<View> op(const Function &fn, Cap c) const {
    if (!has(c))
      return std::nullopt;
    const Node *n = fn.producer(get(c));
    if (!n || !View::classof(*n))
      return std::nullopt;
    return View(*n);
  }
  /// The node producing capture `c`, or null.
  const Node *producer(const Function &fn, Cap c) const {
    return has(c) ? fn.producer(get(c)) : nullptr;
  }
  bool absorbs(NodeId n) const { return llvm::is_contained(nodes, n); }

private:
  static unsigned index(Cap c) {
    assert(c != Cap::root && "Cap::root names an output, not a capture");
    return static_cast<unsigned>(c);
  }
  static std::array<ValueId, kNumCaps> unbound() {
    std::array<ValueId, kNumCaps> a;
    a.fill(kNoValue);
    return a;
  }
  std::array<ValueId, kNumCaps> values_ = unbound();
  uint64_t bound_ = 0;
  static_assert(kNumCaps <= 64, "bound_ holds one bit per capture");
};

/// A node of a tree pattern: any value, or an op whose operands match children.
class Pat {
public:
  enum class Kind { Any, Optional, Op };

  /// Binds the matched value (an op's result) to `c`.
  Pat &bind(Cap c) {
    cap_ = c;
    return *this;
  }
  /// The matched op's result must have exactly one use (checked as legality, with a reason).
  Pat &singleUse() {
    single_ = true;
    return *this;
  }
  /// Operands 0 and 1 may come in either order.
  Pat &commutative() {
    commutative_ = true;
    return *this;
  }
  /// An extra structural condition on the matched node.
  Pat &where(std::function<bool(const Function &, const Node &)> pred) {
    pred_ = std::move(pred);
    return *this;
  }

  static Pat any(std::optional<Cap> c) { return Pat(Kind::Any, OpKind{}, {}, c); }
  static Pat optional(Cap c) { return Pat(Kind::Optional, OpKind{}, {}, c); }
  static Pat op(OpKind k, std::vector<Pat> children) {
    return Pat(Kind::Op, k, std::move(children), std::nullopt);
  }

  /// Every way `v` matches this pattern given the captures in `in`.
  void matchAll(const Function &fn, ValueId v, const Match &in,
                llvm::SmallVectorImpl<Match> &out) const;
  Kind kind() const { return kind_; }
  OpKind opKind() const { return op_; }

private:
  Pat(Kind k, OpKind op, std::vector<Pat> children, std::optional<Cap> c)
      : kind_(k), op_(op), children_(std::move(children)), cap_(c) {}
  void matchOperands(const Function &fn, const Node &node, bool swap, const Match &in,
                     llvm::SmallVectorImpl<Match> &out) const;

  Kind kind_;
  OpKind op_;
  std::vector<Pat> children_;
  std::optional<Cap> cap_;
  bool single_ = false, commutative_ = false;
  std::function<bool(const Function &, const Node &)> pred_;
};

/// Pattern builders: m::Mul(a, b), m::Any(Cap::x), m::Opt(Cap::freqFactors),
/// and one per op of ir/Ops.def (m::RmsNorm, m::Rope, ...), which refuses at
/// compile time more children than the op's row declares operands.
namespace m {
inline Pat Any(std::optional<Cap> c = std::nullopt) { return Pat::any(c); }
/// Matches a present operand (captured) or an absent trailing optional one.
inline Pat Opt(Cap c) { return Pat::optional(c); }
inline Pat Op(OpKind k, std::vector<Pat> children) { return Pat::op(k, std::move(children)); }
#define FG_OP(Kind, ...)                                                                           \
  template <typename... Children> Pat Kind(Children... children) {                                 \
    static_assert(sizeof...(Children) <= fg::op::Kind::kMaxOperands,                               \
                  "more children than the op's row declares operands");                            \
    return Op(OpKind::Kind, {std::move(children)...});                                             \
  }
#include "ir/Ops.def"
} // namespace m

/// The fused op that replaces a match.
struct FusedOp {
  OpKind kind;
  llvm::SmallVector<ValueId, 6> operands; ///< present operands only
  AttrList attrs;                         ///< one per declared attribute

  /// The fused op of a typed argument struct: FusedOp::of(op::FusedSoftcapArgs{
  /// .x = m.get(Cap::x), .inScale = 0.5}); absent optional operands (kNoValue) trail.
  template <typename Args> static FusedOp of(const Args &args) {
    FusedOp f{Args::kKind, {}, {}};
    op::lowerArgs(args, f.operands, f.attrs);
    while (!f.operands.empty() && f.operands.back() == kNoValue)
      f.operands.pop_back();
    return f;
  }
};

class FusionPattern {
public:
  virtual ~FusionPattern() = default;
  /// The target the driver compiles for (null: none); checks ask it for
  /// kernel limits instead of copying them.
  void setTarget(const Target *t) { target_ = t; }
  const Target *target() const { return target_; }
  /// The pattern's one name: its file, `--disable-fusion` name, mnemonic suffix.
  virtual llvm::StringRef name() const = 0;
  /// Called by the driver before it matches at every root of `fn` (once per
  /// round), so a pattern can compute per-function facts (use counts) once
  /// instead of at each root.
  virtual void prepare(const Function &) {}
  /// Candidates rooted at node `root` (each with its benefit).
  virtual void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const = 0;
  /// Pattern-specific legality; the driver checks the shared rules first.
  virtual Decision check(const Function &fn, const Match &m) const = 0;
  virtual FusedOp rewrite(const Function &fn, const Match &m) const = 0;
  /// Whether the pattern folds the converts the gemm-inputs pass inserts
  /// (glu_convert, rms_norm_mul_convert): enabled, it needs gemm-inputs to
  /// run before fuse (foldsGemmInputConverts(FusionOptions)).
  virtual bool foldsGemmInputConverts() const { return false; }

private:
  const Target *target_ = nullptr;
};

/// A pattern given as tree variants, each rooted at the root op. Outputs
/// name captures (Cap::root is the root's value), in the fused op's result order.
class TreePattern : public FusionPattern {
public:
  struct Variant {
    std::string name;
    Pat pat;
    llvm::SmallVector<Cap, 2> outputs = {Cap::root};
  };
  void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const override;

protected:
  void addVariant(std::string name, Pat pat, llvm::ArrayRef<Cap> outputs = {Cap::root}) {
    variants_.push_back({std::move(name), std::move(pat), {outputs.begin(), outputs.end()}});
  }

private:
  std::vector<Variant> variants_;
};

// --- legality helpers shared by the patterns -----------------------------------------

/// `%name` of a value, for reasons and logs.
std::string label(const Function &fn, ValueId v);
/// Whether `v` lives densely in row-major order (views and permutes followed).
bool isContiguous(const Function &fn, ValueId v);
/// Whether the innermost dimension of `v` is packed (stride 1).
bool hasContiguousRows(const Function &fn, ValueId v);
/// no() unless `v`'s dtype is one of `allowed`.
Decision expectDType(const Function &fn, ValueId v, llvm::ArrayRef<DType> allowed,
                     llvm::StringRef what);
/// no() unless the match's root (a convert) stores a 16-bit float: the check
/// of the patterns that take a GEMM input's convert (glu_convert,
/// rms_norm_mul_convert, attention_convert).
Decision expectSixteenBitConvert(const Function &fn, const Match &m);
/// no() unless `side` broadcasts into `full`'s shape without enlarging it.
Decision expectBroadcastsInto(const Function &fn, ValueId side, ValueId full, llvm::StringRef what);
/// Each value's reader nodes, each node once, in node order (the patterns
/// that look at a value's other readers fill it in prepare()).
using UserTable = std::vector<llvm::SmallVector<NodeId, 2>>;
UserTable valueUsers(const Function &fn);
// --- pieces shared by the rms_norm / rope / set_rows family --------------------------
/// mul(rms_norm(x) [norm], w) [mul], either operand order.
Pat normMulPat();
/// x, w, the norm and the mul are f32; rows of x and w packed; w broadcasts into x.
Decision checkNormMul(const Function &fn, const Match &m);
/// A GEMV that can normalise its own x (the norm-prologue patterns'
/// consumers): matmul, fused.matmul_multi, fused.gated_matmul without biases.
bool isNormPrologueGemv(const Node &n);
/// The normalised row `n` (a fused.rms_norm_mul) is f32, as the GEMV
/// prologue computes it.
Decision checkNormRowF32(const Function &fn, ValueId n);
/// A GEMV that normalises its x itself: 1 to the target's GEMV tokens of x,
/// x and the norm weight `w` packed, one weight per column of x, and a
/// target to decide by cost.
Decision checkNormPrologue(const Function &fn, ValueId x, ValueId w, const Target *target);
/// rope(inner, positions, freq_factors?) [rope].
Pat ropePat(Pat inner);
/// The rope's head dim is even; its input and output have packed rows.
Decision checkRope(const Function &fn, const Node &rope);
/// set_rows(dest, inner, indices) [set_rows]: a KV-cache write.
Pat setRowsPat(Pat inner);
/// The cache is f32/f16/bf16 and an f16 source writes only f16.
Decision checkSetRows(const Function &fn, const Node &setRows);
/// Sets the rope attributes of a fused argument struct from `rope` (each
/// fused rope op's row declares the same nine, so a missing one does not compile).
template <typename Args> void setRopeAttrs(Args &a, op::Rope rope) {
  a.mode = rope.mode();
  a.nDims = rope.nDims();
  a.theta = rope.theta();
  a.freqScale = rope.freqScale();
  a.extFactor = rope.extFactor();
  a.attnFactor = rope.attnFactor();
  a.betaFast = rope.betaFast();
  a.betaSlow = rope.betaSlow();
  a.nCtxOrig = rope.nCtxOrig();
}

// --- the registry ------------------------------------------------------------------------
/// One factory per file; fusionPatterns() lists them, by decreasing benefit.
std::unique_ptr<FusionPattern> createRmsNormMulPattern();
std::unique_ptr<FusionPattern> createRmsNormMulAddPattern();
std::unique_ptr<FusionPattern> createRmsNormMulRopePattern();
std::unique_ptr<FusionPattern> createRmsNormMulRopeSetRowsPattern();
std::unique_ptr<FusionPattern> createRopeSetRowsPattern();
std::unique_ptr<FusionPattern> createRopeAttentionPattern();
std::unique_ptr<FusionPattern> createRopeKvAttentionPattern();
std::unique_ptr<FusionPattern> createAttentionConvertPattern();
std::unique_ptr<FusionPattern> createTopkMoePattern();
std::unique_ptr<FusionPattern> createRmsNormMatmulTopkMoePattern();
std::unique_ptr<FusionPattern> createGatedMatmulPattern();
std::unique_ptr<FusionPattern> createGatedMatmulIdPattern();
std::unique_ptr<FusionPattern> createGatedMatmulIdChunkPattern();
std::unique_ptr<FusionPattern> createMatmulAddPattern();
std::unique_ptr<FusionPattern> createMatmulMultiPattern();
std::unique_ptr<FusionPattern> createRmsNormMatmulPattern();
std::unique_ptr<FusionPattern> createRmsNormMulMatmulPattern();
std::unique_ptr<FusionPattern> createMoeWeightedSumPattern();
std::unique_ptr<FusionPattern> createMoeWeightedSumAddPattern();
std::unique_ptr<FusionPattern> createMatmulIdSumAddPattern();
std::unique_ptr<FusionPattern> createAddChainPattern();
std::unique_ptr<FusionPattern> createMulChainPattern();
std::unique_ptr<FusionPattern> createUnaryMulPattern();
std::unique_ptr<FusionPattern> createReluSqrPattern();
std::unique_ptr<FusionPattern> createGluConvertPattern();
std::unique_ptr<FusionPattern> createGatedGemmPattern();
std::unique_ptr<FusionPattern> createRmsNormMulConvertPattern();
std::unique_ptr<FusionPattern> createSoftcapPattern();

std::vector<std::unique_ptr<FusionPattern>> fusionPatterns();

} // namespace fg::fusion
