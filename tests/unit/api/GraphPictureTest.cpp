// runtime/GraphPicture: the layered layout, fused groups as clusters of their
// decomposition, refusals marked, launch DAG levels (parallel branches side by
// side), the layer filter, and the three renderings.
#include "runtime/GraphPicture.h"

#include "ir/Parser.h"

#include <gtest/gtest.h>

using namespace fg;
using llvm::Expected;
using llvm::toString;

namespace {

bool overlaps(const LayoutBox &a, const LayoutBox &b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

// One layer: a fused norm, three parallel projections (q, k, v), a sum; a
// second layer's norm; the k projection is a refused candidate's root.
const char *kGraph = R"(graph @decode(
    input %x: f32[1, 8],
    weight %w: f32[8],
    weight %wq: f32[8, 8],
    weight %wk: f32[8, 8],
    weight %wv: f32[8, 8],
    weight %w1: f32[8]) {
  %blk.0.n = fused.rms_norm_mul(%x, %w) {eps = 1e-05} : f32[1, 8]
  %blk.0.q = matmul(%blk.0.n, %wq) : f32[1, 8]
  %blk.0.k = matmul(%blk.0.n, %wk) : f32[1, 8]
  %blk.0.v = matmul(%blk.0.n, %wv) : f32[1, 8]
  %blk.0.qk = add(%blk.0.q, %blk.0.k) : f32[1, 8]
  %blk.0.out = add(%blk.0.qk, %blk.0.v) : f32[1, 8]
  %blk.1.n = fused.rms_norm_mul(%blk.0.out, %w1) {eps = 1e-05} : f32[1, 8]
  return %blk.1.n
}
)";

/// Launches of kGraph's nodes: the norm, then q, k, v all after it (one
/// level: parallel), the adds, the second norm.
CompiledEntry launchesOf() {
  CompiledEntry e;
  e.name = "decode";
  auto add = [&](uint32_t node, std::vector<uint32_t> deps) {
    LaunchRecord l;
    l.node = node;
    l.symbol = "k" + std::to_string(node);
    l.deps = std::move(deps);
    e.launches.push_back(l);
  };
  add(0, {});
  add(1, {0});
  add(2, {0});
  add(3, {0});
  add(4, {1, 2});
  add(5, {4, 3});
  add(6, {5});
  return e;
}

TEST(GraphPicture, LayoutPlacesBoxesBelowTheirPredecessorsWithoutOverlap) {
  std::vector<LayoutBox> boxes(5);
  for (LayoutBox &b : boxes) {
    b.w = 50;
    b.h = 20;
  }
  boxes[1].preds = {0};
  boxes[2].preds = {0};
  boxes[3].preds = {0};
  boxes[4].preds = {1, 2, 3};
  layoutBoxes(boxes, 10, 10);
  for (size_t i = 0; i < boxes.size(); ++i) {
    for (int p : boxes[i].preds)
      EXPECT_GE(boxes[i].y, boxes[p].y + boxes[p].h + 10) << i;
    for (size_t j = 0; j < i; ++j)
      EXPECT_FALSE(overlaps(boxes[i], boxes[j])) << i << " and " << j;
    EXPECT_GE(boxes[i].x, 0);
  }
  // The three siblings share a row; the join is centred under them.
  EXPECT_EQ(boxes[1].y, boxes[2].y);
  EXPECT_EQ(boxes[2].y, boxes[3].y);
  double mid = (boxes[1].x + boxes[3].x + boxes[3].w) / 2;
  EXPECT_NEAR(boxes[4].x + boxes[4].w / 2, mid, 35);
}

