//===- Pattern.h - declarative use-def fusion patterns -----------*- C++ -*-===//
//
// A fusion pattern has three pieces (STYLE.md §3-6):
//   - match: use-def structure from a root op, with named captures,
//     commutativity declared once, optional trailing operands. Tree patterns
//     are data (m::Mul(m::RmsNorm(m::Any("x")).bind("norm").singleUse(),
//     m::Any("w")).commutative()); variants come from small factories;
//   - check: legality, yes() or no("why") — it declines, never asserts. The
//     driver adds the rules every fusion shares: an elided intermediate has no
//     consumer outside the group and is not a result of the entry;
//   - rewrite: the fused op (kind, operands, typed attributes) replacing the
//     group's outputs.
// Each candidate carries a benefit (the ops it absorbs); the driver applies
// larger benefits first, so when two patterns overlap the larger one wins.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "passes/Target.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <cassert>
#include <functional>
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

/// One structural match: captures, the nodes absorbed, the surviving outputs.
struct Match {
  NodeId root = ~0u;
  llvm::StringMap<ValueId> values;         ///< named captures (kNoValue: absent optional)
  llvm::SmallVector<NodeId, 8> nodes;      ///< every node the fusion absorbs
  llvm::SmallVector<ValueId, 2> outputs;   ///< replaced by the fused op's results, in order
  llvm::SmallVector<ValueId, 2> singleUse; ///< values that must have exactly one use
  unsigned benefit = 0;                    ///< default: nodes.size()
  std::string variant;                     ///< which variant matched (for logs)

  Match() = default;
  Match(const Match &) = default;
  Match &operator=(const Match &) = default;
  /// noexcept (StringMap's move does not throw), so vectors of candidates
  /// grow and sort by moving instead of copying every capture map.
  Match(Match &&) noexcept = default;
  Match &operator=(Match &&) noexcept = default;

  bool has(llvm::StringRef name) const {
    auto it = values.find(name);
    return it != values.end() && it->second != kNoValue;
  }
  ValueId get(llvm::StringRef name) const {
    auto it = values.find(name);
    assert(it != values.end() && "no capture of this name");
    return it->second;
  }
  /// The node producing capture `name` (which must be an op's result).
  const Node &node(const Function &fn, llvm::StringRef name) const {
    const Node *n = fn.producer(get(name));
    assert(n && "capture is not produced by a node");
    return *n;
  }
  bool absorbs(NodeId n) const { return llvm::is_contained(nodes, n); }
};

/// A node of a tree pattern: any value, or an op whose operands match children.
class Pat {
public:
  enum class Kind { Any, Optional, Op };

