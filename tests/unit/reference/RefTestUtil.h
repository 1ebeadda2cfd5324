//===- RefTestUtil.h - helpers for the reference interpreter tests --------===//
#pragma once

#include "ir/Builder.h"
#include "runtime/reference/Interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace fg::test {

/// n draws of N(0, stdev²), reproducible from `seed`.
inline std::vector<float> normals(size_t n, uint32_t seed, float stdev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stdev);
  std::vector<float> x(n);
  for (float &v : x)
    v = dist(rng);
  return x;
}

inline HostTensor f32(llvm::ArrayRef<int64_t> shape, std::vector<float> v) {
  return HostTensor::fromFloats({DType::F32, shape}, v);
}
inline HostTensor f16(llvm::ArrayRef<int64_t> shape, std::vector<float> v) {
  return HostTensor::fromFloats({DType::F16, shape}, v);
}
inline HostTensor i32(llvm::ArrayRef<int64_t> shape, std::vector<int64_t> v) {
  return HostTensor::fromInts({DType::I32, shape}, v);
}

/// Builds one op over inputs and evaluates it with evalNode.
struct OneOp {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b{fn};
  std::map<ValueId, HostTensor> args;

  ValueId in(HostTensor t) {
    ValueId v = b.input("in" + std::to_string(args.size()), t.type);
    args.emplace(v, std::move(t));
    return v;
  }
  /// Evaluates the last node built; the Error is returned for the caller to check.
  llvm::Expected<HostTensor> tryEval() {
    if (llvm::Error e = b.finish())
      return e;
    const Node &n = fn.nodes().back();
    std::vector<const HostTensor *> ops;
    for (ValueId v : n.operands)
      ops.push_back(&args.at(v));
    llvm::SmallVector<HostTensor, 1> results;
    if (llvm::Error e = evalNode(n, ops, results))
      return e;
    EXPECT_EQ(results[0].type, fn.type(n.result())) << "result type matches the IR";
    return std::move(results[0]);
  }
  HostTensor eval() {
    auto r = tryEval();
    if (!r) {
      ADD_FAILURE() << llvm::toString(r.takeError());
      return HostTensor();
    }
    return std::move(*r);
  }
  /// The error message of a failing evaluation ("" if it succeeded).
  std::string error() {
    auto r = tryEval();
    if (r)
      return "";
    return llvm::toString(r.takeError());
  }
};

inline void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                       double relTol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
      continue;
    }
    double tol = relTol * std::max(1.0, std::fabs(static_cast<double>(want[i])));
    EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

inline void expectNear(const HostTensor &got, const std::vector<float> &want,
                       double relTol = 1e-5) {
  expectNear(got.toFloats(), want, relTol);
}

} // namespace fg::test
