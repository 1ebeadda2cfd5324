//===- Parser.cpp - read .fg text -----------------------------------------===//
//
// A hand-written lexer and recursive-descent parser over the canonical text
// form that ir/Printer.cpp writes (whitespace is free, `//` starts a comment):
//
// clang-format off
//   file      := function+
//   function  := 'graph' @name '(' [argument (',' argument)*] ')' [fattrs]
//                '{' statement* return '}'
//   fattrs    := 'attributes' '{' 'role' '=' ('decode' | 'other' | 'prefill' ',' 'n' '=' int) '}'
//   argument  := ('input' | 'weight' | 'state') %name ':' type [argattrs]
//   argattrs  := '{' 'init' '=' init '}'                                       (weights)
//              | '{' 'bind' '=' kind [',' 'range' '=' '[' int ',' int ')'] '}'  (inputs)
//   init      := word '(' [field '=' value (',' field '=' value)*] ')'
//   statement := %name (',' %name)* '=' op '(' [%name (',' %name)*] ')' [attrs]
//                ':' type (',' type)*
//   attrs     := '{' [name '=' value (',' name '=' value)*] '}'
//   return    := 'return' [%name (',' %name)*]
//   type      := dtype '[' [int (',' int)*] ']'
// clang-format on
//
// Every node runs its op's type rule; the declared result types must equal
// the inferred ones. The first error stops parsing and is reported as one
// line, `file:line:col: error: ...`, at the offending token. The parsed graph
// is then verified (ir/Verifier.h).
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"

#include "ir/Diag.h"
#include "ir/ReadFile.h"
#include "ir/Verifier.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

namespace fg {
namespace {

using llvm::StringRef;

enum class Tok {
  Eof,
  Error, ///< a lexical error; the message is in Token::value
  Ident,
  Value,  ///< %name
  Global, ///< @name
  Number,
  String,
  LParen,
  RParen,
  LBrace,
  RBrace,
  LSquare,
  RSquare,
  Comma,
  Colon,
  Equal,
};

struct Token {
  Tok kind = Tok::Eof;
  StringRef spelling; ///< the token's text as written
  std::string value;  ///< name without its sigil, unescaped string, or error message
  Loc loc;
};

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

class Lexer {
public:
  explicit Lexer(StringRef text) : text_(text) {}

  Token next() {
    skipSpaceAndComments();
    Token t;
    t.loc = {line_, col_};
    size_t start = pos_;
    if (atEnd()) {
      t.kind = Tok::Eof;
      return t;
    }
    char c = text_[pos_];
    auto single = [&](Tok k) {
      advance();
      t.kind = k;
      t.spelling = text_.slice(start, pos_);
      return t;
    };
    switch (c) {
    case '(':
      return single(Tok::LParen);
    case ')':
      return single(Tok::RParen);
    case '{':
      return single(Tok::LBrace);
    case '}':
      return single(Tok::RBrace);
    case '[':
      return single(Tok::LSquare);
    case ']':
      return single(Tok::RSquare);
    case ',':
      return single(Tok::Comma);
    case ':':
      return single(Tok::Colon);
    case '=':
      return single(Tok::Equal);
    case '%':
    case '@': {
      advance();
      while (!atEnd() && isNameChar(text_[pos_]))
        advance();
      t.spelling = text_.slice(start, pos_);
      t.value = t.spelling.drop_front().str();
      if (t.value.empty())
        return error(t, std::string("expected a name after '") + c + "'");
      t.kind = c == '%' ? Tok::Value : Tok::Global;
      return t;
    }
    case '"':
      return lexString(t);
    default:
      break;
    }
    if (isDigit(c) || (c == '-' && isDigit(peek(1))))
      return lexNumber(t);
    if (isIdentStart(c) || (c == '-' && isIdentStart(peek(1)))) {
      advance();
      while (!atEnd() && isNameChar(text_[pos_]))
        advance();
      t.spelling = text_.slice(start, pos_);
      if (c == '-' && t.spelling != "-inf" && t.spelling != "-nan")
        return error(t, "unexpected '" + t.spelling.str() + "'");
      t.kind = Tok::Ident;
      return t;
    }
    if (c >= 0x20 && c < 0x7f)
      return error(t, std::string("unexpected character '") + c + "'");
    char buf[8];
    snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
    return error(t, std::string("unexpected byte ") + buf);
  }

private:
  bool atEnd() const { return pos_ >= text_.size(); }
  char peek(size_t k) const { return pos_ + k < text_.size() ? text_[pos_ + k] : '\0'; }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  Token error(Token t, std::string msg) {
    t.kind = Tok::Error;
    t.value = std::move(msg);
    return t;
  }

