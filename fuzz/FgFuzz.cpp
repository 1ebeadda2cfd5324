//===- FgFuzz.cpp - fuzz the .fg parser and verifier ----------------------===//
//
// Input: .fg text. parseGraph (which verifies) must return a graph or an
// error, never crash; a graph it accepts must verify again, print, and the
// printed text must parse back to the same text (print(parse(s)) == s).
//
//===----------------------------------------------------------------------===//
#include "FuzzUtil.h"

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

using namespace fg;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<Graph> g = parseGraph(text, "fuzz.fg");
  if (!g) {
    std::string msg = llvm::toString(g.takeError());
    if (msg.empty())
      fuzz::fail("a parse error without a message");
    return 0;
  }
  if (llvm::Error e = verifyGraph(*g, "fuzz.fg"))
    fuzz::fail("the parser accepted a graph the verifier refuses", llvm::toString(std::move(e)));
  std::string printed = printToString(*g);
  llvm::Expected<Graph> again = parseGraph(printed, "printed.fg");
  if (!again)
    fuzz::fail("printed text does not parse back",
               llvm::toString(again.takeError()) + "\n--- printed:\n" + printed);
  std::string reprinted = printToString(*again);
  if (reprinted != printed)
    fuzz::fail("print(parse(print(g))) != print(g)",
               "--- first:\n" + printed + "\n--- second:\n" + reprinted);
  return 0;
}
