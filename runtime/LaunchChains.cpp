//===- LaunchChains.cpp - how an entry's launches line up -----------------===//
#include "runtime/LaunchChains.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <vector>

namespace fg {

namespace {

/// Whether a value of this name belongs to decoder layer 0: "blk.0.*", or
/// layer 0's KV cache as a step writes it ("k_cache.0", "v_cache.0.1": the
/// state's name, then the SSA copy's number).
bool ofLayerZero(llvm::StringRef name) {
  if (name.startswith("blk.0."))
    return true;
  size_t at = name.find("_cache.0");
  if (at == llvm::StringRef::npos || name.substr(0, at).contains('.'))
    return false;
  llvm::StringRef rest = name.substr(at + 8);
  return rest.empty() || rest.startswith(".");
}

} // namespace

LaunchChains launchChains(const CompiledEntry &entry, const Function *fn) {
  LaunchChains c;
  const std::vector<LaunchRecord> &ls = entry.launches;
  c.launches = ls.size();
  std::vector<bool> inLayer(ls.size(), false);
  for (size_t i = 0; i < ls.size(); ++i) {
    const LaunchRecord &l = ls[i];
    if (!fn || l.node == kNoNode || l.node >= fn->numNodes())
      continue;
    const Node &n = fn->node(l.node);
    inLayer[i] = llvm::any_of(n.results, [&](ValueId r) { return ofLayerZero(fn->value(r).name); });
  }
  // Deps point to earlier launches (the plan reader checks it), so one pass
  // in launch order finds every longest path.
  std::vector<size_t> all(ls.size(), 0), layer(ls.size(), 0);
  for (size_t i = 0; i < ls.size(); ++i) {
    size_t a = 0, b = 0;
    for (uint32_t d : ls[i].deps) {
      if (d >= i)
        continue;
      a = std::max(a, all[d]);
      if (inLayer[d])
        b = std::max(b, layer[d]);
    }
    all[i] = a + 1;
    c.longest = std::max(c.longest, all[i]);
    if (inLayer[i]) {
      layer[i] = b + 1;
      ++c.layerLaunches;
      c.layerLongest = std::max(c.layerLongest, layer[i]);
    }
  }
  if (c.layerLaunches)
    c.layer = "blk.0";
  return c;
}

} // namespace fg