  void skipSpaceAndComments() {
    while (!atEnd()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && peek(1) == '/') {
        while (!atEnd() && text_[pos_] != '\n')
          advance();
      } else {
        return;
      }
    }
  }

  Token lexNumber(Token t) {
    size_t start = pos_;
    if (text_[pos_] == '-')
      advance();
    while (!atEnd() && isDigit(text_[pos_]))
      advance();
    if (!atEnd() && text_[pos_] == '.') {
      advance();
      while (!atEnd() && isDigit(text_[pos_]))
        advance();
    }
    if (!atEnd() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t k = 1;
      if (peek(1) == '+' || peek(1) == '-')
        k = 2;
      if (isDigit(peek(k))) {
        for (size_t i = 0; i < k; ++i)
          advance();
        while (!atEnd() && isDigit(text_[pos_]))
          advance();
      }
    }
    t.kind = Tok::Number;
    t.spelling = text_.slice(start, pos_);
    return t;
  }

  Token lexString(Token t) {
    size_t start = pos_;
    advance(); // opening quote
    std::string out;
    while (true) {
      if (atEnd()) {
        t.loc = {line_, col_};
        return error(t, "unexpected end of input, expected '\"'");
      }
      char c = text_[pos_];
      if (c == '\n')
        return error(t, "unterminated string");
      advance();
      if (c == '"')
        break;
      if (c == '\\') {
        if (atEnd()) {
          t.loc = {line_, col_};
          return error(t, "unexpected end of input, expected '\"'");
        }
        c = text_[pos_];
        if (c != '"' && c != '\\')
          return error(t, "unknown escape in string (only \\\" and \\\\)");
        advance();
      }
      out += c;
    }
    t.kind = Tok::String;
    t.spelling = text_.slice(start, pos_);
    t.value = std::move(out);
    return t;
  }

  StringRef text_;
  size_t pos_ = 0;
  uint32_t line_ = 1, col_ = 1;
};

/// Largest element count a parsed tensor type may have (keeps size arithmetic
/// far from overflow).
constexpr int64_t kMaxElements = int64_t(1) << 48;

std::string kindWords(const AttrSpec &spec) {
  switch (spec.kind) {
  case AttrKind::Int:
    return "an integer";
  case AttrKind::Float:
    return "a float";
  case AttrKind::Ints:
    return "a list of integers";
  case AttrKind::DType:
    return "a dtype";
  case AttrKind::Enum: {
    std::string s = "one of ";
    for (size_t i = 0; i < spec.words.size(); ++i)
      s += (i ? ", " : "") + std::string(spec.words[i]);
    return s;
  }
  }
  return "a value";
}

class Parser {
public:
  Parser(StringRef text, StringRef file) : lex_(text), file_(file.str()) { consume(); }

  llvm::Expected<Graph> parse() {
    Graph g;
    do {
      if (!parseFunction(g))
        return takeError();
    } while (tok_.kind != Tok::Eof);
    if (llvm::Error e = verifyGraph(g, file_))
      return e;
    return g;
  }

private:
  // --- token helpers -------------------------------------------------------------
  void consume() { tok_ = lex_.next(); }
  bool is(Tok k) const { return tok_.kind == k; }
  bool isWord(StringRef w) const { return tok_.kind == Tok::Ident && tok_.spelling == w; }

