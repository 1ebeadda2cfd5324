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
  AttrList list = defaultAttrs(kind);
  for (const NamedAttr &a : attrs) {
    auto idx = info.findAttr(a.first);
    if (!idx)
      return fail(describe(kind, name) + ": unknown attribute '" + std::string(a.first) + "'");
    list[*idx] = a.second;
  }
  return createNode(kind, operands, std::move(list), name);
}

std::string Builder::describe(OpKind kind, llvm::StringRef name) const {
  std::string m(mnemonic(kind));
  return name.empty() ? m : m + " '%" + name.str() + "'";
}

ValueId Builder::createNode(OpKind kind, llvm::ArrayRef<ValueId> operands, AttrList attrs,
                            llvm::StringRef name) {
  if (failed())
    return kNoValue;
  std::string what = describe(kind, name);
  // Absent optional operands (kNoValue) trail and are dropped; a required
  // one, or an absent one followed by a present one, is an invalid operand.
  while (operands.size() > opInfo(kind).minOperands() && operands.back() == kNoValue)
    operands = operands.drop_back();
  llvm::SmallVector<TensorType, 4> types;
  for (ValueId v : operands) {
    if (v == kNoValue || v >= fn_.numValues())
      return fail(what + ": invalid operand");
    types.push_back(fn_.type(v));
  }
  llvm::SmallVector<TensorType, 1> results;
  if (llvm::Error e = inferResultTypes(kind, types, attrs, results))
    return fail(what + ": " + llvm::toString(std::move(e)));
  llvm::SmallVector<std::string, 1> names;
  for (size_t r = 0; r < results.size(); ++r)
    names.push_back(fn_.uniqueName(r == 0 ? name.str() : (name + "." + std::to_string(r)).str()));
  NodeId n = fn_.addNode(kind, operands, std::move(attrs), results, names);
  return fn_.node(n).result();
}

