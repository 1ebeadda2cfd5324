//===- Graph.h - SSA dataflow graphs with named entries ----------*- C++ -*-===//
//
// A Graph is what a model lowers to: one or more named entry Functions
// (`decode`, `prefill_64`, ...) that share weights and state by name. A
// Function holds values (SSA: one producer each), its arguments with roles,
// its nodes in program order and its results.
//
//   graph @decode(input %tokens: i32[1], weight %emb: f16[512, 256] {init = ...}) {
//     %x = get_rows(%emb, %tokens) : f32[1, 256]
//     return %x
//   }
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Attr.h"
#include "ir/OpTable.h"
#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace fg {

using ValueId = uint32_t;
constexpr ValueId kNoValue = ~0u;
using NodeId = uint32_t;
/// No node (an argument's producer; a launch that computes no node of the graph).
constexpr NodeId kNoNode = ~0u;

enum class ArgRole : uint8_t {
  Input,  ///< per-run data (token ids, positions), copied in before each run
  Weight, ///< constant, bound at load
  State,  ///< persistent and mutable (KV cache); updated in place
};
llvm::StringRef roleName(ArgRole r);

/// What an input carries, so checks and drivers never go by its name.
enum class BindKind : uint8_t {
  Other,     ///< anything else
  Tokens,    ///< token ids: rows of the embedding table
  Positions, ///< absolute positions: rows of the KV cache
};
llvm::StringRef bindKindName(BindKind k);

/// The contract of an input argument: its kind and the values it may hold,
/// [lo, hi) (none when lo == hi). Printed `{bind = tokens, range = [0, 512)}`.
/// Executors check every value against the range (the CPU before the step, the
/// CUDA program on the device) and name the input when one is outside.
struct InputBinding {
  BindKind kind = BindKind::Other;
  int64_t lo = 0, hi = 0;
  bool hasRange() const { return lo < hi; }
  bool empty() const { return kind == BindKind::Other && !hasRange(); }
  bool operator==(const InputBinding &o) const {
    return kind == o.kind && lo == o.lo && hi == o.hi;
  }
};

/// What an entry is for in the decoder ABI. Printed as the function's
/// attribute dictionary: `graph @prefill_64(...) attributes {role = prefill, n = 64}`.
enum class EntryRole : uint8_t {
  Other,   ///< no role (a graph written without one; nothing is inferred from names)
  Decode,  ///< one token per step
  Prefill, ///< a chunk of `tokens` prompt tokens
};
llvm::StringRef entryRoleName(EntryRole r);

struct EntryContract {
  EntryRole role = EntryRole::Other;
  int64_t tokens = 0; ///< tokens per run: 1 for decode, N for prefill; 0 for other
  bool operator==(const EntryContract &o) const { return role == o.role && tokens == o.tokens; }
};

/// How a weight gets its bytes.
struct WeightInit {
  enum class Kind : uint8_t {
    None,     ///< bound by the caller (or a frontend's weight table)
    Normal,   ///< normal(seed = S, std = σ[, mean = μ])
    Uniform,  ///< uniform(seed = S, min = a, max = b)
    Constant, ///< constant(value = v)
    Tensor,   ///< tensor(file = "model.gguf", name = "blk.0.attn_q.weight")
  };
  Kind kind = Kind::None;
  uint64_t seed = 0;
  double mean = 0, std = 0, min = 0, max = 0, value = 0;
  std::string file, name;

  static WeightInit normal(uint64_t seed, double std, double mean = 0) {
    WeightInit w;
    w.kind = Kind::Normal;
    w.seed = seed;
    w.std = std;
    w.mean = mean;
    return w;
  }
  static WeightInit uniform(uint64_t seed, double lo, double hi) {
    WeightInit w;
    w.kind = Kind::Uniform;
    w.seed = seed;
    w.min = lo;
    w.max = hi;
    return w;
  }
  static WeightInit constant(double v) {
    WeightInit w;
    w.kind = Kind::Constant;
    w.value = v;
    return w;
  }
  static WeightInit tensor(std::string file, std::string name) {
    WeightInit w;
    w.kind = Kind::Tensor;
    w.file = std::move(file);
    w.name = std::move(name);
    return w;
  }
  bool operator==(const WeightInit &o) const;
  /// `normal(seed = 7, std = 0.02)`; empty for None.
  std::string str() const;
};

/// A source position in `.fg` text (1-based), or none for built graphs.
struct Loc {
  uint32_t line = 0, col = 0;
  bool valid() const { return line != 0; }
};

struct Value {
  std::string name; ///< without '%'; empty: printed as a number
  TensorType type;
  NodeId def = ~0u;   ///< producing node, or ~0u for an argument
  uint32_t index = 0; ///< result number of `def`, or argument number
  bool isArgument() const { return def == ~0u; }
};

struct Argument {
  ValueId value;
  ArgRole role;
  WeightInit init; ///< weights only
  Loc loc;
  InputBinding bind; ///< inputs only
};