  bool fail(Loc loc, const llvm::Twine &msg) {
    if (!err_)
      err_ = llvm::toString(makeError(file_, loc, msg));
    return false;
  }
  /// An error at the current token saying what was expected there.
  bool failExpected(const llvm::Twine &what) {
    if (is(Tok::Error))
      return fail(tok_.loc, tok_.value);
    if (is(Tok::Eof))
      return fail(tok_.loc, "unexpected end of input, expected " + what);
    return fail(tok_.loc, "expected " + what + ", got '" + tok_.spelling + "'");
  }
  bool expect(Tok k, const llvm::Twine &what) {
    if (!is(k))
      return failExpected(what);
    consume();
    return true;
  }
  bool consumeIf(Tok k) {
    if (!is(k))
      return false;
    consume();
    return true;
  }
  llvm::Error takeError() { return makeError(err_ ? *err_ : std::string("internal parser error")); }

  // --- scalars -------------------------------------------------------------------
  bool parseInt(int64_t &out, const llvm::Twine &what) {
    if (!is(Tok::Number) || tok_.spelling.find_first_of(".eE") != StringRef::npos)
      return failExpected(what);
    StringRef s = tok_.spelling;
    auto [ptr, ec] = std::from_chars(s.begin(), s.end(), out);
    if (ec != std::errc() || ptr != s.end())
      return fail(tok_.loc, "integer " + s + " is out of range");
    consume();
    return true;
  }

  bool parseUnsigned(uint64_t &out, const llvm::Twine &what) {
    if (!is(Tok::Number) || tok_.spelling.find_first_of(".eE") != StringRef::npos)
      return failExpected(what);
    StringRef s = tok_.spelling;
    auto [ptr, ec] = std::from_chars(s.begin(), s.end(), out);
    if (s.startswith("-") || ec != std::errc() || ptr != s.end())
      return fail(tok_.loc, "integer " + s + " is out of range");
    consume();
    return true;
  }

  bool parseFloat(double &out, const llvm::Twine &what) {
    if (is(Tok::Ident)) {
      StringRef s = tok_.spelling;
      double inf = std::numeric_limits<double>::infinity();
      double nan = std::numeric_limits<double>::quiet_NaN();
      if (s == "inf" || s == "-inf")
        out = s == "inf" ? inf : -inf;
      else if (s == "nan" || s == "-nan")
        out = s == "nan" ? nan : -nan;
      else
        return failExpected(what);
      consume();
      return true;
    }
    if (!is(Tok::Number))
      return failExpected(what);
    StringRef s = tok_.spelling;
    auto [ptr, ec] = std::from_chars(s.begin(), s.end(), out);
    if (ec != std::errc() || ptr != s.end())
      return fail(tok_.loc, "float " + s + " is out of range");
    consume();
    return true;
  }

  // --- types ---------------------------------------------------------------------
  bool parseType(TensorType &t) {
    if (!is(Tok::Ident))
      return failExpected("a type");
    auto dt = parseDType(std::string_view(tok_.spelling.data(), tok_.spelling.size()));
    if (!dt)
      return fail(tok_.loc, "unknown dtype '" + tok_.spelling + "'");
    t.dtype = *dt;
    t.shape.clear();
    consume();
    if (!expect(Tok::LSquare, "'['"))
      return false;
    int64_t elems = 1;
    if (!consumeIf(Tok::RSquare)) {
      while (true) {
        Loc at = tok_.loc;
        int64_t d;
        if (!parseInt(d, "a dimension"))
          return false;
        if (d <= 0)
          return fail(at, "dimension must be positive, got " + llvm::Twine(d));
        if (d > kMaxElements / elems)
          return fail(at, "tensor type has more than 2^48 elements");
        elems *= d;
        t.shape.push_back(d);
        if (consumeIf(Tok::Comma))
          continue;
        if (!expect(Tok::RSquare, "',' or ']'"))
          return false;
        break;
      }
    }
    return true;
  }

