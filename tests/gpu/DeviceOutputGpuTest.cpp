//===- DeviceOutputGpuTest.cpp - results where the device keeps them -------===//
//
// Executor::deviceOutput (what python/'s DLPack view hands to torch) points at
// the bytes outputFloats copies out, stays at one address across steps of an
// entry (the arena slot), and holds the newer step's values after it.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/Frontend.h"

#include <cuda_runtime.h>

#include <cstring>

using namespace fg;
using namespace fg::gputest;

namespace {

std::vector<float> deviceFloats(const Executor::DeviceOutput &d) {
  std::vector<float> out(static_cast<size_t>(d.type.numElements()));
  EXPECT_EQ(cudaMemcpy(out.data(), d.data, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

} // namespace

TEST(GpuDeviceOutput, AliasesTheArenaSlotOfTheResult) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 256;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  CompileOptions co;
  co.ctx = 256;
  auto plan = compile(*g, co);
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  ExecOptions o;
  o.device = ExecOptions::Device::Cuda;
  auto e = Executor::create(*plan, o);
  ASSERT_TRUE(bool(e)) << errString(e.takeError());

  const void *first = nullptr;
  for (int32_t p = 0; p < 3; ++p) {
    ASSERT_FALSE(bool(e->setInput("tokens", {5 + p})));
    ASSERT_FALSE(bool(e->setInput("positions", {p})));
    ASSERT_FALSE(bool(e->run("decode")));
    auto d = e->deviceOutput("logits");
    ASSERT_TRUE(bool(d)) << errString(d.takeError());
    EXPECT_EQ(d->type.str(), "f32[1, 512]");
    if (p == 0)
      first = d->data;
    EXPECT_EQ(d->data, first) << "step " << p << ": the logits moved";
    auto host = e->outputFloats("logits");
    ASSERT_TRUE(bool(host));
    std::vector<float> dev = deviceFloats(*d);
    ASSERT_EQ(dev.size(), host->size());
    EXPECT_EQ(0, std::memcmp(dev.data(), host->data(), dev.size() * sizeof(float))) << "step " << p;
  }
}
