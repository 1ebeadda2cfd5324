//===- Printer.h - the canonical .fg text form -------------------*- C++ -*-===//
//
//   graph @decode(input %tokens: i32[1], weight %w: f32[4] {init = constant(value = 1.0)}) {
//     %0 = get_rows(%w, %tokens) : f32[1]
//     return %0
//   }
//
// Arguments are printed one per line when there are more than two. Values
// without a name print as numbers assigned in order of definition (skipping
// numbers used as names). Attributes print in declaration order, only when
// they differ from their default (required ones always). Floats use the
// shortest text that reads back to the same bits. print(parse(s)) == s.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace fg {

void printFunction(const Function &fn, llvm::raw_ostream &os);
void printGraph(const Graph &g, llvm::raw_ostream &os);
std::string printToString(const Graph &g);
std::string printToString(const Function &fn);

} // namespace fg