struct Node {
  OpKind kind;
  llvm::SmallVector<ValueId, 4> operands;
  llvm::SmallVector<ValueId, 1> results;
  /// One per declared attribute, in declaration order; read them through
  /// the typed views of ir/OpViews.h (op::RmsNorm(node).eps()).
  AttrList attrs;
  Loc loc;

  const OpInfo &info() const { return opInfo(kind); }
  ValueId result() const { return results.front(); }
};

class Function {
public:
  explicit Function(std::string name = "main") : name_(std::move(name)) {}

  llvm::StringRef name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  /// The entry's role (decode / prefill N / other) in the decoder ABI.
  const EntryContract &contract() const { return contract_; }
  void setContract(EntryContract c) { contract_ = c; }
  /// The binding of input `name` (kind Other when none or not an input).
  InputBinding binding(llvm::StringRef name) const;
  /// Copies the role and every argument's binding of `from`, whose arguments
  /// must be the same in the same order (passes that rebuild a function).
  void copyContract(const Function &from);

  // --- values -----------------------------------------------------------------
  const Value &value(ValueId v) const { return values_[v]; }
  Value &value(ValueId v) { return values_[v]; }
  const TensorType &type(ValueId v) const { return values_[v].type; }
  size_t numValues() const { return values_.size(); }
  /// The value named `name` (without '%'), or kNoValue.
  ValueId lookup(llvm::StringRef name) const;

  // --- arguments and results ----------------------------------------------------
  ValueId addArgument(std::string name, TensorType type, ArgRole role, WeightInit init = {},
                      Loc loc = {});
  llvm::ArrayRef<Argument> arguments() const { return args_; }
  std::vector<Argument> &arguments() { return args_; }
  /// The argument whose value is `v`, or null.
  const Argument *argumentOf(ValueId v) const;

  llvm::ArrayRef<ValueId> results() const { return results_; }
  void addResult(ValueId v) { results_.push_back(v); }
  void setResults(llvm::ArrayRef<ValueId> r) { results_.assign(r.begin(), r.end()); }

  // --- nodes --------------------------------------------------------------------
  /// Appends a node whose result types are already known (see Builder for the
  /// checked way). Returns the node id.
  NodeId addNode(OpKind kind, llvm::ArrayRef<ValueId> operands, AttrList attrs,
                 llvm::ArrayRef<TensorType> resultTypes,
                 llvm::ArrayRef<std::string> resultNames = {}, Loc loc = {});
  const Node &node(NodeId n) const { return nodes_[n]; }
  Node &node(NodeId n) { return nodes_[n]; }
  /// Nodes in program order (a topological order of the dataflow).
  const std::vector<Node> &nodes() const { return nodes_; }
  size_t numNodes() const { return nodes_.size(); }
  /// The node producing `v`, or null for arguments.
  const Node *producer(ValueId v) const {
    return values_[v].isArgument() ? nullptr : &nodes_[values_[v].def];
  }
  /// The state version `v` updates in place — operand i of the updater
  /// whose result i it is (OpInfo::numUpdatedStates) — or kNoValue when `v`
  /// is an argument or any other result.
  ValueId updatedOperand(ValueId v) const {
    const Node *p = producer(v);
    unsigned r = values_[v].index;
    return p && r < p->info().numUpdatedStates() && r < p->operands.size() ? p->operands[r]
                                                                           : kNoValue;
  }

  // --- mutation (passes) ----------------------------------------------------------
  /// Replaces every use of `from` (operands and results) with `to`.
  void replaceAllUsesWith(ValueId from, ValueId to);
  /// Removes the nodes for which `dead[n]` is true and renumbers the rest,
  /// keeping program order. Values of removed nodes stay allocated but unused.
  void eraseNodes(llvm::ArrayRef<bool> dead);
  /// Use counts of every value (operands of nodes, plus 1 per result slot).
  std::vector<unsigned> useCounts() const;
  /// Unique name for a new value derived from `base` ("x" -> "x", "x.1", ...).
  std::string uniqueName(llvm::StringRef base) const;

private:
  std::string name_;
  EntryContract contract_;
  std::vector<Value> values_;
  llvm::StringMap<ValueId> byName_;
  std::vector<Argument> args_;
  std::vector<Node> nodes_;
  llvm::SmallVector<ValueId, 4> results_;
};

/// A model: named entries that share weights and state by argument name.
class Graph {
public:
  Function &addFunction(std::string name) {
    functions_.emplace_back(std::move(name));
    return functions_.back();
  }
  /// A deque, so references returned by addFunction stay valid.
  std::deque<Function> &functions() { return functions_; }
  const std::deque<Function> &functions() const { return functions_; }
  const Function *lookup(llvm::StringRef name) const;
  Function *lookup(llvm::StringRef name);

private:
  std::deque<Function> functions_;
};

} // namespace fg
