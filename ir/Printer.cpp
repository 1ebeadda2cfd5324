//===- Printer.cpp - the canonical .fg text form --------------------------===//
//
//   graph @decode(
//       input %tokens: i32[1],
//       input %positions: i32[1],
//       weight %emb: f16[512, 256] {init = normal(seed = 1, std = 0.02)}) {
//     %x = get_rows(%emb, %tokens) : f32[1, 256]
//     %0 = rms_norm(%x) {eps = 1e-06} : f32[1, 256]
//     return %0
//   }
//
// The parser (ir/Parser.cpp) reads exactly this form back; print(parse(s)) == s.
//
//===----------------------------------------------------------------------===//
#include "ir/Printer.h"

#include "llvm/ADT/StringSet.h"

#include <vector>

namespace fg {
namespace {

/// Gives every value its printed name: its own, or the next free number.
class Namer {
public:
  explicit Namer(const Function &fn) : names_(fn.numValues()) {
    llvm::StringSet<> used;
    for (size_t v = 0; v < fn.numValues(); ++v)
      if (!fn.value(static_cast<ValueId>(v)).name.empty())
        used.insert(fn.value(static_cast<ValueId>(v)).name);
    unsigned next = 0;
    auto assign = [&](ValueId v) {
      if (v >= names_.size() || !names_[v].empty())
        return;
      const std::string &own = fn.value(v).name;
      if (!own.empty()) {
        names_[v] = own;
        return;
      }
      while (used.count(std::to_string(next)))
        ++next;
      names_[v] = std::to_string(next++);
    };
    // Order of definition: arguments, then node results in program order.
    for (const Argument &a : fn.arguments())
      assign(a.value);
    for (const Node &n : fn.nodes())
      for (ValueId r : n.results)
        assign(r);
    // Anything else (orphans a pass left referenced) still gets a stable name.
    for (size_t v = 0; v < names_.size(); ++v)
      assign(static_cast<ValueId>(v));
  }

  std::string ref(ValueId v) const {
    if (v >= names_.size())
      return "%<invalid>";
    return "%" + names_[v];
  }

private:
  std::vector<std::string> names_;
};

void printArgument(const Function &fn, const Namer &names, const Argument &a,
                   llvm::raw_ostream &os) {
  os << roleName(a.role) << " " << names.ref(a.value) << ": ";
  if (a.value < fn.numValues())
    os << fn.type(a.value).str();
  if (a.role == ArgRole::Weight && a.init.kind != WeightInit::Kind::None)
    os << " {init = " << a.init.str() << "}";
  if (a.role == ArgRole::Input && !a.bind.empty()) {
    os << " {bind = " << bindKindName(a.bind.kind);
    if (a.bind.hasRange())
      os << ", range = [" << a.bind.lo << ", " << a.bind.hi << ")";
    os << "}";
  }
}

void printNode(const Function &fn, const Namer &names, const Node &n, llvm::raw_ostream &os) {
  const OpInfo &info = n.info();
  os << "  ";
  for (size_t r = 0; r < n.results.size(); ++r)
    os << (r ? ", " : "") << names.ref(n.results[r]);
  os << " = " << info.mnemonic << "(";
  for (size_t o = 0; o < n.operands.size(); ++o)
    os << (o ? ", " : "") << names.ref(n.operands[o]);
  os << ")";
  bool first = true;
  for (size_t i = 0; i < info.attrs.size() && i < n.attrs.size(); ++i) {
    const AttrSpec &spec = info.attrs[i];
    if (!spec.required && n.attrs[i].equals(spec.dflt, spec.kind))
      continue;
    os << (first ? " {" : ", ") << spec.name << " = " << printAttr(n.attrs[i], spec);
    first = false;
  }
  if (!first)
    os << "}";
  os << " : ";
  for (size_t r = 0; r < n.results.size(); ++r) {
    os << (r ? ", " : "");
    if (n.results[r] < fn.numValues())
      os << fn.type(n.results[r]).str();
  }
  os << "\n";
}

} // namespace

void printFunction(const Function &fn, llvm::raw_ostream &os) {
  Namer names(fn);
  os << "graph @" << fn.name() << "(";
  llvm::ArrayRef<Argument> args = fn.arguments();
  bool multiline = args.size() > 2;
  for (size_t i = 0; i < args.size(); ++i) {
    if (multiline)
      os << (i ? ",\n    " : "\n    ");
    else if (i)
      os << ", ";
    printArgument(fn, names, args[i], os);
  }
  os << ")";
  const EntryContract &c = fn.contract();
  if (c.role == EntryRole::Prefill)
    os << " attributes {role = prefill, n = " << c.tokens << "}";
  else if (c.role != EntryRole::Other)
    os << " attributes {role = " << entryRoleName(c.role) << "}";
  os << " {\n";
  for (const Node &n : fn.nodes())
    printNode(fn, names, n, os);
  os << "  return";
  for (size_t r = 0; r < fn.results().size(); ++r)
    os << (r ? ", " : " ") << names.ref(fn.results()[r]);
  os << "\n}\n";
}

void printGraph(const Graph &g, llvm::raw_ostream &os) {
  bool first = true;
  for (const Function &fn : g.functions()) {
    if (!first)
      os << "\n";
    first = false;
    printFunction(fn, os);
  }
}

std::string printToString(const Graph &g) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printGraph(g, os);
  return os.str();
}

std::string printToString(const Function &fn) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printFunction(fn, os);
  return os.str();
}

} // namespace fg