  // --- arguments -----------------------------------------------------------------
  bool parseInit(WeightInit &init) {
    if (!is(Tok::Ident))
      return failExpected("an initialiser (normal, uniform, constant or tensor)");
    StringRef kind = tok_.spelling;
    Loc kindLoc = tok_.loc;
    llvm::SmallVector<StringRef, 3> fields;
    if (kind == "normal") {
      init.kind = WeightInit::Kind::Normal;
      fields = {"seed", "std", "mean"};
    } else if (kind == "uniform") {
      init.kind = WeightInit::Kind::Uniform;
      fields = {"seed", "min", "max"};
    } else if (kind == "constant") {
      init.kind = WeightInit::Kind::Constant;
      fields = {"value"};
    } else if (kind == "tensor") {
      init.kind = WeightInit::Kind::Tensor;
      fields = {"file", "name"};
    } else {
      return fail(kindLoc, "unknown initialiser '" + kind +
                               "', expected normal, uniform, constant or tensor");
    }
    std::string kindName = kind.str();
    consume();
    if (!expect(Tok::LParen, "'('"))
      return false;
    llvm::StringSet<> given;
    if (!is(Tok::RParen)) {
      while (true) {
        if (!is(Tok::Ident))
          return failExpected("a field of " + kindName + "()");
        std::string field = tok_.spelling.str();
        Loc fieldLoc = tok_.loc;
        if (llvm::find(fields, StringRef(field)) == fields.end())
          return fail(fieldLoc, "unknown field '" + field + "' of " + kindName + "()");
        if (!given.insert(field).second)
          return fail(fieldLoc, "field '" + field + "' is given twice");
        consume();
        if (!expect(Tok::Equal, "'='"))
          return false;
        bool ok = true;
        if (field == "seed")
          ok = parseUnsigned(init.seed, "an unsigned integer seed");
        else if (field == "std")
          ok = parseFloat(init.std, "a float");
        else if (field == "mean")
          ok = parseFloat(init.mean, "a float");
        else if (field == "min")
          ok = parseFloat(init.min, "a float");
        else if (field == "max")
          ok = parseFloat(init.max, "a float");
        else if (field == "value")
          ok = parseFloat(init.value, "a float");
        else if (!is(Tok::String)) // file, name
          ok = failExpected("a string");
        else {
          (field == "file" ? init.file : init.name) = tok_.value;
          consume();
        }
        if (!ok)
          return false;
        if (consumeIf(Tok::Comma))
          continue;
        break;
      }
    }
    if (!is(Tok::RParen))
      return failExpected("',' or ')'");
    for (StringRef f : fields)
      if (f != "mean" && !given.count(f))
        return fail(tok_.loc, kindName + "() requires field '" + f + "'");
    consume();
    return true;
  }

  bool parseArgument(Function &fn) {
    Loc loc = tok_.loc;
    ArgRole role;
    if (isWord("input"))
      role = ArgRole::Input;
    else if (isWord("weight"))
      role = ArgRole::Weight;
    else if (isWord("state"))
      role = ArgRole::State;
    else
      return failExpected("an argument role (input, weight or state)");
    consume();
    if (!is(Tok::Value))
      return failExpected("an argument name");
    std::string name = tok_.value;
    if (fn.lookup(name) != kNoValue)
      return fail(tok_.loc, "redefinition of value '%" + name + "'");
    consume();
    TensorType type;
    if (!expect(Tok::Colon, "':'") || !parseType(type))
      return false;
    WeightInit init;
    InputBinding bind;
    if (is(Tok::LBrace) && role == ArgRole::Input) {
      if (!parseBinding(bind))
        return false;
    } else if (is(Tok::LBrace)) {
      Loc brace = tok_.loc;
      if (role != ArgRole::Weight)
        return fail(brace, "only weights take an initialiser");
      consume();
      if (!isWord("init"))
        return is(Tok::Ident) ? fail(tok_.loc, "unknown argument attribute '" + tok_.spelling +
                                                   "', expected 'init'")
                              : failExpected("'init'");
      consume();
      if (!expect(Tok::Equal, "'='") || !parseInit(init) || !expect(Tok::RBrace, "'}'"))
        return false;
    }
    fn.addArgument(std::move(name), std::move(type), role, std::move(init), loc);
    fn.arguments().back().bind = bind;
    return true;
  }

