//===- Verifier.cpp - structural and type checks of a Graph ---------------===//
//
// Checks, per entry: names are well formed and unique; every operand is
// defined before use; every node carries its declared attributes and its
// result types equal what the type rule infers; results are defined values.
// State is linear: an updater (an op with kUpdatesState) takes a state
// argument or a version of one as operand 0 (and 1, kUpdatesTwoStates), each version is updated at
// most once, and nothing reads a version — directly or through a view of it — after its update in
// program order:
//
//   %k.1 = set_rows(%k, %src, %pos) : f16[16, 2, 64]
//   %a = attention(%q, %k, %v, %pos) {scale = 0.125} : ...   // error: reads %k after its update
//
// Across entries, weights and state of the same name agree on role and type
// (and weights on their initialiser).
//
//===----------------------------------------------------------------------===//
#include "ir/Verifier.h"

#include "ir/Diag.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <vector>

namespace fg {
namespace {

constexpr int64_t kNumDTypes = 0
#define FG_DTYPE(Kind, name, blockElems, blockBytes, flags) +1
#include "ir/DTypes.def"
    ;

/// The node producing `v`, or null for arguments and values of erased nodes.
const Node *liveProducer(const Function &fn, ValueId v) {
  if (v >= fn.numValues() || fn.value(v).isArgument() || fn.value(v).def >= fn.numNodes())
    return nullptr;
  return fn.producer(v);
}

bool validName(llvm::StringRef s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.'))
      return false;
  return true;
}

class FunctionVerifier {
public:
  FunctionVerifier(const Function &fn, llvm::StringRef file) : fn_(fn), file_(file) {}

  llvm::Error run() {
    if (!validName(fn_.name()))
      return makeError("graph name '@" + fn_.name() +
                       "' must be non-empty and use only [A-Za-z0-9_.]");
    if (auto e = checkArguments())
      return e;
    if (auto e = checkNodes())
      return e;
    if (auto e = checkResults())
      return e;
    if (auto e = checkRanges())
      return e;
    return checkStateLinearity();
  }

private:
  bool valid(ValueId v) const { return v < fn_.numValues(); }

  /// `%name`, or a description for an unnamed value.
  std::string describe(ValueId v) const {
    if (!valid(v))
      return "<invalid value>";
    const Value &val = fn_.value(v);
    if (!val.name.empty())
      return "%" + val.name;
    if (val.isArgument())
      return "unnamed argument " + std::to_string(val.index);
    return "unnamed result " + std::to_string(val.index) + " of node " + std::to_string(val.def);
  }

  /// An error at `loc` when it is known, else naming the entry (the message
  /// names the value).
  llvm::Error error(Loc loc, const llvm::Twine &msg) const {
    if (loc.valid())
      return makeError(file_, loc, msg);
    return makeError("graph @" + fn_.name() + ": " + msg);
  }

  llvm::Error checkName(ValueId v, Loc loc) {
    const std::string &name = fn_.value(v).name;
    if (name.empty())
      return llvm::Error::success();
    if (!validName(name))
      return error(loc, "value name '%" + name + "' may only use [A-Za-z0-9_.]");
    if (!names_.insert({name, v}).second)
      return error(loc, "redefinition of value '%" + name + "'");
    return llvm::Error::success();
  }

  llvm::Error checkArguments() {
    defined_.assign(fn_.numValues(), false);
    for (size_t i = 0; i < fn_.arguments().size(); ++i) {
      const Argument &a = fn_.arguments()[i];
      if (!valid(a.value) || !fn_.value(a.value).isArgument() || fn_.value(a.value).index != i)
        return error(a.loc, "argument " + std::to_string(i) + " is not bound to its value");
      if (auto e = checkName(a.value, a.loc))
        return e;
      const TensorType &t = fn_.type(a.value);
      for (int64_t d : t.shape)
        if (d < 0)
          return error(a.loc,
                       "argument " + describe(a.value) + " has a negative dimension in " + t.str());
      int64_t block = dtypeInfo(t.dtype).blockElems;
      if (block > 1 && t.rowLength() % block)
        return error(a.loc, "rows of " + describe(a.value) + ": " + t.str() +
                                " are not whole blocks of " + std::to_string(block));
      if (a.role != ArgRole::Weight && a.init.kind != WeightInit::Kind::None)
        return error(a.loc, "only weights take an initialiser, but " + describe(a.value) + " is " +
                                roleName(a.role).str());
      if (auto e = checkBinding(a))
        return e;
      defined_[a.value] = true;
    }
    return checkContract();
  }

