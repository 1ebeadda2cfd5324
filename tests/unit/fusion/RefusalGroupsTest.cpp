// FusionReport::groupedRefusals and print: the same refusal in every layer of
// a model is one line with a count and the layers, not one line per layer.
#include "passes/fusion/FusionReport.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

FusionReport::Refusal refusal(std::string entry, int layer, std::string pattern = "matmul_add") {
  std::string l = std::to_string(layer);
  return {std::move(entry), std::move(pattern), "%blk." + l + ".ffn_inp",
          "%blk." + l + ".attn_flat has 16 tokens; the fused GEMV takes 1 to 8"};
}

TEST(RefusalGroups, PerLayerRefusalsBecomeOneGroupWithTheirLayers) {
  FusionReport r;
  for (int layer : {0, 1, 2, 3, 5})
    r.addRefusal(refusal("prefill_16", layer));
  r.addRefusal(refusal("prefill_64", 0));
  r.addRefusal({"prefill_16", "add_chain", "%blk.1.out",
                "intermediate %blk.0.out has another consumer, %blk.1.attn_in"});
  std::vector<FusionReport::RefusalGroup> g = r.groupedRefusals();
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].count, 5);
  EXPECT_EQ(g[0].root, "%blk.N.ffn_inp");
  EXPECT_EQ(g[0].reason, "%blk.N.attn_flat has 16 tokens; the fused GEMV takes 1 to 8");
  EXPECT_EQ(g[0].layers, (std::vector<int64_t>{0, 1, 2, 3, 5}));
  // Another entry is another group; a group of one keeps its names.
  EXPECT_EQ(g[1].entry, "prefill_64");
  EXPECT_EQ(g[1].count, 1);
  EXPECT_EQ(g[1].root, "%blk.0.ffn_inp");
  EXPECT_EQ(g[2].reason, "intermediate %blk.0.out has another consumer, %blk.1.attn_in");

  std::string text;
  llvm::raw_string_ostream os(text);
  r.print(os);
  EXPECT_NE(text.find("  @prefill_16  matmul_add refused 5\u00d7 (layers 0-3, 5) at "
                      "%blk.N.ffn_inp: %blk.N.attn_flat has 16 tokens; the fused GEMV takes 1 "
                      "to 8\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  @prefill_64  matmul_add at %blk.0.ffn_inp: %blk.0.attn_flat has 16 "
                      "tokens"),
            std::string::npos)
      << text;
}

TEST(RefusalGroups, NamesWithoutLayersStayApart) {
  FusionReport r;
  r.addRefusal({"decode", "softcap", "%logits", "scale is not a constant"});
  r.addRefusal({"decode", "softcap", "%logits2", "scale is not a constant"});
  r.addRefusal({"decode", "softcap", "%blk.x.y", "blk.7 is not a layer name"});
  std::vector<FusionReport::RefusalGroup> g = r.groupedRefusals();
  ASSERT_EQ(g.size(), 3u);
  for (const FusionReport::RefusalGroup &x : g) {
    EXPECT_EQ(x.count, 1);
    EXPECT_TRUE(x.layers.empty());
  }
  EXPECT_EQ(g[2].reason, "blk.7 is not a layer name");
}

} // namespace