  /// '{' 'bind' '=' (tokens | positions | other) [',' 'range' '=' '[' lo ',' hi ')'] '}'
  bool parseBinding(InputBinding &bind) {
    Loc brace = tok_.loc;
    consume(); // '{'
    if (isWord("init"))
      return fail(brace, "only weights take an initialiser");
    if (!isWord("bind"))
      return is(Tok::Ident) ? fail(tok_.loc, "unknown input attribute '" + tok_.spelling +
                                                 "', expected 'bind'")
                            : failExpected("'bind'");
    consume();
    if (!expect(Tok::Equal, "'='"))
      return false;
    if (isWord("tokens"))
      bind.kind = BindKind::Tokens;
    else if (isWord("positions"))
      bind.kind = BindKind::Positions;
    else if (isWord("other"))
      bind.kind = BindKind::Other;
    else
      return failExpected("an input kind (tokens, positions or other)");
    consume();
    if (consumeIf(Tok::Comma)) {
      if (!isWord("range"))
        return failExpected("'range'");
      consume();
      Loc at;
      if (!expect(Tok::Equal, "'='") || !expect(Tok::LSquare, "'['") ||
          !parseInt(bind.lo, "an integer") || !expect(Tok::Comma, "','"))
        return false;
      at = tok_.loc;
      if (!parseInt(bind.hi, "an integer") || !expect(Tok::RParen, "')' (ranges are [lo, hi))"))
        return false;
      if (bind.hi <= bind.lo)
        return fail(at, "empty range [" + llvm::Twine(bind.lo) + ", " + llvm::Twine(bind.hi) +
                            ")");
    }
    return expect(Tok::RBrace, "'}'");
  }

  /// 'attributes' '{' 'role' '=' (decode | prefill ',' 'n' '=' N | other) '}'
  bool parseFunctionAttributes(Function &fn) {
    consume(); // 'attributes'
    if (!expect(Tok::LBrace, "'{'"))
      return false;
    if (!isWord("role"))
      return is(Tok::Ident) ? fail(tok_.loc, "unknown graph attribute '" + tok_.spelling +
                                                 "', expected 'role'")
                            : failExpected("'role'");
    consume();
    if (!expect(Tok::Equal, "'='"))
      return false;
    EntryContract c;
    if (isWord("decode")) {
      c = {EntryRole::Decode, 1};
      consume();
    } else if (isWord("other")) {
      consume();
    } else if (isWord("prefill")) {
      consume();
      if (!expect(Tok::Comma, "',' (prefill needs n = N)"))
        return false;
      if (!isWord("n"))
        return failExpected("'n'");
      consume();
      Loc at;
      if (!expect(Tok::Equal, "'='"))
        return false;
      at = tok_.loc;
      c.role = EntryRole::Prefill;
      if (!parseInt(c.tokens, "the prefill token count"))
        return false;
      if (c.tokens < 1)
        return fail(at, "prefill n must be positive, got " + llvm::Twine(c.tokens));
    } else {
      return failExpected("an entry role (decode, prefill or other)");
    }
    fn.setContract(c);
    return expect(Tok::RBrace, "'}'");
  }

  // --- statements ------------------------------------------------------------------
  bool parseAttrValue(const AttrSpec &spec, Attribute &a, StringRef op) {
    std::string what =
        kindWords(spec) + " for attribute '" + std::string(spec.name) + "' of '" + op.str() + "'";
    switch (spec.kind) {
    case AttrKind::Int:
      return parseInt(a.i, what);
    case AttrKind::Float:
      return parseFloat(a.f, what);
    case AttrKind::Ints: {
      a.ints.clear();
      if (!is(Tok::LSquare))
        return failExpected(what);
      consume();
      if (consumeIf(Tok::RSquare))
        return true;
      while (true) {
        int64_t v;
        if (!parseInt(v, "an integer"))
          return false;
        a.ints.push_back(v);
        if (consumeIf(Tok::Comma))
          continue;
        return expect(Tok::RSquare, "',' or ']'");
      }
    }
    case AttrKind::Enum: {
      if (!is(Tok::Ident))
        return failExpected(what);
      for (size_t i = 0; i < spec.words.size(); ++i) {
        if (tok_.spelling == StringRef(spec.words[i].data(), spec.words[i].size())) {
          a.i = static_cast<int64_t>(i);
          consume();
          return true;
        }
      }
      return fail(tok_.loc, "bad value '" + tok_.spelling + "' for attribute '" +
                                StringRef(spec.name.data(), spec.name.size()) + "' of '" + op +
                                "', expected " + kindWords(spec));
    }
    case AttrKind::DType: {
      if (!is(Tok::Ident))
        return failExpected(what);
      auto dt = parseDType(std::string_view(tok_.spelling.data(), tok_.spelling.size()));
      if (!dt)
        return fail(tok_.loc, "unknown dtype '" + tok_.spelling + "'");
      a.i = static_cast<int64_t>(*dt);
      consume();
      return true;
    }
    }
    return failExpected(what);
  }

