//===- PassGraphs.h - the graphs the pass-scaling bench and test run -*- C++ -*-===//
//
// bench/passes.cpp times the pipeline on them; tests/unit/fusion/ScaleTest.cpp
// checks that it stays linear. Header-only so both can include it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"

#include <cassert>
#include <string>

namespace fg::bench {

inline TensorType passGraphAct() { return TensorType(DType::F32, {4, 64}); }

/// x through n ops cycling silu, mul w, add b, relu, sqr, add b, sigmoid, mul w.
inline Graph chainGraph(int64_t n) {
  Graph g;
  Builder b(g.addFunction("main"));
  TensorType t = passGraphAct();
  ValueId x = b.input("x", t), w = b.input("w", t), bias = b.input("b", t);
  const OpKind cycle[] = {OpKind::Silu, OpKind::Mul, OpKind::Add,     OpKind::Relu,
                          OpKind::Sqr,  OpKind::Add, OpKind::Sigmoid, OpKind::Mul};
  for (int64_t i = 0; i < n; ++i) {
    OpKind k = cycle[i % 8];
    x = k == OpKind::Mul ? b.mul(x, w) : k == OpKind::Add ? b.add(x, bias) : b.unary(k, x);
  }
  b.result(x);
  llvm::Error e = b.finish();
  assert(!e && "the chain graph is well formed");
  llvm::consumeError(std::move(e));
  return g;
}

/// x0 + x1 + ... + xn as n adds, each input its own argument.
inline Graph wideGraph(int64_t n) {
  Graph g;
  Builder b(g.addFunction("main"));
  ValueId s = b.input("x0", passGraphAct());
  for (int64_t i = 1; i <= n; ++i)
    s = b.add(s, b.input("x" + std::to_string(i), passGraphAct()));
  b.result(s);
  llvm::Error e = b.finish();
  assert(!e && "the wide graph is well formed");
  llvm::consumeError(std::move(e));
  return g;
}

} // namespace fg::bench
