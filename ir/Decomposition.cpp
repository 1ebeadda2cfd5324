//===- Decomposition.cpp - the interpreter of fused ops' decompositions ----===//
//
// One pass over the tokens of a row's template: statements run when active,
// and are parsed but skipped otherwise (a failed guard, a loop with no
// iterations). See ir/Decomposition.h for the language.
//
//===----------------------------------------------------------------------===//
#include "ir/Decomposition.h"

#include "ir/Diag.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cassert>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace fg {
namespace {

using llvm::Error;

struct Tok {
  enum Kind { Value, Var, Ident, Num, Punct, Newline, End } kind;
  std::string text;
};

bool identChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

std::vector<Tok> tokenize(std::string_view s) {
  std::vector<Tok> out;
  size_t i = 0;
  auto word = [&](size_t from) {
    size_t j = from;
    while (j < s.size() && identChar(s[j]))
      ++j;
    std::string w(s.substr(from, j - from));
    i = j;
    return w;
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n' || c == ';') {
      out.push_back({Tok::Newline, "\n"});
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n')
        ++i;
    } else if (c == '%') {
      out.push_back({Tok::Value, word(i + 1)});
    } else if (c == '$') {
      out.push_back({Tok::Var, word(i + 1)});
    } else if (c >= '0' && c <= '9') {
      size_t j = i;
      while (j < s.size() &&
             ((s[j] >= '0' && s[j] <= '9') || s[j] == 'e' || s[j] == 'E' ||
              (s[j] == '.' && j + 1 < s.size() && s[j + 1] != '.') ||
              ((s[j] == '-' || s[j] == '+') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
        ++j;
      out.push_back({Tok::Num, std::string(s.substr(i, j - i))});
      i = j;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      out.push_back({Tok::Ident, word(i)});
    } else {
      std::string p(1, c);
      if (i + 1 < s.size() && ((c == '=' && s[i + 1] == '=') || (c == '!' && s[i + 1] == '=') ||
                               (c == '.' && s[i + 1] == '.')))
        p += s[i + 1];
      out.push_back({Tok::Punct, p});
      i += p.size();
    }
  }
  out.push_back({Tok::End, ""});
  return out;
}

/// A value of an attribute expression.
struct EVal {
  enum Kind { None, Int, Float, List, Word } kind = None;
  int64_t i = 0;
  double f = 0;
  llvm::SmallVector<int64_t, 4> list;
  std::string word;

  static EVal ofInt(int64_t v) {
    EVal e;
    e.kind = Int;
    e.i = v;
    return e;
  }
  static EVal ofFloat(double v) {
    EVal e;
    e.kind = Float;
    e.f = v;
    return e;
  }
  double asDouble() const { return kind == Int ? static_cast<double>(i) : f; }
};

class Walker {
public:
  Walker(OpKind fused, llvm::ArrayRef<TensorType> operands, llvm::ArrayRef<Attribute> attrs,
         DecompositionStep step)
      : info_(opInfo(fused)), attrs_(attrs), step_(step), toks_(tokenize(info_.decomposition)),
        types_(operands.begin(), operands.end()) {
    for (size_t i = 0; i < info_.operandNames.size(); ++i) {
      std::string name(info_.operandNames[i]);
      if (i < operands.size())
        env_[name] = static_cast<unsigned>(i);
      else
        absent_.insert(name);
    }
  }

  Error run(llvm::SmallVectorImpl<unsigned> &results, llvm::SmallVectorImpl<TensorType> *types) {
    assert(info_.has(kFused) && !info_.decomposition.empty() && "only fused rows decompose");
    if (Error e = block(/*active=*/true))
      return e;
    if (!at(Tok::End))
      return bad("unexpected '" + tok().text + "'");
    if (declared_ != info_.numResults ||
        (ret_.size() != info_.numResults && !info_.has(kVariadicResults)))
      return bad("returns " + std::to_string(ret_.size()) + " value(s), the row declares " +
                 std::to_string(info_.numResults));
    results.assign(ret_.begin(), ret_.end());
    if (types)
      for (unsigned h : ret_)
        types->push_back(types_[h]);
    return Error::success();
  }

private:
  const OpInfo &info_;
  llvm::ArrayRef<Attribute> attrs_;
  DecompositionStep step_;
  std::vector<Tok> toks_;
  size_t pos_ = 0;
  std::vector<TensorType> types_;
  llvm::StringMap<unsigned> env_;
  llvm::StringSet<> absent_;
  llvm::StringMap<int64_t> loopVars_;
  llvm::SmallVector<unsigned, 2> ret_;
  unsigned declared_ = 0; ///< items of the return statement, guarded or not

  const Tok &tok() const { return toks_[pos_]; }
  bool at(Tok::Kind k, llvm::StringRef text = {}) const {
    return tok().kind == k && (text.empty() || tok().text == text);
  }
  bool accept(Tok::Kind k, llvm::StringRef text = {}) {
    if (!at(k, text))
      return false;
    ++pos_;
    return true;
  }
  Error bad(const llvm::Twine &msg) const {
    return makeError("decomposition of '" + llvm::Twine(info_.mnemonic) + "': " + msg);
  }
  Error expect(Tok::Kind k, llvm::StringRef text) {
    if (accept(k, text))
      return Error::success();
    return bad("expected '" + text + "', got '" + tok().text + "'");
  }

  Error block(bool active) {
    while (true) {
      while (accept(Tok::Newline)) {
      }
      if (at(Tok::End) || at(Tok::Punct, "}"))
        return Error::success();
      if (Error e = statement(active))
        return e;
    }
  }

  Error statement(bool active) {
    if (accept(Tok::Ident, "for"))
      return forLoop(active);
    if (accept(Tok::Ident, "return")) {
      // Items may carry a guard (`[has w2] %y2`, rows with kVariadicResults):
      // an item whose guard fails is not a result.
      do {
        bool holds = true;
        if (accept(Tok::Punct, "[")) {
          if (!info_.has(kVariadicResults))
            return bad("a guarded result needs the row's kVariadicResults trait");
          if (Error e = guard(active, holds))
            return e;
        }
        if (!at(Tok::Value))
          return bad("expected a %value, got '" + tok().text + "'");
        std::string n = tok().text;
        ++pos_;
        ++declared_;
        if (!active || !holds)
          continue;
        auto it = env_.find(n);
        if (it == env_.end())
          return bad("returns unbound %" + n);
        ret_.push_back(it->second);
      } while (accept(Tok::Punct, ","));
      return Error::success();
    }
    bool run = active;
    if (accept(Tok::Punct, "[")) {
      bool holds = true;
      if (Error e = guard(active, holds))
        return e;
      run = run && holds;
    }
    return call(active, run);
  }

  /// The conditions of a guard after its `[`, up to and including `]`: all must hold.
  Error guard(bool active, bool &holds) {
    while (true) {
      bool h = true;
      if (Error e = condition(active, h))
        return e;
      holds = holds && h;
      if (accept(Tok::Punct, ","))
        continue;
      return expect(Tok::Punct, "]");
    }
  }

  Error forLoop(bool active) {
    if (!at(Tok::Var))
      return bad("expected a loop variable after 'for'");
    std::string var = tok().text;
    ++pos_;
    if (Error e = expect(Tok::Ident, "in"))
      return e;
    EVal lo, hi;
    if (Error e = expr(active, lo))
      return e;
    if (Error e = expect(Tok::Punct, ".."))
      return e;
    if (Error e = expr(active, hi))
      return e;
    if (Error e = expect(Tok::Punct, "{"))
      return e;
    size_t body = pos_;
    int64_t from = active ? lo.i : 0, to = active ? hi.i : 0;
    if (active && (lo.kind != EVal::Int || hi.kind != EVal::Int))
      return bad("loop bounds must be integers");
    if (from >= to) { // parse the body once, inactive
      if (Error e = block(false))
        return e;
    }
    for (int64_t j = from; j < to; ++j) {
      pos_ = body;
      loopVars_[var] = j;
      if (Error e = block(true))
        return e;
    }
    loopVars_.erase(var);
    return expect(Tok::Punct, "}");
  }

  /// `has NAME`, `NAME`, `!NAME`, `NAME == v`, `NAME != v`, `$j > n`, ...
  Error condition(bool active, bool &holds) {
    if (accept(Tok::Ident, "has")) {
      if (!at(Tok::Ident))
        return bad("expected an operand name after 'has'");
      holds = !absent_.contains(tok().text);
      if (holds && !env_.count(tok().text))
        return bad("'has " + tok().text + "': not an operand");
      ++pos_;
      return Error::success();
    }
    bool negate = accept(Tok::Punct, "!");
    EVal lhs;
    if (at(Tok::Ident)) { // an attribute of the fused op
      std::string name = tok().text;
      ++pos_;
      if (active)
        if (Error e = variable(name, lhs))
          return e;
    } else if (Error e = factor(active, lhs)) {
      return e;
    }
    std::string op;
    for (const char *c : {"==", "!=", ">", "<"})
      if (at(Tok::Punct, c))
        op = c;
    if (op.empty()) {
      holds = active && (lhs.kind == EVal::Int ? lhs.i != 0 : lhs.asDouble() != 0);
      holds = negate ? !holds : holds;
      return Error::success();
    }
    ++pos_;
    EVal rhs;
    if (Error e = factor(active, rhs))
      return e;
    if (!active)
      return Error::success();
    int cmp;
    if (lhs.kind == EVal::Word || rhs.kind == EVal::Word)
      cmp = lhs.word == rhs.word ? 0 : 1;
    else
      cmp = lhs.asDouble() < rhs.asDouble() ? -1 : lhs.asDouble() > rhs.asDouble() ? 1 : 0;
    holds = op == "==" ? cmp == 0 : op == "!=" ? cmp != 0 : op == ">" ? cmp > 0 : cmp < 0;
    if (negate)
      holds = !holds;
    return Error::success();
  }

  Error valueList(llvm::SmallVectorImpl<std::string> &names) {
    do {
      if (!at(Tok::Value))
        return bad("expected a %value, got '" + tok().text + "'");
      names.push_back(tok().text);
      ++pos_;
    } while (accept(Tok::Punct, ","));
    return Error::success();
  }

  Error call(bool active, bool run) {
    llvm::SmallVector<std::string, 2> names;
    if (Error e = valueList(names))
      return e;
    if (Error e = expect(Tok::Punct, "="))
      return e;
    if (!at(Tok::Ident))
      return bad("expected an op name");
    std::string mnemonic = tok().text;
    ++pos_;
    std::optional<OpKind> kind = lookupOp(mnemonic);
    if (!kind)
      return bad("unknown op '" + mnemonic + "'");
    llvm::SmallVector<std::string, 4> refs;
    if (Error e = expect(Tok::Punct, "("))
      return e;
    if (!accept(Tok::Punct, ")")) {
      if (Error e = valueList(refs))
        return e;
      if (Error e = expect(Tok::Punct, ")"))
        return e;
    }
    const OpInfo &op = opInfo(*kind);
    AttrList attrs = defaultAttrs(*kind);
    if (accept(Tok::Punct, "{")) {
      do {
        std::string name;
        EVal v;
        if (at(Tok::Var)) { // `{$eps}`: eps = $eps
          name = tok().text;
          if (Error e = factor(run, v))
            return e;
        } else {
          if (!at(Tok::Ident))
            return bad("expected an attribute name");
          name = tok().text;
          ++pos_;
          if (Error e = expect(Tok::Punct, "="))
            return e;
          if (Error e = expr(run, v))
            return e;
        }
        std::optional<unsigned> idx = op.findAttr(name);
        if (!idx)
          return bad("'" + mnemonic + "' has no attribute '" + name + "'");
        if (run)
          if (Error e = assign(op.attrs[*idx], v, attrs[*idx]))
            return e;
      } while (accept(Tok::Punct, ","));
      if (Error e = expect(Tok::Punct, "}"))
        return e;
    }
    if (!active)
      return Error::success();
    if (!run) { // a failed guard: unbound results alias the first operand
      auto first = refs.empty() ? env_.end() : env_.find(refs.front());
      for (const std::string &n : names)
        if (!env_.count(n) && first != env_.end())
          env_[n] = first->second;
      return Error::success();
    }
    llvm::SmallVector<unsigned, 4> handles;
    llvm::SmallVector<TensorType, 4> operandTypes;
    for (const std::string &r : refs) {
      auto it = env_.find(r);
      if (it == env_.end()) {
        if (absent_.contains(r))
          continue; // an absent optional operand
        return bad("use of unbound %" + r);
      }
      handles.push_back(it->second);
      operandTypes.push_back(types_[it->second]);
    }
    llvm::SmallVector<TensorType, 2> resultTypes;
    if (Error e = inferResultTypes(*kind, operandTypes, attrs, resultTypes))
      return e;
    if (resultTypes.size() != names.size())
      return bad("'" + mnemonic + "' yields " + std::to_string(resultTypes.size()) + " result(s)");
    if (Error e = step_(*kind, handles, attrs, resultTypes))
      return e;
    for (size_t r = 0; r < names.size(); ++r) {
      env_[names[r]] = static_cast<unsigned>(types_.size());
      types_.push_back(resultTypes[r]);
    }
    return Error::success();
  }

  Error assign(const AttrSpec &spec, const EVal &v, Attribute &out) {
    auto mismatch = [&] { return bad("bad value for attribute '" + std::string(spec.name) + "'"); };
    switch (spec.kind) {
    case AttrKind::Int:
      if (v.kind != EVal::Int)
        return mismatch();
      out = Attribute::ofInt(v.i);
      return Error::success();
    case AttrKind::Float:
      if (v.kind != EVal::Int && v.kind != EVal::Float)
        return mismatch();
      out = Attribute::ofFloat(v.asDouble());
      return Error::success();
    case AttrKind::Ints:
      if (v.kind != EVal::List)
        return mismatch();
      out = Attribute::ofInts(v.list);
      return Error::success();
    case AttrKind::Enum:
      for (size_t i = 0; i < spec.words.size(); ++i)
        if (v.kind == EVal::Word && spec.words[i] == v.word) {
          out = Attribute::ofEnum(static_cast<int64_t>(i));
          return Error::success();
        }
      return mismatch();
    case AttrKind::DType: {
      auto dt = v.kind == EVal::Word ? parseDType(v.word) : std::nullopt;
      if (!dt)
        return mismatch();
      out = Attribute::ofDType(*dt);
      return Error::success();
    }
    }
    return mismatch();
  }

  // --- expressions: sums of products of factors ---------------------------------
  Error expr(bool eval, EVal &out) {
    if (Error e = term(eval, out))
      return e;
    while (at(Tok::Punct, "+") || at(Tok::Punct, "-")) {
      bool plus = tok().text == "+";
      ++pos_;
      EVal rhs;
      if (Error e = term(eval, rhs))
        return e;
      if (eval)
        out = arith(out, rhs, plus ? '+' : '-');
    }
    return Error::success();
  }

  Error term(bool eval, EVal &out) {
    if (Error e = factor(eval, out))
      return e;
    while (accept(Tok::Punct, "*")) {
      EVal rhs;
      if (Error e = factor(eval, rhs))
        return e;
      if (eval)
        out = arith(out, rhs, '*');
    }
    return Error::success();
  }

  static EVal arith(const EVal &a, const EVal &b, char op) {
    if (a.kind == EVal::Int && b.kind == EVal::Int)
      return EVal::ofInt(op == '+' ? a.i + b.i : op == '-' ? a.i - b.i : a.i * b.i);
    double x = a.asDouble(), y = b.asDouble();
    return EVal::ofFloat(op == '+' ? x + y : op == '-' ? x - y : x * y);
  }

  Error factor(bool eval, EVal &out) {
    if (accept(Tok::Punct, "-")) {
      if (Error e = factor(eval, out))
        return e;
      out = arith(EVal::ofInt(0), out, '-');
      return Error::success();
    }
    if (at(Tok::Num)) {
      const std::string &t = tok().text;
      ++pos_;
      if (t.find_first_of(".eE") == std::string::npos)
        out = EVal::ofInt(std::strtoll(t.c_str(), nullptr, 10));
      else
        out = EVal::ofFloat(std::strtod(t.c_str(), nullptr));
      return Error::success();
    }
    if (at(Tok::Var)) {
      std::string name = tok().text;
      ++pos_;
      if (!eval)
        return Error::success();
      return variable(name, out);
    }
    if (accept(Tok::Punct, "[")) {
      out = EVal();
      out.kind = EVal::List;
      if (accept(Tok::Punct, "]"))
        return Error::success();
      do {
        EVal item;
        if (Error e = expr(eval, item))
          return e;
        if (eval && item.kind != EVal::Int)
          return bad("list items must be integers");
        out.list.push_back(item.i);
      } while (accept(Tok::Punct, ","));
      return expect(Tok::Punct, "]");
    }
    if (accept(Tok::Ident, "dim")) {
      if (Error e = expect(Tok::Punct, "("))
        return e;
      if (!at(Tok::Value))
        return bad("dim() takes a %value");
      std::string v = tok().text;
      ++pos_;
      if (Error e = expect(Tok::Punct, ","))
        return e;
      EVal d;
      if (Error e = expr(eval, d))
        return e;
      if (Error e = expect(Tok::Punct, ")"))
        return e;
      if (!eval)
        return Error::success();
      auto it = env_.find(v);
      if (it == env_.end())
        return bad("dim() of unbound %" + v);
      const TensorType &t = types_[it->second];
      int64_t axis = d.i < 0 ? d.i + t.rank() : d.i;
      if (d.kind != EVal::Int || axis < 0 || axis >= t.rank())
        return bad("dim(%" + v + ", " + std::to_string(d.i) + ") of " + t.str());
      out = EVal::ofInt(t.shape[axis]);
      return Error::success();
    }
    if (at(Tok::Ident)) {
      out = EVal();
      out.kind = EVal::Word;
      out.word = tok().text;
      if (out.word == "inf")
        out = EVal::ofFloat(std::numeric_limits<double>::infinity());
      ++pos_;
      return Error::success();
    }
    return bad("unexpected '" + tok().text + "' in an expression");
  }

  /// `$j` (a loop variable) or `$attr` (an attribute of the fused op).
  Error variable(const std::string &name, EVal &out) {
    auto lv = loopVars_.find(name);
    if (lv != loopVars_.end()) {
      out = EVal::ofInt(lv->second);
      return Error::success();
    }
    std::optional<unsigned> idx = info_.findAttr(name);
    if (!idx)
      return bad("no attribute or loop variable '$" + name + "'");
    const AttrSpec &spec = info_.attrs[*idx];
    const Attribute &a = attrs_[*idx];
    out = EVal();
    switch (spec.kind) {
    case AttrKind::Int:
      out = EVal::ofInt(a.i);
      break;
    case AttrKind::Float:
      out = EVal::ofFloat(a.f);
      break;
    case AttrKind::Ints:
      out.kind = EVal::List;
      out.list.assign(a.ints.begin(), a.ints.end());
      break;
    case AttrKind::Enum:
      out.kind = EVal::Word;
      if (a.i < 0 || a.i >= static_cast<int64_t>(spec.words.size()))
        return bad("attribute '" + name + "' is out of range");
      out.word = std::string(spec.words[a.i]);
      break;
    case AttrKind::DType:
      out.kind = EVal::Word;
      out.word = std::string(dtypeName(static_cast<DType>(a.i)));
      break;
    }
    return Error::success();
  }
};

} // namespace

llvm::Error walkDecomposition(OpKind fused, llvm::ArrayRef<TensorType> operands,
                              llvm::ArrayRef<Attribute> attrs, DecompositionStep step,
                              llvm::SmallVectorImpl<unsigned> &results,
                              llvm::SmallVectorImpl<TensorType> *resultTypes) {
  return Walker(fused, operands, attrs, step).run(results, resultTypes);
}

llvm::Error inferFusedTypes(OpKind fused, const OpSignature &s,
                            llvm::SmallVectorImpl<TensorType> &results) {
  llvm::SmallVector<unsigned, 2> handles;
  auto noop = [](OpKind, llvm::ArrayRef<unsigned>, llvm::ArrayRef<Attribute>,
                 llvm::ArrayRef<TensorType>) { return llvm::Error::success(); };
  return walkDecomposition(fused, s.operands, s.attrs, noop, handles, &results);
}

Cost fusedCost(OpKind fused, const OpSignature &s, llvm::ArrayRef<TensorType> results,
               const CostContext &ctx) {
  Cost total;
  const unsigned numOperands = static_cast<unsigned>(s.operands.size());
  total.operandBytes.assign(numOperands, 0.0);
  std::vector<TensorType> types(s.operands.begin(), s.operands.end());
  // The fused operand whose bytes each handle lies in (views and in-place
  // updates followed), or -1 for an intermediate.
  std::vector<int> origin;
  for (unsigned i = 0; i < numOperands; ++i)
    origin.push_back(static_cast<int>(i));
  // The operands the fused op updates in place: rows written, largest read.
  const unsigned updated = std::min(opInfo(fused).numUpdatedStates(), numOperands);
  llvm::SmallVector<double, 2> written(updated, 0.0), read(updated, 0.0);
  auto step = [&](OpKind kind, llvm::ArrayRef<unsigned> ops, llvm::ArrayRef<Attribute> attrs,
                  llvm::ArrayRef<TensorType> res) {
    llvm::SmallVector<TensorType, 4> opTypes;
    for (unsigned h : ops)
      opTypes.push_back(types[h]);
    const OpInfo &info = opInfo(kind);
    // Reads through a view count against the operand it views.
    if (info.has(kViewLike)) {
      types.insert(types.end(), res.begin(), res.end());
      origin.insert(origin.end(), res.size(), ops.empty() ? -1 : origin[ops[0]]);
      return llvm::Error::success();
    }
    Cost c = opCost(kind, opTypes, attrs, res, ctx);
    total.flops += c.flops;
    for (size_t j = 0; j < ops.size(); ++j) {
      int o = origin[ops[j]];
      if (o < 0)
        continue; // an intermediate: elided
      double whole = static_cast<double>(s.operands[o].bytes());
      const double b = std::min(whole, c.operandBytes[j]);
      if (static_cast<unsigned>(o) < updated) {
        // A state the fused op updates: its writes add up, its reads count once.
        if (j < info.numUpdatedStates())
          written[o] += b;
        else
          read[o] = std::max(read[o], b);
        continue;
      }
      total.operandBytes[o] = std::max(total.operandBytes[o], b);
    }
    types.insert(types.end(), res.begin(), res.end());
    for (size_t r = 0; r < res.size(); ++r)
      origin.push_back(r < info.numUpdatedStates() && r < ops.size() ? origin[ops[r]] : -1);
    return llvm::Error::success();
  };
  llvm::SmallVector<unsigned, 2> handles;
  if (llvm::Error e = walkDecomposition(fused, s.operands, s.attrs, step, handles)) {
    llvm::consumeError(std::move(e)); // the type rule already accepted these operands
    return total;
  }
  for (size_t r = 0; r < results.size() && r < handles.size(); ++r)
    if (origin[handles[r]] < 0)
      total.resultBytes += static_cast<double>(results[r].bytes());
  for (unsigned o = 0; o < updated; ++o)
    total.operandBytes[o] = written[o] + read[o];
  total.updatedBytes.assign(written.begin(), written.end());
  return total;
}

llvm::Error expandFusedNode(Function &fn, NodeId n, llvm::SmallVectorImpl<ValueId> &replacements,
                            llvm::StringRef prefix) {
  const Node node = fn.node(n); // copied: addNode may reallocate the node list
  assert(node.info().has(kFused) && "only fused nodes expand");
  std::vector<ValueId> values(node.operands.begin(), node.operands.end());
  llvm::SmallVector<TensorType, 6> operandTypes;
  for (ValueId v : node.operands)
    operandTypes.push_back(fn.type(v));
  unsigned stepIndex = 0;
  auto step = [&](OpKind kind, llvm::ArrayRef<unsigned> ops, llvm::ArrayRef<Attribute> attrs,
                  llvm::ArrayRef<TensorType> res) {
    llvm::SmallVector<ValueId, 4> operands;
    for (unsigned h : ops)
      operands.push_back(values[h]);
    llvm::SmallVector<std::string, 2> names;
    if (!prefix.empty())
      for (size_t r = 0; r < res.size(); ++r)
        names.push_back(
            fn.uniqueName((prefix + "." + mnemonic(kind) + "." + std::to_string(stepIndex) +
                           (r ? "." + std::to_string(r) : std::string()))
                              .str()));
    ++stepIndex;
    NodeId id =
        fn.addNode(kind, operands, AttrList(attrs.begin(), attrs.end()), res, names, node.loc);
    for (ValueId r : fn.node(id).results)
      values.push_back(r);
    return llvm::Error::success();
  };
  llvm::SmallVector<unsigned, 2> handles;
  if (llvm::Error e = walkDecomposition(node.kind, operandTypes, node.attrs, step, handles))
    return e;
  replacements.clear();
  for (unsigned h : handles)
    replacements.push_back(values[h]);
  return llvm::Error::success();
}

} // namespace fg