  /// A binding sits on an integer input and names a non-empty range, if any;
  /// under a role, the bound inputs hold one value per token.
  llvm::Error checkBinding(const Argument &a) {
    if (a.bind.empty())
      return llvm::Error::success();
    const TensorType &t = fn_.type(a.value);
    if (a.role != ArgRole::Input)
      return error(a.loc, "only inputs take a binding, but " + describe(a.value) + " is " +
                              roleName(a.role).str());
    if (!isInteger(t.dtype))
      return error(a.loc, "input " + describe(a.value) + " is bound to " +
                              bindKindName(a.bind.kind).str() + " but is " + t.str() +
                              ", not an integer tensor");
    if (a.bind.lo > a.bind.hi || (a.bind.lo == a.bind.hi && a.bind.lo != 0))
      return error(a.loc, "input " + describe(a.value) + " has an empty range [" +
                              llvm::Twine(a.bind.lo) + ", " + llvm::Twine(a.bind.hi) + ")");
    const EntryContract &c = fn_.contract();
    if (c.role != EntryRole::Other && a.bind.kind != BindKind::Other && t.numElements() != c.tokens)
      return error(a.loc, "input " + describe(a.value) + " (" + bindKindName(a.bind.kind).str() +
                              ") is " + t.str() + " but the " + entryRoleName(c.role).str() +
                              " entry runs " + llvm::Twine(c.tokens) + " tokens");
    return llvm::Error::success();
  }

  llvm::Error checkContract() {
    const EntryContract &c = fn_.contract();
    bool ok = c.role == EntryRole::Other    ? c.tokens == 0
              : c.role == EntryRole::Decode ? c.tokens == 1
                                            : c.tokens >= 1;
    if (!ok)
      return error(Loc{}, "role " + entryRoleName(c.role).str() + " with " + llvm::Twine(c.tokens) +
                              " tokens (decode runs 1, prefill N >= 1, "
                              "other 0)");
    return llvm::Error::success();
  }

  /// The operand whose values index the rows of `node`'s tables
  /// (rowTables): get_rows' indices, an updater's `indices` (set_rows and
  /// the fused cache writers), else its `positions` (attention's, and
  /// fused.rope_kv_attention's, which writes both caches at them); npos when
  /// it has none.
  static size_t rowIndexOperand(const Node &node) {
    const size_t i = operandNamed(node, "indices");
    return i != std::string_view::npos ? i : operandNamed(node, "positions");
  }

  /// The index of `node`'s operand named `name`, or npos.
  static size_t operandNamed(const Node &node, std::string_view name) {
    const auto &names = node.info().operandNames;
    const size_t i = static_cast<size_t>(llvm::find(names, name) - names.begin());
    return i < names.size() && i < node.operands.size() ? i : std::string_view::npos;
  }

  /// The operands whose rows `node`'s row index names: get_rows' table,
  /// every state an updater updates, and the caches an attention reads
  /// (operands named k_cache / v_cache).
  static llvm::SmallVector<size_t, 2> rowTables(const Node &node) {
    llvm::SmallVector<size_t, 2> out;
    if (node.kind == OpKind::GetRows) {
      out.push_back(0);
      return out;
    }
    for (unsigned t = 0; t < node.info().numUpdatedStates() && t < node.operands.size(); ++t)
      out.push_back(t);
    for (std::string_view cache : {"k_cache", "v_cache"})
      if (size_t i = operandNamed(node, cache);
          i != std::string_view::npos && !llvm::is_contained(out, i))
        out.push_back(i);
    return out;
  }

