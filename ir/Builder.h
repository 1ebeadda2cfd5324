//===- Builder.h - build graphs in C++ with shape inference ------*- C++ -*-===//
//
// Every creation runs the op's type rule. A mismatch does not throw or
// abort: the builder records the first error (naming the op and the value
// being built) and returns an invalid value; later calls are ignored, and
// finish() reports it. Decoder blocks stay straight-line code this way.
//
//   fg::Builder b(fn);
//   auto x = b.input("x", {DType::F32, {1, 4096}});
//   auto w = b.weight("w", {DType::F32, {4096}}, WeightInit::constant(1));
//   auto y = b.mul(b.rmsNorm(x, 1e-6), w, "y");
//   b.result(y);
//   if (auto err = b.finish()) ...
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "ir/OpViews.h"

#include "llvm/Support/Error.h"

#include <initializer_list>
#include <optional>
#include <utility>

namespace fg {

/// A named attribute for Builder::create: {"eps", Attribute::ofFloat(1e-6)}.
using NamedAttr = std::pair<std::string_view, Attribute>;

class Builder {
public:
  explicit Builder(Function &fn) : fn_(fn) {}
  Function &function() { return fn_; }

  // --- arguments ------------------------------------------------------------------
  ValueId input(llvm::StringRef name, TensorType type);
  ValueId weight(llvm::StringRef name, TensorType type, WeightInit init = {});
  ValueId state(llvm::StringRef name, TensorType type);
  void result(ValueId v);

  // --- generic creation ----------------------------------------------------------
  /// Creates one node from its typed argument struct (ir/OpViews.h), which
  /// follows from the op's row: b.create(op::RmsNormArgs{.x = x, .eps = 1e-6}).
  /// Names its results `name` (made unique), or leaves them numbered when
  /// empty. Returns the first result.
  template <typename Args, typename = decltype(Args::kKind)>
  ValueId create(const Args &args, llvm::StringRef name = {}) {
    llvm::SmallVector<ValueId, 6> operands;
    AttrList attrs;
    op::lowerArgs(args, operands, attrs);
    return createNode(Args::kKind, operands, std::move(attrs), name);
  }
  /// Creates one node of a kind known only at run time (tests, generic
  /// tools), attributes by name; an unknown name is the builder's error.
  ValueId create(OpKind kind, llvm::ArrayRef<ValueId> operands,
                 std::initializer_list<NamedAttr> attrs = {}, llvm::StringRef name = {});
  /// Creates one node from its operands (trailing kNoValue: absent optional
  /// operands) and its full attribute list.
  ValueId createNode(OpKind kind, llvm::ArrayRef<ValueId> operands, AttrList attrs,
                     llvm::StringRef name = {});

  // --- one helper per op ------------------------------------------------------------
  ValueId getRows(ValueId table, ValueId idx, llvm::StringRef name = {});
  ValueId setRows(ValueId dst, ValueId src, ValueId idx, llvm::StringRef name = {});
  ValueId matmul(ValueId x, ValueId w, llvm::StringRef name = {});
  ValueId matmulId(ValueId x, ValueId w, ValueId ids, llvm::StringRef name = {});
  ValueId add(ValueId a, ValueId b, llvm::StringRef name = {});
  ValueId sub(ValueId a, ValueId b, llvm::StringRef name = {});
  ValueId mul(ValueId a, ValueId b, llvm::StringRef name = {});
  ValueId div(ValueId a, ValueId b, llvm::StringRef name = {});
  ValueId addId(ValueId a, ValueId bias, ValueId ids, llvm::StringRef name = {});
  ValueId scale(ValueId x, double s, double bias = 0, llvm::StringRef name = {});
  ValueId clamp(ValueId x, double lo, double hi, llvm::StringRef name = {});
  ValueId unary(OpKind kind, ValueId x, llvm::StringRef name = {});
  ValueId glu(ValueId gate, ValueId up, GluKind kind, double alpha = 1.702, double limit = 7.0,
              llvm::StringRef name = {});
  ValueId rmsNorm(ValueId x, double eps, llvm::StringRef name = {});
  ValueId layerNorm(ValueId x, double eps, llvm::StringRef name = {});
  struct RopeParams {
    RopeMode mode = RopeMode::Normal;
    int64_t nDims = 0; ///< 0: the whole head
    double theta = 10000, freqScale = 1, extFactor = 0, attnFactor = 1;
    double betaFast = 32, betaSlow = 1;
    int64_t nCtxOrig = 0;
  };
  ValueId rope(ValueId x, ValueId positions, const RopeParams &p,
               std::optional<ValueId> freqFactors = std::nullopt, llvm::StringRef name = {});
  ValueId softmax(ValueId x, std::optional<ValueId> mask = std::nullopt, double scale = 1,
                  double maxBias = 0, llvm::StringRef name = {});
  ValueId argsort(ValueId x, SortOrder order, llvm::StringRef name = {});
  ValueId topK(ValueId x, int64_t k, llvm::StringRef name = {});
  ValueId sumRows(ValueId x, llvm::StringRef name = {});
  ValueId mean(ValueId x, llvm::StringRef name = {});
  ValueId concat(ValueId a, ValueId b, int64_t axis, llvm::StringRef name = {});
  ValueId repeat(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::StringRef name = {});
  ValueId reshape(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::StringRef name = {});
  ValueId view(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides,
               int64_t offset, llvm::StringRef name = {});
  ValueId permute(ValueId x, llvm::ArrayRef<int64_t> perm, llvm::StringRef name = {});
  ValueId transpose(ValueId x, llvm::StringRef name = {});
  ValueId cont(ValueId x, llvm::StringRef name = {});
  ValueId convert(ValueId x, DType to, llvm::StringRef name = {});
  struct AttentionParams {
    double scale = 1;
    int64_t window = 0;
    double softcap = 0;
  };
  ValueId attention(ValueId q, ValueId kCache, ValueId vCache, ValueId positions,
                    const AttentionParams &p, std::optional<ValueId> sinks = std::nullopt,
                    llvm::StringRef name = {});

  // --- errors -------------------------------------------------------------------
  const TensorType &type(ValueId v) const { return fn_.type(v); }
  bool failed() const { return error_.has_value(); }
  /// Records an error (first one wins); returns kNoValue for convenience.
  ValueId fail(const llvm::Twine &msg);
  /// The first error, if any; the function may be incomplete when set.
  llvm::Error finish();

private:
  std::string describe(OpKind kind, llvm::StringRef name) const;

  Function &fn_;
  std::optional<std::string> error_;
};

} // namespace fg