ValueId Builder::getRows(ValueId t, ValueId i, llvm::StringRef n) {
  return create(op::GetRowsArgs{.table = t, .indices = i}, n);
}
ValueId Builder::setRows(ValueId d, ValueId s, ValueId i, llvm::StringRef n) {
  return create(op::SetRowsArgs{.dest = d, .source = s, .indices = i}, n);
}
ValueId Builder::matmul(ValueId x, ValueId w, llvm::StringRef n) {
  return create(op::MatMulArgs{.x = x, .w = w}, n);
}
ValueId Builder::matmulId(ValueId x, ValueId w, ValueId ids, llvm::StringRef n) {
  return create(op::MatMulIdArgs{.x = x, .w = w, .ids = ids}, n);
}
ValueId Builder::add(ValueId a, ValueId b, llvm::StringRef n) {
  return create(op::AddArgs{.a = a, .b = b}, n);
}
ValueId Builder::sub(ValueId a, ValueId b, llvm::StringRef n) {
  return create(op::SubArgs{.a = a, .b = b}, n);
}
ValueId Builder::mul(ValueId a, ValueId b, llvm::StringRef n) {
  return create(op::MulArgs{.a = a, .b = b}, n);
}
ValueId Builder::div(ValueId a, ValueId b, llvm::StringRef n) {
  return create(op::DivArgs{.a = a, .b = b}, n);
}
ValueId Builder::addId(ValueId a, ValueId bias, ValueId ids, llvm::StringRef n) {
  return create(op::AddIdArgs{.a = a, .bias = bias, .ids = ids}, n);
}
ValueId Builder::scale(ValueId x, double s, double bias, llvm::StringRef n) {
  return create(op::ScaleArgs{.x = x, .scale = s, .bias = bias}, n);
}
ValueId Builder::clamp(ValueId x, double lo, double hi, llvm::StringRef n) {
  return create(op::ClampArgs{.x = x, .min = lo, .max = hi}, n);
}
ValueId Builder::unary(OpKind kind, ValueId x, llvm::StringRef n) {
  if (!opInfo(kind).has(kElementwise) || opInfo(kind).maxOperands() != 1 || !opInfo(kind).attrs.empty())
    return fail(std::string(mnemonic(kind)) + " is not an attribute-free unary op");
  return createNode(kind, {x}, {}, n);
}
ValueId Builder::glu(ValueId g, ValueId u, GluKind kind, double alpha, double limit, llvm::StringRef n) {
  return create(op::GluArgs{.gate = g, .up = u, .kind = kind, .alpha = alpha, .limit = limit}, n);
}
ValueId Builder::rmsNorm(ValueId x, double eps, llvm::StringRef n) {
  return create(op::RmsNormArgs{.x = x, .eps = eps}, n);
}
ValueId Builder::layerNorm(ValueId x, double eps, llvm::StringRef n) {
  return create(op::LayerNormArgs{.x = x, .eps = eps}, n);
}
ValueId Builder::rope(ValueId x, ValueId pos, const RopeParams &p, std::optional<ValueId> ff,
                      llvm::StringRef n) {
  if (failed())
    return kNoValue;
  int64_t nDims = p.nDims ? p.nDims : (x < fn_.numValues() ? fn_.type(x).rowLength() : 0);
  return create(op::RopeArgs{.x = x,
                             .positions = pos,
                             .freqFactors = ff.value_or(kNoValue),
                             .mode = p.mode,
                             .nDims = nDims,
                             .theta = p.theta,
                             .freqScale = p.freqScale,
                             .extFactor = p.extFactor,
                             .attnFactor = p.attnFactor,
                             .betaFast = p.betaFast,
                             .betaSlow = p.betaSlow,
                             .nCtxOrig = p.nCtxOrig},
                n);
}
ValueId Builder::softmax(ValueId x, std::optional<ValueId> mask, double s, double maxBias,
                         llvm::StringRef n) {
  return create(
      op::SoftmaxArgs{.x = x, .mask = mask.value_or(kNoValue), .scale = s, .maxBias = maxBias}, n);
}
ValueId Builder::argsort(ValueId x, SortOrder order, llvm::StringRef n) {
  return create(op::ArgsortArgs{.x = x, .order = order}, n);
}
ValueId Builder::topK(ValueId x, int64_t k, llvm::StringRef n) {
  return create(op::TopKArgs{.x = x, .k = k}, n);
}
ValueId Builder::sumRows(ValueId x, llvm::StringRef n) { return create(op::SumRowsArgs{.x = x}, n); }
ValueId Builder::mean(ValueId x, llvm::StringRef n) { return create(op::MeanArgs{.x = x}, n); }
ValueId Builder::concat(ValueId a, ValueId b, int64_t axis, llvm::StringRef n) {
  return create(op::ConcatArgs{.a = a, .b = b, .axis = axis}, n);
}
ValueId Builder::repeat(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::StringRef n) {
  return create(op::RepeatArgs{.x = x, .shape = shape}, n);
}
ValueId Builder::reshape(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::StringRef n) {
  return create(op::ReshapeArgs{.x = x, .shape = shape}, n);
}
ValueId Builder::view(ValueId x, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides,
                      int64_t offset, llvm::StringRef n) {
  return create(op::ViewArgs{.x = x, .shape = shape, .strides = strides, .offset = offset}, n);
}
ValueId Builder::permute(ValueId x, llvm::ArrayRef<int64_t> perm, llvm::StringRef n) {
  return create(op::PermuteArgs{.x = x, .perm = perm}, n);
}
ValueId Builder::transpose(ValueId x, llvm::StringRef n) {
  return create(op::TransposeArgs{.x = x}, n);
}
ValueId Builder::cont(ValueId x, llvm::StringRef n) { return create(op::ContArgs{.x = x}, n); }
ValueId Builder::convert(ValueId x, DType to, llvm::StringRef n) {
  return create(op::ConvertArgs{.x = x, .dtype = to}, n);
}
ValueId Builder::attention(ValueId q, ValueId k, ValueId v, ValueId pos, const AttentionParams &p,
                           std::optional<ValueId> sinks, llvm::StringRef n) {
  return create(op::AttentionArgs{.q = q,
                                  .kCache = k,
                                  .vCache = v,
                                  .positions = pos,
                                  .sinks = sinks.value_or(kNoValue),
                                  .scale = p.scale,
                                  .window = p.window,
                                  .softcap = p.softcap},
                n);
}

} // namespace fg
