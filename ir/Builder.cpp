#include "ir/Builder.h"

namespace fg {

ValueId Builder::fail(const llvm::Twine &msg) {
  if (!error_)
    error_ = msg.str();
  return kNoValue;
}

llvm::Error Builder::finish() {
  if (!error_)
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "builder: " + *error_);
}

static ValueId addArg(Builder &b, Function &fn, llvm::StringRef name, TensorType type, ArgRole role,
                      WeightInit init) {
  if (b.failed())
    return kNoValue;
  if (fn.lookup(name) != kNoValue)
    return b.fail("argument '%" + name + "' is declared twice");
  return fn.addArgument(name.str(), std::move(type), role, std::move(init));
}

ValueId Builder::input(llvm::StringRef name, TensorType type) {
  return addArg(*this, fn_, name, std::move(type), ArgRole::Input, {});
}
ValueId Builder::weight(llvm::StringRef name, TensorType type, WeightInit init) {
  return addArg(*this, fn_, name, std::move(type), ArgRole::Weight, std::move(init));
}
ValueId Builder::state(llvm::StringRef name, TensorType type) {
  return addArg(*this, fn_, name, std::move(type), ArgRole::State, {});
}

void Builder::result(ValueId v) {
  if (failed() || v == kNoValue)
    return;
  fn_.addResult(v);
}

ValueId Builder::create(OpKind kind, llvm::ArrayRef<ValueId> operands,
                        std::initializer_list<NamedAttr> attrs, llvm::StringRef name) {
  if (failed())
    return kNoValue;
  const OpInfo &info = opInfo(kind);
  std::string what = name.empty() ? std::string(info.mnemonic)
                                  : std::string(info.mnemonic) + " '%" + name.str() + "'";
  llvm::SmallVector<TensorType, 4> types;
  for (ValueId v : operands) {
    if (v == kNoValue || v >= fn_.numValues())
      return fail(what + ": invalid operand");
    types.push_back(fn_.type(v));
  }
  AttrList list = defaultAttrs(kind);
  for (const NamedAttr &a : attrs) {
    auto idx = info.findAttr(a.first);
    if (!idx)
      return fail(what + ": unknown attribute '" + std::string(a.first) + "'");
    list[*idx] = a.second;
  }
  llvm::SmallVector<TensorType, 1> results;
  if (llvm::Error e = inferResultTypes(kind, types, list, results))
    return fail(what + ": " + llvm::toString(std::move(e)));
  llvm::SmallVector<std::string, 1> names;
  for (size_t r = 0; r < results.size(); ++r)
    names.push_back(fn_.uniqueName(r == 0 ? name.str() : (name + "." + std::to_string(r)).str()));
  NodeId n = fn_.addNode(kind, operands, std::move(list), results, names);
  return fn_.node(n).result();
}