  /// A ranged input that indexes rows (get_rows' index, an updater's rows,
  /// the positions of the cache rows attention reads) names only rows that
  /// exist: [lo, hi) inside [0, rows). So the executors' range checks are
  /// enough to keep every gather, cache write and cache read in bounds.
  llvm::Error checkRanges() {
    for (const Node &node : fn_.nodes()) {
      const llvm::SmallVector<size_t, 2> tables = rowTables(node);
      const size_t idxOperand = tables.empty() ? std::string_view::npos : rowIndexOperand(node);
      if (idxOperand == std::string_view::npos)
        continue;
      ValueId idx = node.operands[idxOperand];
      const Argument *a = fn_.argumentOf(idx);
      if (!a || a->role != ArgRole::Input || !a->bind.hasRange() || fn_.type(idx).shape.empty())
        continue;
      // get_rows(table [B.., R, C..], idx [B.., N]), set_rows(dest, src, idx),
      // attention(q, k [R, ..], v, positions [T]): R sits at the rank of idx,
      // minus one.
      const size_t rowDim = fn_.type(idx).shape.size() - 1;
      for (size_t t : tables) {
        const TensorType &table = fn_.type(node.operands[t]);
        if (rowDim >= table.shape.size())
          continue; // the op's type rule reports this
        int64_t rows = table.shape[rowDim];
        if (a->bind.lo < 0 || a->bind.hi > rows)
          return error(a->loc, "input " + describe(idx) + " is bound to [" +
                                   llvm::Twine(a->bind.lo) + ", " + llvm::Twine(a->bind.hi) +
                                   ") but indexes the " + llvm::Twine(rows) + " rows of " +
                                   describe(node.operands[t]));
      }
    }
    return llvm::Error::success();
  }

  llvm::Error checkNodes() {
    size_t numOps = allOps().size();
    for (NodeId n = 0; n < fn_.numNodes(); ++n) {
      const Node &node = fn_.node(n);
      if (static_cast<size_t>(node.kind) >= numOps)
        return error(node.loc, "node " + std::to_string(n) + " has an unknown op kind");
      const OpInfo &info = node.info();
      std::string op = "'" + std::string(info.mnemonic) + "'";
      if (node.attrs.size() != info.attrs.size())
        return error(node.loc, op + " carries " + std::to_string(node.attrs.size()) +
                                   " attributes, expected " + std::to_string(info.attrs.size()));
      for (size_t i = 0; i < info.attrs.size(); ++i) {
        const AttrSpec &spec = info.attrs[i];
        int64_t v = node.attrs[i].i;
        bool bad = (spec.kind == AttrKind::Enum &&
                    (v < 0 || v >= static_cast<int64_t>(spec.words.size()))) ||
                   (spec.kind == AttrKind::DType && (v < 0 || v >= kNumDTypes));
        if (bad)
          return error(node.loc, op + " attribute '" + std::string(spec.name) +
                                     "' is out of range: " + std::to_string(v));
      }
      llvm::SmallVector<TensorType, 4> operandTypes;
      for (size_t o = 0; o < node.operands.size(); ++o) {
        ValueId v = node.operands[o];
        if (!valid(v) || !defined_[v])
          return error(node.loc, op + " operand " + std::to_string(o) + " (" + describe(v) +
                                     ") is not defined before its use");
        operandTypes.push_back(fn_.type(v));
      }
      llvm::SmallVector<TensorType, 1> inferred;
      if (llvm::Error e = inferResultTypes(node.kind, operandTypes, node.attrs, inferred))
        return error(node.loc, llvm::toString(std::move(e)));
      if (inferred.size() != node.results.size())
        return error(node.loc, op + " has " + std::to_string(node.results.size()) +
                                   " result(s), expected " + std::to_string(inferred.size()));
      for (size_t r = 0; r < node.results.size(); ++r) {
        ValueId v = node.results[r];
        if (!valid(v) || fn_.value(v).def != n || fn_.value(v).index != r)
          return error(node.loc, op + " result " + std::to_string(r) + " is not bound to node " +
                                     std::to_string(n));
        if (auto e = checkName(v, node.loc))
          return e;
        if (fn_.type(v) != inferred[r])
          return error(node.loc, "declared type " + fn_.type(v).str() +
                                     " does not match inferred " + inferred[r].str() + " (" +
                                     describe(v) + ")");
        defined_[v] = true;
      }
    }
    return llvm::Error::success();
  }