  bool parseStatement(Function &fn) {
    Loc loc = tok_.loc;
    llvm::SmallVector<std::string, 1> names;
    while (true) {
      if (!is(Tok::Value))
        return failExpected("a result name");
      if (fn.lookup(tok_.value) != kNoValue || llvm::is_contained(names, tok_.value))
        return fail(tok_.loc, "redefinition of value '%" + tok_.value + "'");
      names.push_back(tok_.value);
      consume();
      if (!consumeIf(Tok::Comma))
        break;
    }
    if (!expect(Tok::Equal, "'='"))
      return false;
    if (!is(Tok::Ident))
      return failExpected("an op name");
    Loc opLoc = tok_.loc;
    std::string op = tok_.spelling.str();
    std::optional<OpKind> kind = lookupOp(op);
    if (!kind)
      return fail(opLoc, "unknown op '" + op + "'");
    const OpInfo &info = opInfo(*kind);
    consume();

    if (!expect(Tok::LParen, "'('"))
      return false;
    llvm::SmallVector<ValueId, 4> operands;
    if (!consumeIf(Tok::RParen)) {
      while (true) {
        if (!is(Tok::Value))
          return failExpected("an operand");
        ValueId v = fn.lookup(tok_.value);
        if (v == kNoValue)
          return fail(tok_.loc, "use of undefined value '%" + tok_.value + "'");
        operands.push_back(v);
        consume();
        if (consumeIf(Tok::Comma))
          continue;
        if (!expect(Tok::RParen, "',' or ')'"))
          return false;
        break;
      }
    }
    if (operands.size() < info.minOperands() || operands.size() > info.maxOperands()) {
      std::string want = std::to_string(info.minOperands());
      if (info.numOptional)
        want += " to " + std::to_string(info.maxOperands());
      return fail(opLoc, "'" + op + "' expects " + want + " operand(s), got " +
                             std::to_string(operands.size()));
    }

    AttrList attrs = defaultAttrs(*kind);
    llvm::SmallVector<bool, 4> given(info.attrs.size(), false);
    if (consumeIf(Tok::LBrace) && !consumeIf(Tok::RBrace)) {
      while (true) {
        if (!is(Tok::Ident))
          return failExpected("an attribute name");
        std::string name = tok_.spelling.str();
        std::optional<unsigned> idx = info.findAttr(name);
        if (!idx)
          return fail(tok_.loc, "unknown attribute '" + name + "' for '" + op + "'");
        if (given[*idx])
          return fail(tok_.loc, "attribute '" + name + "' is given twice");
        given[*idx] = true;
        consume();
        if (!expect(Tok::Equal, "'='") || !parseAttrValue(info.attrs[*idx], attrs[*idx], op))
          return false;
        if (consumeIf(Tok::Comma))
          continue;
        if (!expect(Tok::RBrace, "',' or '}'"))
          return false;
        break;
      }
    }
    for (size_t i = 0; i < info.attrs.size(); ++i)
      if (info.attrs[i].required && !given[i])
        return fail(opLoc,
                    "'" + op + "' requires attribute '" + std::string(info.attrs[i].name) + "'");

    if (!expect(Tok::Colon, "':'"))
      return false;
    llvm::SmallVector<TensorType, 1> types;
    llvm::SmallVector<Loc, 1> typeLocs;
    while (true) {
      typeLocs.push_back(tok_.loc);
      types.emplace_back();
      if (!parseType(types.back()))
        return false;
      if (!consumeIf(Tok::Comma))
        break;
    }

    // A kVariadicResults row has at most numResults; inference says how many.
    if (names.size() > info.numResults ||
        (names.size() != info.numResults && !info.has(kVariadicResults)))
      return fail(loc, "'" + op + "' has " + std::to_string(info.numResults) + " result(s), got " +
                           std::to_string(names.size()) + " name(s)");
    if (types.size() != names.size())
      return fail(typeLocs.front(), "expected " + std::to_string(names.size()) +
                                        " result type(s), got " + std::to_string(types.size()));
    llvm::SmallVector<TensorType, 4> operandTypes;
    for (ValueId v : operands)
      operandTypes.push_back(fn.type(v));
    llvm::SmallVector<TensorType, 1> inferred;
    if (llvm::Error e = inferResultTypes(*kind, operandTypes, attrs, inferred))
      return fail(opLoc, llvm::toString(std::move(e)));
    if (inferred.size() != types.size())
      return fail(loc, "'" + op + "' infers " + std::to_string(inferred.size()) +
                           " result(s) here, got " + std::to_string(names.size()) + " name(s)");
    for (size_t r = 0; r < types.size(); ++r)
      if (types[r] != inferred[r])
        return fail(typeLocs[r], "declared type " + types[r].str() + " does not match inferred " +
                                     inferred[r].str());
    fn.addNode(*kind, operands, std::move(attrs), types, names, loc);
    return true;
  }