TEST(GraphPicture, FusedNodesAreClustersOfTheirDecomposition) {
  Expected<Graph> g = parseGraph(kGraph);
  ASSERT_TRUE(static_cast<bool>(g)) << toString(g.takeError());
  CompiledEntry entry = launchesOf();
  std::vector<PictureRefusal> refusals = {
      {"matmul_add", "%blk.0.k", "%blk.0.n has 9 tokens; the fused GEMV takes 1 to 8"}};
  Expected<GraphPicture> p =
      buildGraphPicture(*g->lookup("decode"), &entry, refusals, PictureOptions{});
  ASSERT_TRUE(static_cast<bool>(p)) << toString(p.takeError());
  ASSERT_EQ(p->clusters.size(), 2u);
  for (const GraphPicture::Cluster &c : p->clusters) {
    EXPECT_EQ(c.label, "fused.rms_norm_mul");
    // Its steps: rms_norm then mul, inside its box.
    std::vector<std::string> steps;
    for (const GraphPicture::Node &n : p->nodes) {
      if (n.cluster != &c - p->clusters.data())
        continue;
      steps.push_back(n.label);
      EXPECT_GE(n.x, c.x);
      EXPECT_LE(n.x + n.w, c.x + c.w);
      EXPECT_GE(n.y, c.y);
      EXPECT_LE(n.y + n.h, c.y + c.h);
    }
    EXPECT_EQ(steps, (std::vector<std::string>{"rms_norm", "mul"}));
  }
  // The refusal is on %blk.0.k's matmul, with its reason.
  int refused = 0;
  for (const GraphPicture::Node &n : p->nodes)
    if (!n.refusal.empty()) {
      ++refused;
      EXPECT_EQ(n.node, 2u);
      EXPECT_NE(n.tip.find("refused matmul_add: %blk.0.n has 9 tokens"), std::string::npos);
    }
  EXPECT_EQ(refused, 1);
  // Launch levels: 0, then q, k, v on level 1 side by side, then 2, 3, 4.
  EXPECT_EQ(p->levels, 5);
  EXPECT_EQ(p->parallelLevels, 1);
  EXPECT_EQ(p->widestLevel, 3);
  ASSERT_EQ(p->launches.size(), 7u);
  EXPECT_EQ(p->launches[1].y, p->launches[3].y);
  EXPECT_NE(p->launches[1].x, p->launches[2].x);
  EXPECT_GT(p->launches[4].y, p->launches[1].y);
  // Op nodes carry their launch's level.
  for (const GraphPicture::Node &n : p->nodes) {
    if (n.kind == GraphPicture::NodeKind::Op && n.node >= 1 && n.node <= 3) {
      EXPECT_EQ(n.level, 1);
    }
  }
  // The input %x feeds the first group's rms_norm (weights are not nodes).
  size_t inputs = 0;
  for (const GraphPicture::Node &n : p->nodes)
    inputs += n.kind == GraphPicture::NodeKind::Input;
  EXPECT_EQ(inputs, 1u);
}

TEST(GraphPicture, ALayerKeepsItsNodesAndShowsWhatComesFromOutside) {
  Expected<Graph> g = parseGraph(kGraph);
  ASSERT_TRUE(static_cast<bool>(g)) << toString(g.takeError());
  CompiledEntry entry = launchesOf();
  PictureOptions o;
  o.layer = 1;
  Expected<GraphPicture> p = buildGraphPicture(*g->lookup("decode"), &entry, {}, o);
  ASSERT_TRUE(static_cast<bool>(p)) << toString(p.takeError());
  EXPECT_EQ(p->clusters.size(), 1u);
  ASSERT_EQ(p->launches.size(), 1u);
  bool fromOutside = false;
  for (const GraphPicture::Node &n : p->nodes)
    fromOutside |= n.kind == GraphPicture::NodeKind::Input && n.label == "%blk.0.out";
  EXPECT_TRUE(fromOutside);
  o.layer = 5;
  Expected<GraphPicture> none = buildGraphPicture(*g->lookup("decode"), &entry, {}, o);
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_EQ(toString(none.takeError()),
            "entry 'decode' has no node of layer 5 (no value named blk.5.*)");
}

TEST(GraphPicture, RenderingsCarryGroupsRefusalsAndTheLaunchDag) {
  Expected<Graph> g = parseGraph(kGraph);
  ASSERT_TRUE(static_cast<bool>(g)) << toString(g.takeError());
  CompiledEntry entry = launchesOf();
  std::vector<PictureRefusal> refusals = {{"add_chain", "%blk.0.qk", "a <reason> & \"more\""}};
  PictureOptions o;
  o.title = "t";
  Expected<GraphPicture> p = buildGraphPicture(*g->lookup("decode"), &entry, refusals, o);
  ASSERT_TRUE(static_cast<bool>(p)) << toString(p.takeError());
  std::string html = renderPictureHtml(*p);
  auto count = [](const std::string &s, const std::string &what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(html, "class=\"fg-group\""), 2u);
  EXPECT_EQ(count(html, "class=\"fg-launch\""), 7u);
  EXPECT_EQ(count(html, "class=\"fg-node fg-refused\""), 1u);
  // The reason is escaped, not markup.
  EXPECT_NE(html.find("refused add_chain: a &lt;reason&gt; &amp; &quot;more&quot;"),
            std::string::npos);
  EXPECT_NE(html.find("data-fg-ready"), std::string::npos);
  std::string svg = renderPictureSvg(*p);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(count(svg, "class=\"fg-group\""), 2u);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  std::string dot = renderPictureDot(*p);
  EXPECT_EQ(count(dot, "subgraph cluster_"), 3u); // two groups and the launch DAG
  EXPECT_NE(dot.find("a <reason> & \\\"more\\\""), std::string::npos);
}

} // namespace
