//===- Flags.cpp - the fusegraph command line's small flag parser ---------===//
#include "tools/Flags.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace fg::cli {

Flags::Flags(std::string command, std::string usage, std::string summary)
    : command_(std::move(command)), usage_(std::move(usage)), summary_(std::move(summary)) {
  flag("help", "show this help");
}

void Flags::flag(std::string name, std::string help) {
  specs_.push_back({std::move(name), "", std::move(help), "", false});
}

void Flags::option(std::string name, std::string metavar, std::string help, std::string def) {
  specs_.push_back({std::move(name), std::move(metavar), std::move(help), std::move(def), true});
}

const Flags::Spec *Flags::find(StringRef name) const {
  for (const Spec &s : specs_)
    if (s.name == name)
      return &s;
  return nullptr;
}

std::string didYouMean(StringRef word, ArrayRef<std::string> candidates, StringRef prefix) {
  const std::string *best = nullptr;
  unsigned bestDistance = ~0u;
  for (const std::string &c : candidates) {
    unsigned d = word.edit_distance(c, /*AllowReplacements=*/true, /*MaxEditDistance=*/8);
    if (d < bestDistance) {
      best = &c;
      bestDistance = d;
    }
  }
  // Close enough to be a typo: a third of the word, at least two edits (a swap).
  if (!best || bestDistance > std::max<size_t>(2, word.size() / 3))
    return "";
  return " (did you mean " + prefix.str() + *best + "?)";
}

int Flags::usageError(const Twine &msg) const {
  errs() << "fusegraph: error: " << msg << "\n";
  return kUsage;
}

bool Flags::parse(ArrayRef<const char *> args, int &exitCode) {
  exitCode = kOk;
  for (size_t i = 0; i < args.size(); ++i) {
    StringRef arg = args[i];
    if (arg == "-" || !arg.startswith("-")) {
      positional_.push_back(arg.str());
      continue;
    }
    StringRef body = arg.drop_while([](char c) { return c == '-'; });
    auto [name, value] = body.split('=');
    bool hasValue = body.contains('=');
    if (arg == "-h")
      name = "help";
    const Spec *spec = find(name);
    if (!spec) {
      std::vector<std::string> names;
      for (const Spec &s : specs_)
        names.push_back(s.name);
      std::string hint = didYouMean(name, names, "--");
      exitCode = usageError("unknown flag " + arg.split('=').first + " for '" + command_ + "'" +
                            (hint.empty() ? " (see fusegraph " + command_ + " --help)" : hint));
      return false;
    }
    if (!spec->takesValue) {
      if (hasValue) {
        exitCode = usageError("flag --" + name + " of '" + command_ + "' takes no value");
        return false;
      }
      values_[name].push_back("1");
      continue;
    }
    if (!hasValue) {
      if (i + 1 >= args.size()) {
        exitCode = usageError("flag --" + name + " of '" + command_ + "' needs a value (" +
                              spec->metavar + ")");
        return false;
      }
      value = args[++i];
    }
    values_[name].push_back(value.str());
  }
  if (has("help")) {
    printHelp(outs());
    return false;
  }
  return true;
}

std::string Flags::get(StringRef name, StringRef def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def.str() : it->second.back();
}

std::vector<std::string> Flags::list(StringRef name) const {
  std::vector<std::string> out;
  auto it = values_.find(name);
  if (it == values_.end())
    return out;
  for (const std::string &v : it->second) {
    SmallVector<StringRef, 8> parts;
    StringRef(v).split(parts, ',', -1, /*KeepEmpty=*/false);
    for (StringRef p : parts)
      out.push_back(p.trim().str());
  }
  return out;
}

bool Flags::getInt(StringRef name, int64_t def, int64_t &out, int &exitCode) const {
  out = def;
  if (!has(name))
    return true;
  std::string v = get(name);
  if (StringRef(v).getAsInteger(10, out)) {
    exitCode =
        usageError("flag --" + name + " of '" + command_ + "' expects an integer, got '" + v + "'");
    return false;
  }
  return true;
}

bool Flags::getInts(StringRef name, std::vector<int64_t> &out, int &exitCode) const {
  out.clear();
  for (const std::string &v : list(name)) {
    int64_t n;
    if (StringRef(v).getAsInteger(10, n)) {
      exitCode = usageError("flag --" + name + " of '" + command_ +
                            "' expects integers separated by commas, got '" + v + "'");
      return false;
    }
    out.push_back(n);
  }
  return true;
}

void Flags::printHelp(raw_ostream &os) const {
  os << "usage: fusegraph " << usage_ << "\n\n" << summary_ << "\n\nflags:\n";
  for (const Spec &s : specs_) {
    std::string dashes = s.name.size() == 1 ? "-" : "--";
    std::string left = "  " + dashes + s.name + (s.takesValue ? " " + s.metavar : "");
    os << left;
    os.indent(left.size() < 30 ? 30 - left.size() : 1);
    os << s.help;
    if (!s.def.empty())
      os << " (default " << s.def << ")";
    os << "\n";
  }
}

int reportError(Error e) {
  handleAllErrors(std::move(e), [](const ErrorInfoBase &info) {
    std::string msg = info.message();
    // Located messages (`file.fg:12:7: error: ...`) as they are; a message
    // that only quotes another tool's "error:" later on gets the prefix.
    StringRef where = StringRef(msg).split(": error: ").first;
    if (StringRef(msg).contains(": error: ") && !where.contains(' '))
      errs() << msg << "\n";
    else
      errs() << "fusegraph: error: " << msg << "\n";
  });
  return kFailed;
}

} // namespace fg::cli