  bool parseReturn(Function &fn) {
    consume(); // 'return'
    while (is(Tok::Value)) {
      ValueId v = fn.lookup(tok_.value);
      if (v == kNoValue)
        return fail(tok_.loc, "use of undefined value '%" + tok_.value + "'");
      fn.addResult(v);
      consume();
      if (!consumeIf(Tok::Comma))
        break;
      if (!is(Tok::Value))
        return failExpected("a result value");
    }
    return expect(Tok::RBrace, "'}'");
  }

  bool parseFunction(Graph &g) {
    if (!isWord("graph"))
      return failExpected("'graph'");
    consume();
    if (!is(Tok::Global))
      return failExpected("a graph name (@name)");
    if (!graphNames_.insert(tok_.value).second)
      return fail(tok_.loc, "redefinition of graph '@" + tok_.value + "'");
    Function &fn = g.addFunction(tok_.value);
    consume();
    if (!expect(Tok::LParen, "'('"))
      return false;
    if (!consumeIf(Tok::RParen)) {
      while (true) {
        if (!parseArgument(fn))
          return false;
        if (consumeIf(Tok::Comma))
          continue;
        if (!expect(Tok::RParen, "',' or ')'"))
          return false;
        break;
      }
    }
    if (isWord("attributes") && !parseFunctionAttributes(fn))
      return false;
    if (!expect(Tok::LBrace, "'{'"))
      return false;
    while (true) {
      if (is(Tok::Value)) {
        if (!parseStatement(fn))
          return false;
        continue;
      }
      if (isWord("return"))
        return parseReturn(fn);
      return failExpected("a statement or 'return'");
    }
  }

  Lexer lex_;
  std::string file_;
  Token tok_;
  std::optional<std::string> err_;
  llvm::StringSet<> graphNames_;
};

} // namespace

llvm::Expected<Graph> parseGraph(llvm::StringRef text, llvm::StringRef filename) {
  return Parser(text, filename).parse();
}

llvm::Expected<Graph> parseGraphFile(llvm::StringRef path) {
  ReadFileOptions o;
  o.requiresNullTerminator = true;
  auto buf = readRegularFile(path, o);
  if (!buf)
    return makeError("cannot read '" + path + "': " + llvm::toString(buf.takeError()));
  return parseGraph((*buf)->getBuffer(), path);
}

} // namespace fg
