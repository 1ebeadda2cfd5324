#include "ir/Graph.h"

#include <cassert>

namespace fg {

llvm::StringRef roleName(ArgRole r) {
  switch (r) {
  case ArgRole::Input:
    return "input";
  case ArgRole::Weight:
    return "weight";
  case ArgRole::State:
    return "state";
  }
  return "?";
}

bool WeightInit::operator==(const WeightInit &o) const {
  return kind == o.kind && seed == o.seed && mean == o.mean && std == o.std && min == o.min &&
         max == o.max && value == o.value && file == o.file && name == o.name;
}

static std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string WeightInit::str() const {
  switch (kind) {
  case Kind::None:
    return "";
  case Kind::Normal: {
    std::string s = "normal(seed = " + std::to_string(seed) + ", std = " + printFloat(std);
    if (mean != 0)
      s += ", mean = " + printFloat(mean);
    return s + ")";
  }
  case Kind::Uniform:
    return "uniform(seed = " + std::to_string(seed) + ", min = " + printFloat(min) +
           ", max = " + printFloat(max) + ")";
  case Kind::Constant:
    return "constant(value = " + printFloat(value) + ")";
  case Kind::Tensor:
    return "tensor(file = " + quoted(file) + ", name = " + quoted(name) + ")";
  }
  return "";
}

llvm::StringRef bindKindName(BindKind k) {
  switch (k) {
  case BindKind::Other:
    return "other";
  case BindKind::Tokens:
    return "tokens";
  case BindKind::Positions:
    return "positions";
  }
  return "other";
}

llvm::StringRef entryRoleName(EntryRole r) {
  switch (r) {
  case EntryRole::Other:
    return "other";
  case EntryRole::Decode:
    return "decode";
  case EntryRole::Prefill:
    return "prefill";
  }
  return "other";
}

InputBinding Function::binding(llvm::StringRef name) const {
  ValueId v = lookup(name);
  const Argument *a = v == kNoValue ? nullptr : argumentOf(v);
  return a && a->role == ArgRole::Input ? a->bind : InputBinding{};
}

void Function::copyContract(const Function &from) {
  assert(from.args_.size() == args_.size() && "copyContract needs the same arguments");
  contract_ = from.contract_;
  for (size_t i = 0; i < args_.size() && i < from.args_.size(); ++i)
    args_[i].bind = from.args_[i].bind;
}

ValueId Function::lookup(llvm::StringRef name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? kNoValue : it->second;
}

ValueId Function::addArgument(std::string name, TensorType type, ArgRole role, WeightInit init,
                              Loc loc) {
  ValueId id = static_cast<ValueId>(values_.size());
  Value v;
  v.name = std::move(name);
  v.type = std::move(type);
  v.index = static_cast<uint32_t>(args_.size());
  if (!v.name.empty())
    byName_[v.name] = id;
  values_.push_back(std::move(v));
  args_.push_back({id, role, std::move(init), loc, {}});
  return id;
}

const Argument *Function::argumentOf(ValueId v) const {
  if (!values_[v].isArgument())
    return nullptr;
  return &args_[values_[v].index];
}

NodeId Function::addNode(OpKind kind, llvm::ArrayRef<ValueId> operands, AttrList attrs,
                         llvm::ArrayRef<TensorType> resultTypes,
                         llvm::ArrayRef<std::string> resultNames, Loc loc) {
  assert(attrs.size() == opInfo(kind).attrs.size() && "one attribute per declaration");
  NodeId id = static_cast<NodeId>(nodes_.size());
  Node n;
  n.kind = kind;
  n.operands.assign(operands.begin(), operands.end());
  n.attrs = std::move(attrs);
  n.loc = loc;
  for (size_t r = 0; r < resultTypes.size(); ++r) {
    ValueId vid = static_cast<ValueId>(values_.size());
    Value v;
    if (r < resultNames.size())
      v.name = resultNames[r];
    v.type = resultTypes[r];
    v.def = id;
    v.index = static_cast<uint32_t>(r);
    if (!v.name.empty())
      byName_[v.name] = vid;
    values_.push_back(std::move(v));
    n.results.push_back(vid);
  }
  nodes_.push_back(std::move(n));
  return id;
}

void Function::replaceAllUsesWith(ValueId from, ValueId to) {
  for (Node &n : nodes_)
    for (ValueId &o : n.operands)
      if (o == from)
        o = to;
  for (ValueId &r : results_)
    if (r == from)
      r = to;
}

void Function::eraseNodes(llvm::ArrayRef<bool> dead) {
  assert(dead.size() == nodes_.size() && "one flag per node");
  std::vector<Node> kept;
  kept.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (dead[i]) {
      for (ValueId r : nodes_[i].results) {
        // Orphan the value: it no longer has a producer or a name.
        byName_.erase(values_[r].name);
        values_[r].name.clear();
        values_[r].def = ~0u - 1;
      }
      continue;
    }
    NodeId newId = static_cast<NodeId>(kept.size());
    for (ValueId r : nodes_[i].results)
      values_[r].def = newId;
    kept.push_back(std::move(nodes_[i]));
  }
  nodes_ = std::move(kept);
}

std::vector<unsigned> Function::useCounts() const {
  std::vector<unsigned> uses(values_.size(), 0);
  for (const Node &n : nodes_)
    for (ValueId o : n.operands)
      ++uses[o];
  for (ValueId r : results_)
    ++uses[r];
  return uses;
}

std::string Function::uniqueName(llvm::StringRef base) const {
  if (base.empty())
    return "";
  if (!byName_.count(base))
    return base.str();
  for (unsigned i = 1;; ++i) {
    std::string candidate = (base + "." + std::to_string(i)).str();
    if (!byName_.count(candidate))
      return candidate;
  }
}

const Function *Graph::lookup(llvm::StringRef name) const {
  for (const Function &f : functions_)
    if (f.name() == name)
      return &f;
  return nullptr;
}

Function *Graph::lookup(llvm::StringRef name) {
  for (Function &f : functions_)
    if (f.name() == name)
      return &f;
  return nullptr;
}

} // namespace fg
