//===- HostTensor.cpp - host tensors and deterministic weight init ---------===//
#include "runtime/reference/Interpreter.h"

#include "ir/Numeric.h"
#include "runtime/HostMemory.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <numbers>

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

uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace

double initValue(const WeightInit &init, uint64_t i) {
  uint64_t h = splitmix64(init.seed ^ (0x9E3779B97F4A7C15ull * i));
  switch (init.kind) {
  case WeightInit::Kind::Normal: {
    double u1 = (static_cast<double>(h >> 32) + 0.5) * 0x1p-32;
    double u2 = static_cast<double>(h & 0xFFFFFFFFull) * 0x1p-32;
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    return init.mean + init.std * z;
  }
  case WeightInit::Kind::Uniform:
    return init.min + (init.max - init.min) * (static_cast<double>(h >> 11) * 0x1p-53);
  case WeightInit::Kind::Constant:
    return init.value;
  case WeightInit::Kind::None:
  case WeightInit::Kind::Tensor:
    break;
  }
  assert(false && "initValue needs a Normal, Uniform or Constant initialiser");
  return 0;
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
  // The values (staged as f32 or i64, at most 8 bytes each), then the tensor.
  if (llvm::Expected<uint64_t> bytes = checkHostTensor(type, "initialising", 8); !bytes)
    return bytes.takeError();

  if (isQuantized(type.dtype))
    return fail("cannot initialise block-quantised weight " + type.str() + " from " + init.str() +
                ": bind its bytes instead");
  std::vector<float> values(static_cast<size_t>(type.numElements()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(initValue(init, i));
  out = HostTensor::fromFloats(type, values);
  return llvm::Error::success();
}

} // namespace fg
