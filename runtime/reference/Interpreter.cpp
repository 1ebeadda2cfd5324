//===- Interpreter.cpp - runs whole graphs on the host ---------------------===//
//
// Weights are materialised once and shared by every entry; state persists
// across runs. A run works on a copy of the state and commits the final
// version of each state value only when the whole entry succeeded, so a
// failed run leaves the state as it was. set_rows updates its destination in
// place when the old version has no later reader (the verifier's linearity
// rule); views and reshapes are computed as copies.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Eval.h"

#include "runtime/HostMemory.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <limits>

namespace fg {
namespace {

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

std::string valueName(const Function &fn, ValueId v) {
  const std::string &n = fn.value(v).name;
  return n.empty() ? std::to_string(v) : n;
}

/// Checks that `t` holds bytes for its type and that the type is `want`.
llvm::Error checkTensor(const HostTensor &t, const TensorType &want, const llvm::Twine &what) {
  if (t.type != want)
    return fail(what + " is " + t.type.str() + " but " + want.str() + " is expected");
  if (static_cast<int64_t>(t.data.size()) != want.bytes())
    return fail(what + " holds " + llvm::Twine(t.data.size()) + " bytes but " + want.str() +
                " needs " + llvm::Twine(want.bytes()));
  return llvm::Error::success();
}

} // namespace

ReferenceInterpreter::ReferenceInterpreter(const Graph &g) : graph_(g) {}

llvm::Error ReferenceInterpreter::bindWeight(llvm::StringRef name, HostTensor t) {
  const TensorType *declared = nullptr;
  for (const Function &fn : graph_.functions())
    for (const Argument &a : fn.arguments())
      if (a.role == ArgRole::Weight && fn.value(a.value).name == name)
        declared = &fn.type(a.value);
  if (!declared)
    return fail("bindWeight: the graph has no weight named '" + name + "'");
  if (llvm::Error e =
          checkTensor(t, *declared, "bindWeight: tensor bound to weight '" + name + "'"))
    return e;
  weights_[name] = std::move(t);
  return llvm::Error::success();
}

llvm::Error ReferenceInterpreter::prepare() {
  // Everything prepare allocates, checked before anything is: state (twice:
  // a run works on a copy), and weights made from initialisers (as f32
  // values, then in their dtype).
  uint64_t total = 0;
  llvm::StringSet<> counted;
  for (const Function &fn : graph_.functions())
    for (const Argument &a : fn.arguments()) {
      const std::string &name = fn.value(a.value).name;
      bool fromInit = a.role == ArgRole::Weight && !weights_.count(name);
      if ((a.role != ArgRole::State && !fromInit) || !counted.insert(name).second ||
          state_.count(name))
        continue;
      const TensorType &type = fn.type(a.value);
      llvm::Expected<uint64_t> bytes = checkHostTensor(type, roleName(a.role) + " '" + name + "'");
      if (!bytes)
        return bytes.takeError();
      uint64_t extra = fromInit ? static_cast<uint64_t>(type.numElements()) * 8 : *bytes;
      if (__builtin_add_overflow(total, *bytes + extra, &total))
        total = UINT64_MAX;
    }
  if (llvm::Error e = checkHostAllocation(total, "the reference interpreter's state and weights"))
    return e;
  // State first: it needs nothing from the caller.
  for (const Function &fn : graph_.functions())
    for (const Argument &a : fn.arguments()) {
      if (a.role != ArgRole::State)
        continue;
      const std::string &name = fn.value(a.value).name;
      const TensorType &type = fn.type(a.value);
      auto it = state_.find(name);
      if (it == state_.end())
        state_[name] = HostTensor::zeros(type);
      else if (it->second.type != type)
        return fail("state '" + name + "' is " + type.str() + " in entry '" + fn.name() + "' but " +
                    it->second.type.str() + " elsewhere");
    }
  for (const Function &fn : graph_.functions())
    for (const Argument &a : fn.arguments()) {
      if (a.role != ArgRole::Weight)
        continue;
      const std::string &name = fn.value(a.value).name;
      const TensorType &type = fn.type(a.value);
      auto it = weights_.find(name);
      if (it != weights_.end()) {
        if (it->second.type != type)
          return fail("weight '" + name + "' is " + type.str() + " in entry '" + fn.name() +
                      "' but " + it->second.type.str() + " elsewhere");
        continue;
      }
      HostTensor t;
      if (llvm::Error e = materializeInit(a.init, type, t))
        return fail("weight '" + name + "': " + llvm::toString(std::move(e)));
      weights_[name] = std::move(t);
    }
  prepared_ = true;
  return llvm::Error::success();
}

void ReferenceInterpreter::resetState() {
  for (auto &entry : state_)
    std::fill(entry.second.data.begin(), entry.second.data.end(), 0);
}

HostTensor *ReferenceInterpreter::state(llvm::StringRef name) {
  if (!prepared_)
    llvm::consumeError(prepare()); // run() reports a failure again, with context
  auto it = state_.find(name);
  return it == state_.end() ? nullptr : &it->second;
}

void ReferenceInterpreter::setActQuant(llvm::StringRef entry, std::vector<ActQuant> act) {
  actQuant_[entry] = std::move(act);
}

llvm::Error ReferenceInterpreter::run(llvm::StringRef entry,
                                      const llvm::StringMap<HostTensor> &inputs,
                                      std::vector<std::pair<std::string, HostTensor>> &outputs) {
  const Function *fn = graph_.lookup(entry);
  if (!fn) {
    std::string names;
    for (const Function &f : graph_.functions())
      names += (names.empty() ? "" : ", ") + f.name().str();
    return fail("the graph has no entry '" + entry + "' (entries: " + names + ")");
  }
  if (!prepared_)
    if (llvm::Error e = prepare())
      return e;
  auto actIt = actQuant_.find(entry);
  const std::vector<ActQuant> noAct, &act = actIt == actQuant_.end() ? noAct : actIt->second;
  std::string where = "entry '" + entry.str() + "'";

  size_t n = fn->numValues();
  std::vector<HostTensor> owned(n);
  std::vector<const HostTensor *> env(n, nullptr);
  auto own = [&](ValueId v, HostTensor t) {
    owned[v] = std::move(t);
    env[v] = &owned[v];
  };

  // Arguments.
  llvm::StringSet<> inputNames;
  for (const Argument &a : fn->arguments()) {
    const std::string &name = fn->value(a.value).name;
    const TensorType &type = fn->type(a.value);
    switch (a.role) {
    case ArgRole::Input: {
      inputNames.insert(name);
      auto it = inputs.find(name);
      if (it == inputs.end())
        return fail(where + ": missing input '" + name + "' (" + type.str() + ")");
      if (llvm::Error e = checkTensor(it->second, type, where + ": input '" + name + "'"))
        return e;
      env[a.value] = &it->second;
      break;
    }
    case ArgRole::Weight:
      env[a.value] = &weights_.find(name)->second;
      break;
    case ArgRole::State:
      own(a.value, state_.find(name)->second); // committed back only on success
      break;
    }
  }
  for (const auto &in : inputs)
    if (!inputNames.contains(in.getKey()))
      return fail(where + " has no input named '" + in.getKey() + "'");

  // The final version of each state value: follow its chain of updates.
  std::vector<std::pair<std::string, ValueId>> finalState;
  for (const Argument &a : fn->arguments()) {
    if (a.role != ArgRole::State)
      continue;
    ValueId cur = a.value;
    for (const Node &node : fn->nodes())
      for (unsigned i = 0; i < node.info().numUpdatedStates(); ++i)
        if (node.operands[i] == cur) {
          cur = node.results[i];
          break;
        }
    finalState.emplace_back(fn->value(a.value).name, cur);
  }

  // Last reader of each value; results and final state versions live to the end.
  constexpr size_t kForever = std::numeric_limits<size_t>::max();
  std::vector<size_t> lastUse(n, 0);
  for (size_t i = 0; i < fn->numNodes(); ++i)
    for (ValueId v : fn->nodes()[i].operands)
      lastUse[v] = i;
  for (ValueId v : fn->results())
    lastUse[v] = kForever;
  for (auto &s : finalState)
    lastUse[s.second] = kForever;

  llvm::SmallVector<const HostTensor *, 5> ops;
  llvm::SmallVector<HostTensor, 1> results;
  for (size_t i = 0; i < fn->numNodes(); ++i) {
    const Node &node = fn->nodes()[i];
    auto nodeError = [&](llvm::Error e) {
      return fail(where + ", value '%" + valueName(*fn, node.result()) +
                  "': " + llvm::toString(std::move(e)));
    };
    for (ValueId r : node.results)
      if (llvm::Expected<uint64_t> bytes = checkHostTensor(fn->type(r), "value"); !bytes)
        return nodeError(bytes.takeError());
    ops.clear();
    for (ValueId v : node.operands) {
      if (!env[v])
        return nodeError(fail("operand '%" + valueName(*fn, v) + "' has no value"));
      ops.push_back(env[v]);
    }
    ValueId dst = node.operands.empty() ? kNoValue : node.operands[0];
    bool inPlace = node.kind == OpKind::SetRows && env[dst] == &owned[dst] && lastUse[dst] == i &&
                   llvm::count(node.operands, dst) == 1; // never move out a value read here too
    if (inPlace) {
      // Same checks as evalNode, then write into the old version's storage.
      llvm::SmallVector<TensorType, 3> types;
      for (const HostTensor *t : ops)
        types.push_back(t->type);
      llvm::SmallVector<TensorType, 1> resultTypes;
      if (llvm::Error e = inferResultTypes(node.kind, types, node.attrs, resultTypes))
        return nodeError(std::move(e));
      HostTensor t = std::move(owned[dst]);
      env[dst] = nullptr;
      if (llvm::Error e = ref::setRowsInPlace(t, *ops[1], *ops[2]))
        return nodeError(fail("'set_rows': " + llvm::toString(std::move(e))));
      own(node.result(), std::move(t));
    } else {
      results.clear();
      if (llvm::Error e = evalNode(node, ops, results, i < act.size() ? act[i] : ActQuant::Exact))
        return nodeError(std::move(e));
      for (size_t r = 0; r < results.size(); ++r)
        own(node.results[r], std::move(results[r]));
    }
    // Free what nobody reads any more.
    for (ValueId v : node.operands)
      if (lastUse[v] == i && env[v] == &owned[v]) {
        owned[v] = HostTensor();
        env[v] = nullptr;
      }
  }

  outputs.clear();
  for (ValueId v : fn->results()) {
    if (!env[v])
      return fail(where + ": result '%" + valueName(*fn, v) + "' was never computed");
    outputs.emplace_back(valueName(*fn, v), *env[v]);
  }
  for (auto &[name, v] : finalState)
    state_[name] = std::move(owned[v]);
  return llvm::Error::success();
}

} // namespace fg
