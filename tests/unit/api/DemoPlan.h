//===- DemoPlan.h - the demo model as a CPU plan, for the api tests -*- C++ -*-===//
//
// The demo with ctx 16 and one prefill bucket of 4, compiled without the CUDA
// program (the CPU executor needs no kernels), once per test binary.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"

#include <gtest/gtest.h>

namespace fg::apitest {

inline const Plan &demoPlan() {
  static const Plan plan = [] {
    ModelOptions mo;
    mo.ctx = 16;
    mo.prefill = {4};
    llvm::Expected<Graph> g = loadModel("demo", mo);
    if (!g)
      ADD_FAILURE() << llvm::toString(g.takeError());
    CompileOptions co;
    co.ctx = 16;
    co.cuda = false;
    llvm::Expected<Plan> p = compile(*g, co);
    if (!p)
      ADD_FAILURE() << llvm::toString(p.takeError());
    return std::move(*p);
  }();
  return plan;
}

} // namespace fg::apitest