  llvm::Error checkResults() {
    for (size_t i = 0; i < fn_.results().size(); ++i) {
      ValueId v = fn_.results()[i];
      if (!valid(v) || !defined_[v])
        return error({}, "result " + std::to_string(i) + " (" + describe(v) + ") is not defined");
    }
    return llvm::Error::success();
  }

  /// The value `v` aliases: follows view-like ops to the value they view.
  /// Memoised per value, so a long chain of views is walked once, not at
  /// every use (which made verifying 20000 chained reshapes take seconds).
  ValueId aliasRoot(ValueId v) {
    llvm::SmallVector<ValueId, 8> path;
    ValueId root = v;
    for (size_t steps = 0; steps <= fn_.numNodes(); ++steps) {
      if (root < rootMemo_.size() && rootMemo_[root] != kNoValue) {
        root = rootMemo_[root];
        break;
      }
      const Node *p = liveProducer(fn_, root);
      if (!p || !p->info().has(kViewLike) || p->operands.empty())
        break;
      path.push_back(root);
      root = p->operands[0];
    }
    for (ValueId x : path)
      if (x < rootMemo_.size())
        rootMemo_[x] = root;
    return root;
  }

  std::string where(NodeId n) const {
    const Node &node = fn_.node(n);
    if (node.loc.valid())
      return "at line " + std::to_string(node.loc.line);
    return "by " + (node.results.empty() ? "node " + std::to_string(n) : describe(node.result()));
  }

  llvm::Error checkStateLinearity() {
    // Which node updated each state version.
    llvm::DenseMap<ValueId, NodeId> updatedBy;
    for (NodeId n = 0; n < fn_.numNodes(); ++n) {
      const Node &node = fn_.node(n);
      std::string op = "'" + std::string(node.info().mnemonic) + "'";
      const unsigned updated = std::min<unsigned>(node.info().numUpdatedStates(),
                                                  static_cast<unsigned>(node.operands.size()));
      for (unsigned i = 0; i < updated; ++i) {
        auto it = updatedBy.find(node.operands[i]);
        if (it != updatedBy.end())
          return error(node.loc, "state " + describe(it->first) + " is updated twice (first " +
                                     where(it->second) + ")");
        for (unsigned j = 0; j < i; ++j)
          if (node.operands[j] == node.operands[i])
            return error(node.loc, op + " updates state " + describe(node.operands[i]) +
                                       " twice (operands " + std::to_string(j) + " and " +
                                       std::to_string(i) + ")");
      }
      // Reads of versions that an earlier node updated (through views too).
      for (ValueId o : node.operands) {
        auto it = updatedBy.find(aliasRoot(o));
        if (it == updatedBy.end())
          continue;
        return error(node.loc, "state " + describe(it->first) + " is read after its update " +
                                   where(it->second));
      }
      if (!node.info().has(kUpdatesState))
        continue;
      if (node.operands.size() < node.info().numUpdatedStates())
        return error(node.loc, op + " updates " + std::to_string(node.info().numUpdatedStates()) +
                                   " states but has " + std::to_string(node.operands.size()) +
                                   " operands");
      for (unsigned i = 0; i < updated; ++i) {
        ValueId dst = node.operands[i];
        if (const Argument *arg = fn_.argumentOf(dst)) {
          if (arg->role != ArgRole::State)
            return error(node.loc, op + " can only update state, but " + describe(dst) + " is " +
                                       (arg->role == ArgRole::Weight ? "a weight" : "an input"));
        } else if (!liveProducer(fn_, dst) || fn_.updatedOperand(dst) == kNoValue) {
          return error(node.loc, op + " operand " + std::to_string(i) + " (" + describe(dst) +
                                     ") must be a state argument or a version of one");
        }
        updatedBy.insert({dst, n});
      }
    }
    for (ValueId r : fn_.results()) {
      auto it = updatedBy.find(aliasRoot(r));
      if (it != updatedBy.end())
        return error({}, "result " + describe(r) + " reads state " + describe(it->first) +
                             " after its update " + where(it->second));
    }
    return llvm::Error::success();
  }

