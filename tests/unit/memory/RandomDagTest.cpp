// Property test: 200 random graphs (branches, views, transposes, state
// updates, scratch); the DAG's reachability matches a brute-force closure and
// no two possibly-concurrent live values overlap.
#include "MemoryTestUtil.h"

#include <random>

namespace fg {
namespace {

using testing::BruteForce;
using testing::planOrDie;

struct RandomGraph {
  std::mt19937 rng;
  explicit RandomGraph(unsigned seed) : rng(seed) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }

  void build(Function &fn) {
    Builder b(fn);
    const int64_t R = 4, C = 16 * (1 + pick(4)); // [4, C] f32, C·16 bytes: some not 256-aligned
    std::vector<ValueId> pool;                   // f32[R, C] values
    int numInputs = 1 + pick(3);
    for (int i = 0; i < numInputs; ++i)
      pool.push_back(b.input("x" + std::to_string(i), {DType::F32, {R, C}}));
    ValueId pos = b.input("positions", {DType::I32, {R}});
    ValueId cache = b.state("cache", {DType::F32, {16, C}});
    ValueId cacheVersion = cache;
    ValueId w = b.weight("w", {DType::F16, {C, C}});
    int numNodes = 5 + pick(30);
    auto any = [&] { return pool[pick(static_cast<int>(pool.size()))]; };
    // Prefer recent values so chains form, but reach back for branches.
    auto recent = [&] {
      int n = static_cast<int>(pool.size());
      return pool[std::max(0, n - 1 - pick(std::min(n, 4)))];
    };
    for (int i = 0; i < numNodes; ++i) {
      std::string name = "n" + std::to_string(i);
      ValueId v = kNoValue;
      switch (pick(10)) {
      case 0:
        v = b.unary(OpKind::Silu, recent(), name);
        break;
      case 1:
        v = b.unary(OpKind::Exp, any(), name);
        break;
      case 2:
        v = b.add(recent(), any(), name);
        break;
      case 3:
        v = b.mul(any(), any(), name);
        break;
      case 4:
        v = b.matmul(recent(), w, name);
        break;
      case 5: // a dense row slice of a value, re-expanded
        v = b.concat(b.view(recent(), {2, C}, {C, 1}, C * pick(3), name + "v"),
                     b.view(any(), {2, C}, {C, 1}, 0, name + "w"), 0, name);
        break;
      case 6: // transpose then copy back
        v = b.cont(b.transpose(b.transpose(recent(), name + "t"), name + "tt"), name);
        break;
      case 7: // reshape round trip
        v = b.unary(OpKind::Tanh, b.reshape(any(), {R * C}, name + "r"), name + "u");
        v = b.reshape(v, {R, C}, name);
        break;
      case 8: // read the cache (old or current version), or update it
        if (pick(2)) {
          v = b.getRows(cacheVersion, pos, name);
        } else {
          cacheVersion = b.setRows(cacheVersion, recent(), pos, name + "c");
          continue;
        }
        break;
      default:
        v = b.rmsNorm(recent(), 1e-6, name);
        break;
      }
      pool.push_back(v);
    }
    int numResults = 1 + pick(2);
    for (int i = 0; i < numResults; ++i)
      b.result(pool[pool.size() - 1 - pick(std::min<int>(3, static_cast<int>(pool.size())))]);
    if (cacheVersion != cache && pick(2))
      b.result(cacheVersion);
    llvm::Error err = b.finish();
    ASSERT_FALSE(err) << llvm::toString(std::move(err));
  }
};

TEST(RandomDag, NoConcurrentOverlapIn200Graphs) {
  int shared = 0;
  for (unsigned seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Function fn("random");
    RandomGraph gen(seed);
    gen.build(fn);
    if (::testing::Test::HasFatalFailure())
      return;
    MemoryPlanOptions opts;
    if (seed % 3 == 0)
      opts.scratchBytes = [seed](const Function &f, NodeId n) -> int64_t {
        return (n + seed) % 4 == 0 && f.node(n).kind != OpKind::SetRows ? 300 * (1 + n % 3) : 0;
      };
    auto [dag, plan] = planOrDie(fn, opts);
    if (::testing::Test::HasFailure())
      return;

    BruteForce brute(fn);
    // The DAG's reachability is the brute-force closure restricted to launches.
    for (NodeId a = 0; a < fn.numNodes(); ++a)
      for (NodeId c = 0; c < fn.numNodes(); ++c) {
        LaunchId la = dag.launchOf(a), lc = dag.launchOf(c);
        if (la == kNoLaunch || lc == kNoLaunch)
          continue;
        ASSERT_EQ(dag.happensBefore(la, lc), static_cast<bool>(brute.before[a][c]))
            << "nodes " << a << " -> " << c;
      }
    EXPECT_EQ(brute.check(plan), "");
    llvm::Error err = verifyNoOverlap(fn, plan, dag);
    EXPECT_FALSE(err) << llvm::toString(std::move(err));
    std::vector<OverlapViolation> v = proveNoOverlap(fn, plan);
    EXPECT_TRUE(v.empty()) << (v.empty() ? "" : v[0].reason);
    EXPECT_LE(plan.peakLiveBytes, plan.arenaBytes);
    EXPECT_LE(plan.arenaBytes, plan.unsharedBytes);
    shared += plan.arenaBytes < plan.unsharedBytes;
  }
  EXPECT_GT(shared, 100) << "most random graphs should reuse memory";
}

} // namespace
} // namespace fg