ValueId Builder::getRows(ValueId t, ValueId i, llvm::StringRef n) {
  return create(OpKind::GetRows, {t, i}, {}, n);
}
ValueId Builder::setRows(ValueId d, ValueId s, ValueId i, llvm::StringRef n) {
  return create(OpKind::SetRows, {d, s, i}, {}, n);
}
ValueId Builder::matmul(ValueId x, ValueId w, llvm::StringRef n) {
  return create(OpKind::MatMul, {x, w}, {}, n);
}
ValueId Builder::matmulId(ValueId x, ValueId w, ValueId ids, llvm::StringRef n) {
  return create(OpKind::MatMulId, {x, w, ids}, {}, n);
}
ValueId Builder::add(ValueId a, ValueId b, llvm::StringRef n) { return create(OpKind::Add, {a, b}, {}, n); }
ValueId Builder::sub(ValueId a, ValueId b, llvm::StringRef n) { return create(OpKind::Sub, {a, b}, {}, n); }
ValueId Builder::mul(ValueId a, ValueId b, llvm::StringRef n) { return create(OpKind::Mul, {a, b}, {}, n); }
ValueId Builder::div(ValueId a, ValueId b, llvm::StringRef n) { return create(OpKind::Div, {a, b}, {}, n); }
ValueId Builder::addId(ValueId a, ValueId bias, ValueId ids, llvm::StringRef n) {
  return create(OpKind::AddId, {a, bias, ids}, {}, n);
}
ValueId Builder::scale(ValueId x, double s, double bias, llvm::StringRef n) {
  return create(OpKind::Scale, {x}, {{"scale", Attribute::ofFloat(s)}, {"bias", Attribute::ofFloat(bias)}}, n);
}
ValueId Builder::clamp(ValueId x, double lo, double hi, llvm::StringRef n) {
  return create(OpKind::Clamp, {x}, {{"min", Attribute::ofFloat(lo)}, {"max", Attribute::ofFloat(hi)}}, n);
}
ValueId Builder::unary(OpKind kind, ValueId x, llvm::StringRef n) {
  if (!opInfo(kind).has(kElementwise) || opInfo(kind).maxOperands() != 1 || !opInfo(kind).attrs.empty())
    return fail(std::string(mnemonic(kind)) + " is not an attribute-free unary op");
  return create(kind, {x}, {}, n);
}
ValueId Builder::glu(ValueId g, ValueId u, GluKind kind, double alpha, double limit, llvm::StringRef n) {
  return create(OpKind::Glu, {g, u},
                {{"kind", Attribute::ofEnum(static_cast<int64_t>(kind))},
                 {"alpha", Attribute::ofFloat(alpha)},
                 {"limit", Attribute::ofFloat(limit)}},
                n);
}
ValueId Builder::rmsNorm(ValueId x, double eps, llvm::StringRef n) {
  return create(OpKind::RmsNorm, {x}, {{"eps", Attribute::ofFloat(eps)}}, n);
}
ValueId Builder::layerNorm(ValueId x, double eps, llvm::StringRef n) {
  return create(OpKind::LayerNorm, {x}, {{"eps", Attribute::ofFloat(eps)}}, n);
}
ValueId Builder::rope(ValueId x, ValueId pos, const RopeParams &p, std::optional<ValueId> ff,
                      llvm::StringRef n) {
  if (failed())
    return kNoValue;
  int64_t nDims = p.nDims ? p.nDims : (x < fn_.numValues() ? fn_.type(x).rowLength() : 0);
  llvm::SmallVector<ValueId, 3> ops{x, pos};
  if (ff)
    ops.push_back(*ff);
  return create(OpKind::Rope, ops,
                {{"mode", Attribute::ofEnum(static_cast<int64_t>(p.mode))},
                 {"n_dims", Attribute::ofInt(nDims)},
                 {"theta", Attribute::ofFloat(p.theta)},
                 {"freq_scale", Attribute::ofFloat(p.freqScale)},
                 {"ext_factor", Attribute::ofFloat(p.extFactor)},
                 {"attn_factor", Attribute::ofFloat(p.attnFactor)},
                 {"beta_fast", Attribute::ofFloat(p.betaFast)},
                 {"beta_slow", Attribute::ofFloat(p.betaSlow)},
                 {"n_ctx_orig", Attribute::ofInt(p.nCtxOrig)}},
                n);
}
ValueId Builder::softmax(ValueId x, std::optional<ValueId> mask, double s, double maxBias,
                         llvm::StringRef n) {
  llvm::SmallVector<ValueId, 2> ops{x};
  if (mask)
    ops.push_back(*mask);
  return create(OpKind::Softmax, ops,
                {{"scale", Attribute::ofFloat(s)}, {"max_bias", Attribute::ofFloat(maxBias)}}, n);
}
ValueId Builder::argsort(ValueId x, SortOrder order, llvm::StringRef n) {
  return create(OpKind::Argsort, {x}, {{"order", Attribute::ofEnum(static_cast<int64_t>(order))}}, n);
}
ValueId Builder::topK(ValueId x, int64_t k, llvm::StringRef n) {
  return create(OpKind::TopK, {x}, {{"k", Attribute::ofInt(k)}}, n);
}
ValueId Builder::sumRows(ValueId x, llvm::StringRef n) { return create(OpKind::SumRows, {x}, {}, n); }
ValueId Builder::mean(ValueId x, llvm::StringRef n) { return create(OpKind::Mean, {x}, {}, n); }
ValueId Builder::concat(ValueId a, ValueId b, int64_t axis, llvm::StringRef n) {
  return create(OpKind::Concat, {a, b}, {{"axis", Attribute::ofInt(axis)}}, n);
}
ValueId Builder::repeat(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::StringRef n) {
  return create(OpKind::Repeat, {x}, {{"shape", Attribute::ofInts(shape)}}, n);
}
ValueId Builder::reshape(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::StringRef n) {
  return create(OpKind::Reshape, {x}, {{"shape", Attribute::ofInts(shape)}}, n);
}
ValueId Builder::view(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides,
                      int64_t offset, llvm::StringRef n) {
  return create(OpKind::View, {x},
                {{"shape", Attribute::ofInts(shape)},
                 {"strides", Attribute::ofInts(strides)},
                 {"offset", Attribute::ofInt(offset)}},
                n);
}
ValueId Builder::permute(ValueId x, llvm::ArrayRef<int64_t> perm, llvm::StringRef n) {
  return create(OpKind::Permute, {x}, {{"perm", Attribute::ofInts(perm)}}, n);
}
ValueId Builder::transpose(ValueId x, llvm::StringRef n) { return create(OpKind::Transpose, {x}, {}, n); }
ValueId Builder::cont(ValueId x, llvm::StringRef n) { return create(OpKind::Cont, {x}, {}, n); }
ValueId Builder::convert(ValueId x, DType to, llvm::StringRef n) {
  return create(OpKind::Convert, {x}, {{"dtype", Attribute::ofDType(to)}}, n);
}
ValueId Builder::attention(ValueId q, ValueId k, ValueId v, ValueId pos, const AttentionParams &p,
                           std::optional<ValueId> sinks, llvm::StringRef n) {
  llvm::SmallVector<ValueId, 5> ops{q, k, v, pos};
  if (sinks)
    ops.push_back(*sinks);
  return create(OpKind::Attention, ops,
                {{"scale", Attribute::ofFloat(p.scale)},
                 {"window", Attribute::ofInt(p.window)},
                 {"softcap", Attribute::ofFloat(p.softcap)}},
                n);
}

} // namespace fg