  /// Binds the matched value (an op's result) to `name`.
  Pat &bind(llvm::StringRef name) {
    name_ = name.str();
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

  static Pat any(llvm::StringRef name) { return Pat(Kind::Any, OpKind{}, {}, name); }
  static Pat optional(llvm::StringRef name) { return Pat(Kind::Optional, OpKind{}, {}, name); }
  static Pat op(OpKind k, std::vector<Pat> children) {
    return Pat(Kind::Op, k, std::move(children), {});
  }

  /// Every way `v` matches this pattern given the captures in `in`.
  void matchAll(const Function &fn, ValueId v, const Match &in,
                llvm::SmallVectorImpl<Match> &out) const;
  Kind kind() const { return kind_; }
  OpKind opKind() const { return op_; }

private:
  Pat(Kind k, OpKind op, std::vector<Pat> children, llvm::StringRef name)
      : kind_(k), op_(op), children_(std::move(children)), name_(name.str()) {}
  void matchOperands(const Function &fn, const Node &node, bool swap, const Match &in,
                     llvm::SmallVectorImpl<Match> &out) const;

  Kind kind_;
  OpKind op_;
  std::vector<Pat> children_;
  std::string name_;
  bool single_ = false, commutative_ = false;
  std::function<bool(const Function &, const Node &)> pred_;
};

/// Pattern builders: m::Mul(a, b), m::Any("x"), m::Opt("freq_factors"), ...
namespace m {
inline Pat Any(llvm::StringRef name = {}) { return Pat::any(name); }
/// Matches a present operand (captured) or an absent trailing optional one.
inline Pat Opt(llvm::StringRef name) { return Pat::optional(name); }
inline Pat Op(OpKind k, std::vector<Pat> children) { return Pat::op(k, std::move(children)); }
#define FG_M1(Name, K)                                                                             \
  inline Pat Name(Pat a) { return Op(OpKind::K, {std::move(a)}); }
#define FG_M2(Name, K)                                                                             \
  inline Pat Name(Pat a, Pat b) { return Op(OpKind::K, {std::move(a), std::move(b)}); }
FG_M1(RmsNorm, RmsNorm)
FG_M1(Relu, Relu)
FG_M1(Sqr, Sqr)
FG_M1(Tanh, Tanh)
FG_M1(Scale, Scale)
FG_M1(Softmax, Softmax)
FG_M1(Sigmoid, Sigmoid)
FG_M1(Softplus, Softplus)
FG_M1(Sqrt, Sqrt)
FG_M1(SumRows, SumRows)
FG_M1(Clamp, Clamp)
FG_M1(TopK, TopK)
FG_M2(Mul, Mul)
FG_M2(Add, Add)
FG_M2(Div, Div)
FG_M2(MatMul, MatMul)
FG_M2(GetRows, GetRows)
FG_M2(Glu, Glu)
#undef FG_M1
#undef FG_M2
} // namespace m

/// The fused op that replaces a match.
struct FusedOp {
  OpKind kind;
  llvm::SmallVector<ValueId, 6> operands; ///< present operands only
  AttrList attrs;                         ///< one per declared attribute
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

private:
  const Target *target_ = nullptr;
};

/// A pattern given as tree variants, each rooted at the root op. Outputs
/// name captures ("" is the root's value), in the fused op's result order.
class TreePattern : public FusionPattern {
public:
  struct Variant {
    std::string name;
    Pat pat;
    std::vector<std::string> outputs = {""};
  };
  void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const override;

protected:
  void addVariant(std::string name, Pat pat, std::vector<std::string> outputs = {""}) {
    variants_.push_back({std::move(name), std::move(pat), std::move(outputs)});
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
/// no() unless `side` broadcasts into `full`'s shape without enlarging it.
Decision expectBroadcastsInto(const Function &fn, ValueId side, ValueId full, llvm::StringRef what);
/// The attributes of kind `k` with `from`'s attributes copied by name (the
/// rest default): the fused op carries its pieces' typed attributes.
AttrList copyAttrs(OpKind k, llvm::ArrayRef<const Node *> from);
/// Sets attribute `name` of fused kind `k`.
void setAttr(OpKind k, AttrList &attrs, std::string_view name, Attribute value);

// --- pieces shared by the rms_norm / rope / set_rows family --------------------------
/// mul(rms_norm(x) [norm], w) [mul], either operand order.
Pat normMulPat();
/// x, w, the norm and the mul are f32; rows of x and w packed; w broadcasts into x.
Decision checkNormMul(const Function &fn, const Match &m);
/// rope(inner [rope_in], positions, freq_factors?) [rope].
Pat ropePat(Pat inner);
/// The rope's head dim is even; its input and output have packed rows.
Decision checkRope(const Function &fn, const Node &rope);
/// set_rows(dest, inner, indices) [set_rows]: a KV-cache write.
Pat setRowsPat(Pat inner);
/// The cache is f32/f16/bf16 and an f16 source writes only f16.
Decision checkSetRows(const Function &fn, const Node &setRows);
/// The rope attributes of `rope`, copied into fused kind `k`.
AttrList ropeAttrs(OpKind k, const Node &rope, const Node *norm);

// --- the registry ------------------------------------------------------------------------
/// One factory per file; fusionPatterns() lists them, by decreasing benefit.
std::unique_ptr<FusionPattern> createRmsNormMulPattern();
std::unique_ptr<FusionPattern> createRmsNormMulAddPattern();
std::unique_ptr<FusionPattern> createRmsNormMulRopePattern();
std::unique_ptr<FusionPattern> createRmsNormMulRopeSetRowsPattern();
std::unique_ptr<FusionPattern> createRopeSetRowsPattern();
std::unique_ptr<FusionPattern> createTopkMoePattern();
std::unique_ptr<FusionPattern> createGatedMatmulPattern();
std::unique_ptr<FusionPattern> createGatedMatmulIdPattern();
std::unique_ptr<FusionPattern> createMoeWeightedSumPattern();
std::unique_ptr<FusionPattern> createAddChainPattern();
std::unique_ptr<FusionPattern> createMulChainPattern();
std::unique_ptr<FusionPattern> createUnaryMulPattern();
std::unique_ptr<FusionPattern> createReluSqrPattern();
std::unique_ptr<FusionPattern> createSoftcapPattern();

std::vector<std::unique_ptr<FusionPattern>> fusionPatterns();

} // namespace fg::fusion
