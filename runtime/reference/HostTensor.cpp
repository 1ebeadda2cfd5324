//===- HostTensor.cpp - host tensors and deterministic weight init ---------===//
#include "runtime/reference/Interpreter.h"

#include "ir/InitFormula.h"
#include "ir/Numeric.h"
#include "ir/Quantize.h"
#include "runtime/HostMemory.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <thread>

namespace fg {

HostTensor HostTensor::zeros(TensorType t) {
  HostTensor h;
  h.data.assign(static_cast<size_t>(t.bytes()), 0);
  h.type = std::move(t);
  return h;
}

HostTensor HostTensor::fromFloats(TensorType t, llvm::ArrayRef<float> values) {
  assert(static_cast<int64_t>(values.size()) == t.numElements() && "one value per element");
  HostTensor h = zeros(std::move(t));
  bool ok = encodeRow(h.type.dtype, values.data(), h.data.data(), h.numElements());
  assert(ok && "block-quantised tensors cannot be encoded from floats");
  (void)ok;
  return h;
}

HostTensor HostTensor::fromInts(TensorType t, llvm::ArrayRef<int64_t> values) {
  assert(static_cast<int64_t>(values.size()) == t.numElements() && "one value per element");
  if (!isInteger(t.dtype)) {
    std::vector<float> f(values.begin(), values.end());
    return fromFloats(std::move(t), f);
  }
  HostTensor h = zeros(std::move(t));
  for (size_t i = 0; i < values.size(); ++i) {
    if (h.type.dtype == DType::I32) {
      int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(h.data.data() + 4 * i, &v, 4);
    } else {
      std::memcpy(h.data.data() + 8 * i, &values[i], 8);
    }
  }
  return h;
}

std::vector<float> HostTensor::toFloats() const {
  std::vector<float> out(static_cast<size_t>(numElements()));
  decodeRow(type.dtype, data.data(), out.data(), numElements());
  return out;
}

std::vector<int64_t> HostTensor::toInts() const {
  assert(isInteger(type.dtype) && "toInts reads integer tensors only");
  std::vector<int64_t> out(static_cast<size_t>(numElements()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (type.dtype == DType::I32) {
      int32_t v;
      std::memcpy(&v, data.data() + 4 * i, 4);
      out[i] = v;
    } else {
      std::memcpy(&out[i], data.data() + 8 * i, 8);
    }
  }
  return out;
}

namespace {

/// fn(r0, r1) over rows [0, rows) in contiguous chunks, one per core for
/// tensors of a million elements or more.
template <typename Fn> void forRowChunks(int64_t rows, int64_t rowLen, Fn fn) {
  int64_t workers = std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (workers == 1 || rows < 2 || rows * rowLen < (int64_t(1) << 20))
    return fn(0, rows);
  workers = std::min(workers, rows);
  int64_t per = (rows + workers - 1) / workers;
  std::vector<std::thread> pool;
  for (int64_t r0 = 0; r0 < rows; r0 += per)
    pool.emplace_back(fn, r0, std::min(rows, r0 + per));
  for (std::thread &t : pool)
    t.join();
}

} // namespace

InitFormulaArgs initFormulaArgs(const WeightInit &init) {
  switch (init.kind) {
  case WeightInit::Kind::Normal:
    return {fg_init::Normal, init.seed, init.mean, init.std};
  case WeightInit::Kind::Uniform:
    return {fg_init::Uniform, init.seed, init.min, init.max};
  case WeightInit::Kind::Constant:
    return {fg_init::Constant, init.seed, init.value, 0};
  case WeightInit::Kind::None:
  case WeightInit::Kind::Tensor:
    break;
  }
  return {fg_init::None, 0, 0, 0};
}

double initValue(const WeightInit &init, uint64_t i) {
  InitFormulaArgs f = initFormulaArgs(init);
  assert(f.kind != fg_init::None && "initValue needs a Normal, Uniform or Constant initialiser");
  return fg_init::value(f.kind, f.seed, f.a, f.b, i);
}

llvm::Error materializeInit(const WeightInit &init, const TensorType &type, HostTensor &out) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  switch (init.kind) {
  case WeightInit::Kind::None:
    return fail("no initialiser for " + type.str() +
                ": bind its bytes (bindWeight) before running the reference");
  case WeightInit::Kind::Tensor:
    return fail(type.str() + " refers to tensor '" + init.name + "' in '" + init.file +
                "': the reference interpreter does not read model files; bind the tensor "
                "(bindWeight)");
  case WeightInit::Kind::Normal:
  case WeightInit::Kind::Uniform:
  case WeightInit::Kind::Constant:
    break;
  }
  int64_t block = dtypeInfo(type.dtype).blockElems;
  if (block > 1 && (type.shape.empty() || type.shape.back() % block))
    return fail("cannot initialise " + type.str() + ": its rows must be whole blocks of " +
                llvm::Twine(block));
  // The values (staged as f32 or i64, at most 8 bytes each), then the tensor.
  if (llvm::Expected<uint64_t> bytes = checkHostTensor(type, "initialising", 8); !bytes)
    return bytes.takeError();

  // ir/InitFormula.h: f64 value -> f32 -> the dtype (integers: llroundf; block
  // types: ir/Quantize.h, round to nearest per block).
  if (isInteger(type.dtype)) {
    std::vector<int64_t> values(static_cast<size_t>(type.numElements()));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = fg_init::toInteger(fg_init::toF32(initValue(init, i)));
    out = HostTensor::fromInts(type, values);
    return llvm::Error::success();
  }
  // Real types: the values row by row on every core (a w-dense-q4_k weight
  // has 0.5 G values; the formula is a pure function of the index).
  int64_t n = type.numElements(), rowLen = type.shape.empty() ? 1 : type.shape.back();
  int64_t rows = rowLen ? n / rowLen : 0;
  auto fill = [&](float *dst, int64_t r) {
    for (int64_t j = 0; j < rowLen; ++j)
      dst[j] = fg_init::toF32(initValue(init, static_cast<uint64_t>(r * rowLen + j)));
  };
  if (isQuantized(type.dtype)) {
    out = HostTensor::zeros(type);
    int64_t rowBytes = storageBytes(type.dtype, rowLen);
    forRowChunks(rows, rowLen, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(rowLen));
      for (int64_t r = r0; r < r1; ++r) {
        fill(row.data(), r);
        bool ok = quantizeRow(type.dtype, row.data(), out.data.data() + r * rowBytes, rowLen);
        assert(ok && "rows of whole blocks quantise");
        (void)ok;
      }
    });
    return llvm::Error::success();
  }
  std::vector<float> values(static_cast<size_t>(n));
  forRowChunks(rows, rowLen, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      fill(values.data() + r * rowLen, r);
  });
  out = HostTensor::fromFloats(type, values);
  return llvm::Error::success();
}

} // namespace fg