  const Function &fn_;
  llvm::StringRef file_;
  std::vector<ValueId> rootMemo_ = std::vector<ValueId>(fn_.numValues(), kNoValue);
  std::vector<bool> defined_;
  llvm::StringMap<ValueId> names_;
};

} // namespace

llvm::Error verifyFunction(const Function &fn, llvm::StringRef filename) {
  return FunctionVerifier(fn, filename).run();
}

llvm::Error verifyGraph(const Graph &g, llvm::StringRef filename) {
  llvm::StringMap<const Function *> entries;
  struct Shared {
    const Function *fn;
    const Argument *arg;
  };
  llvm::StringMap<Shared> shared;
  for (const Function &fn : g.functions()) {
    if (!entries.insert({fn.name(), &fn}).second)
      return makeError("duplicate graph name '@" + fn.name() + "'");
    if (auto e = verifyFunction(fn, filename))
      return e;
    for (const Argument &a : fn.arguments()) {
      const std::string &name = fn.value(a.value).name;
      if (name.empty())
        continue;
      auto [it, inserted] = shared.insert({name, Shared{&fn, &a}});
      if (inserted)
        continue;
      const Argument &first = *it->second.arg;
      const Function &firstFn = *it->second.fn;
      auto fail = [&](const llvm::Twine &msg) {
        std::string at = " in @" + firstFn.name().str();
        if (a.loc.valid())
          return makeError(filename, a.loc, msg + at);
        return makeError("graph @" + fn.name() + ": " + msg + at);
      };
      bool sharedRole = a.role != ArgRole::Input || first.role != ArgRole::Input;
      if (!sharedRole)
        continue;
      if (a.role != first.role)
        return fail("'%" + name + "' is " + roleName(a.role) + " here but " + roleName(first.role));
      if (fn.type(a.value) != firstFn.type(first.value))
        return fail(std::string(roleName(a.role)) + " '%" + name + "' has type " +
                    fn.type(a.value).str() + " here but " + firstFn.type(first.value).str());
      if (a.role == ArgRole::Weight && !(a.init == first.init)) {
        std::string mine = a.init.str(), theirs = first.init.str();
        return fail("weight '%" + name + "' has init " + (mine.empty() ? "(none)" : mine) +
                    " here but " + (theirs.empty() ? "(none)" : theirs));
      }
    }
  }
  return llvm::Error::success();
}

ValueId stateRoot(const Function &fn, ValueId v) {
  for (size_t steps = 0; steps <= fn.numNodes() && v < fn.numValues(); ++steps) {
    if (const Argument *arg = fn.argumentOf(v))
      return arg->role == ArgRole::State ? v : kNoValue;
    const Node *p = liveProducer(fn, v);
    if (!p || p->operands.empty())
      return kNoValue;
    if (p->info().has(kViewLike)) {
      v = p->operands[0];
      continue;
    }
    v = fn.updatedOperand(v);
    if (v == kNoValue)
      return kNoValue;
  }
  return kNoValue;
}

} // namespace fg
