//===- GraphPicture.h - a picture of what the compiler did --------*- C++ -*-===//
//
// `fusegraph inspect MODEL --graph out.html|.svg|.dot`: one entry of a plan
// (or one decoder layer of it) drawn as a graph. Each fused node is a box (a
// cluster) holding the unfused ops of its decomposition, so the picture shows
// what was fused; each refused candidate's root is marked, its reason on
// hover; and the entry's launch DAG is drawn beside it, one row per level, so
// launches that run in parallel (Q, K, V; the shared expert beside the routed
// ones) sit side by side. Nothing here needs a GPU or a network: the layout is
// a small layered one done here, the HTML is self-contained (inline SVG, a
// few lines of inline script for the hover panel), the DOT is for graphviz.
//
// The picture takes the plan's data, not the passes': refusals come as plain
// records (the CLI converts the plan's fusion report), launches as the
// program's CompiledEntry.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "runtime/Program.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace fg {

/// A fusion candidate that was declined: at `root` (`%name` of its root
/// value), pattern `pattern`, because `reason`.
struct PictureRefusal {
  std::string pattern, root, reason;
};

struct PictureOptions {
  /// Only the nodes of decoder layer N (values named `blk.N.*`, the canonical
  /// tensor names every frontend uses); none: the whole entry.
  std::optional<int64_t> layer;
  std::string title; ///< the heading ("demo.plan, entry decode")
};

/// A box placed by layoutBoxes: size in, position out. `preds` are indices of
/// earlier boxes (the list is in topological order).
struct LayoutBox {
  double w = 0, h = 0;
  std::vector<int> preds;
  double x = 0, y = 0;
};

/// The layered layout every part of the picture uses: each box goes below
/// the lowest of its predecessors, at the free horizontal place nearest the
/// mean of their centres; no two boxes overlap (gaps `hgap`, `vgap`); the
/// result starts at (0, 0).
void layoutBoxes(std::vector<LayoutBox> &boxes, double hgap = 16, double vgap = 28);

/// The laid-out picture (pixel coordinates).
struct GraphPicture {
  enum class NodeKind { Op, Step, Input };
  struct Node {
    NodeKind kind = NodeKind::Op;
    std::string label;   ///< op mnemonic, or the input's name
    std::string detail;  ///< "%blk.0.q = f32[1, 4, 64]"
    std::string tip;     ///< hover text
    int cluster = -1;    ///< the fused group it belongs to (steps)
    NodeId node = kNoNode; ///< the graph node (steps: their fused node)
    std::string refusal; ///< non-empty: refused candidates rooted here, with reasons
    int level = -1;      ///< its first launch's level in the launch DAG
    double x = 0, y = 0, w = 0, h = 0;
  };
  struct Cluster {
    std::string label; ///< the fused op's mnemonic
    std::string tip;
    NodeId node = kNoNode;
    int level = -1;
    double x = 0, y = 0, w = 0, h = 0;
  };
  struct Edge {
    int from = 0, to = 0;
  };
  struct Launch {
    std::string label; ///< "rope", "matmul [cublas]", "input check"
    std::string tip;
    int level = 0;
    NodeId node = kNoNode;
    std::vector<int> deps; ///< indices into launches
    double x = 0, y = 0, w = 0, h = 0;
  };

  std::string title;
  std::vector<Node> nodes;
  std::vector<Cluster> clusters;
  std::vector<Edge> edges;
  std::vector<Launch> launches;
  int levels = 0;         ///< launch DAG levels
  int parallelLevels = 0; ///< levels with two or more launches
  int widestLevel = 0;    ///< most launches on one level
  double width = 0, height = 0;           ///< the graph panel
  double launchWidth = 0, launchHeight = 0; ///< the launch DAG panel
};

/// Lays out `fn` (the plan's final function of an entry). `entry` is its
/// compiled launches (null: no launch DAG). Errors: a layer with no node.
llvm::Expected<GraphPicture> buildGraphPicture(const Function &fn, const CompiledEntry *entry,
                                               llvm::ArrayRef<PictureRefusal> refusals,
                                               const PictureOptions &opts);

/// A standalone SVG document of both panels.
std::string renderPictureSvg(const GraphPicture &p);
/// A self-contained HTML page: heading, legend, both panels as inline SVG,
/// a hover panel; its inline script marks the page ready by setting
/// `data-fg-ready` on <body> to the number of fused groups it found.
std::string renderPictureHtml(const GraphPicture &p);
/// Graphviz DOT: fused groups as `subgraph cluster_N`, refusals as red
/// nodes with a tooltip, launch levels in the labels.
std::string renderPictureDot(const GraphPicture &p);

} // namespace fg
