//===- GraphPicture.cpp - layout and rendering of a plan's graph ----------===//
#include "runtime/GraphPicture.h"

#include "ir/Decomposition.h"
#include "ir/Diag.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <map>

namespace fg {

// --- layout -------------------------------------------------------------------------------

void layoutBoxes(std::vector<LayoutBox> &boxes, double hgap, double vgap) {
  for (size_t i = 0; i < boxes.size(); ++i) {
    LayoutBox &b = boxes[i];
    double y = 0, centre = 0;
    for (int p : b.preds) {
      assert(p >= 0 && static_cast<size_t>(p) < i && "boxes must be in topological order");
      y = std::max(y, boxes[p].y + boxes[p].h + vgap);
      centre += boxes[p].x + boxes[p].w / 2;
    }
    bool source = b.preds.empty();
    double want = source ? 0 : centre / static_cast<double>(b.preds.size()) - b.w / 2;
    // Left coordinates that would overlap a placed box on the same rows.
    std::vector<std::pair<double, double>> blocked;
    for (size_t j = 0; j < i; ++j) {
      const LayoutBox &o = boxes[j];
      if (o.y >= y + b.h + vgap / 2 || o.y + o.h + vgap / 2 <= y)
        continue;
      blocked.push_back({o.x - b.w - hgap, o.x + o.w + hgap});
    }
    auto free = [&](double x) {
      return llvm::none_of(blocked, [&](const auto &r) { return x > r.first && x < r.second; });
    };
    // The nearest free place: `want` itself or the edge of a blocked range
    // (sources only look right, so they line up in order).
    double best = want;
    if (!free(want)) {
      double bestDist = 1e300;
      for (const auto &r : blocked)
        for (double x : {r.first, r.second}) {
          if (source && x < want)
            continue;
          double d = std::abs(x - want);
          if (d < bestDist && free(x)) {
            best = x;
            bestDist = d;
          }
        }
    }
    b.x = best;
    b.y = y;
  }
  double minX = 0;
  for (const LayoutBox &b : boxes)
    minX = std::min(minX, b.x);
  for (LayoutBox &b : boxes)
    b.x -= minX;
}

namespace {

constexpr double kCharW = 6.8, kNodeH = 36, kPad = 10, kLabelH = 20, kLaunchH = 24;

double textWidth(llvm::StringRef s) {
  // UTF-8 continuation bytes take no room of their own.
  size_t chars = llvm::count_if(s, [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
  return static_cast<double>(chars) * kCharW;
}

std::string shorten(llvm::StringRef s, size_t max) {
  return s.size() <= max ? s.str() : s.take_front(max - 3).str() + "...";
}

bool namedInLayer(llvm::StringRef name, llvm::StringRef prefix) { return name.startswith(prefix); }

/// Node `n` belongs to layer N when a result is named `blk.N.*`, or, for the
/// state updates the frontends name after the cache (`k_cache.N.1`), when it
/// updates a state argument with a value of layer N.
bool inLayer(const Function &fn, const fg::Node &n, int64_t layer) {
  std::string prefix = "blk." + std::to_string(layer) + ".";
  if (llvm::any_of(n.results, [&](ValueId r) { return namedInLayer(fn.value(r).name, prefix); }))
    return true;
  if (llvm::any_of(n.results, [&](ValueId r) { return namedInLayer(fn.value(r).name, "blk."); }))
    return false;
  bool updatesState = llvm::any_of(n.operands, [&](ValueId v) {
    const Argument *a = fn.argumentOf(v);
    return a && a->role == ArgRole::State;
  });
  return updatesState && llvm::any_of(n.operands, [&](ValueId v) {
           return namedInLayer(fn.value(v).name, prefix);
         });
}

std::string valueName(const Function &fn, ValueId v) {
  const Value &val = fn.value(v);
  return val.name.empty() ? "%" + std::to_string(v) : "%" + val.name;
}

/// "%a = rope(%x, %pos) : f32[1, 4, 64]"
std::string nodeText(const Function &fn, const fg::Node &n) {
  std::vector<std::string> results, operands;
  for (ValueId r : n.results)
    results.push_back(valueName(fn, r));
  for (ValueId o : n.operands)
    operands.push_back(valueName(fn, o));
  std::string types;
  for (ValueId r : n.results)
    types += (types.empty() ? "" : ", ") + fn.type(r).str();
  return llvm::join(results, ", ") + " = " + std::string(mnemonic(n.kind)) + "(" +
         llvm::join(operands, ", ") + ") : " + types;
}

class Builder {
public:
  Builder(const Function &fn, const CompiledEntry *entry, const PictureOptions &opts)
      : fn_(fn), entry_(entry), opts_(opts) {}

  llvm::Expected<GraphPicture> build(llvm::ArrayRef<PictureRefusal> refusals) {
    pic_.title = opts_.title;
    selectNodes();
    if (shown_.empty())
      return makeError(opts_.layer ? "entry '" + fn_.name() + "' has no node of layer " +
                                         std::to_string(*opts_.layer) + " (no value named blk." +
                                         std::to_string(*opts_.layer) + ".*)"
                                   : "entry '" + fn_.name() + "' has no node");
    launchLevels();
    addInputs();
    for (NodeId n : shown_)
      if (llvm::Error e = addNode(n))
        return e;
    markRefusals(refusals);
    layout();
    layoutLaunches();
    return std::move(pic_);
  }

private:
  /// One item of the outer layout: an input, a plain node or a fused group.
  struct Item {
    int node = -1;    ///< picture node (input or plain op)
    int cluster = -1; ///< or a cluster
    std::vector<int> steps; ///< the cluster's picture nodes
    std::vector<int> preds; ///< items
  };

  void selectNodes() {
    for (NodeId n = 0; n < fn_.numNodes(); ++n)
      if (!opts_.layer || inLayer(fn_, fn_.node(n), *opts_.layer))
        shown_.push_back(n);
    isShown_.assign(fn_.numNodes(), false);
    for (NodeId n : shown_)
      isShown_[n] = true;
  }

  void launchLevels() {
    nodeLevel_.assign(fn_.numNodes(), -1);
    if (!entry_)
      return;
    std::vector<int> level(entry_->launches.size(), 0);
    for (size_t i = 0; i < entry_->launches.size(); ++i) {
      const LaunchRecord &l = entry_->launches[i];
      for (uint32_t d : l.deps)
        if (d < i)
          level[i] = std::max(level[i], level[d] + 1);
      if (l.node < fn_.numNodes() && nodeLevel_[l.node] < 0)
        nodeLevel_[l.node] = level[i];
    }
    launchLevel_ = std::move(level);
  }

  /// Operands produced outside the picture (not weights): small input boxes.
  void addInputs() {
    for (NodeId n : shown_)
      for (ValueId v : fn_.node(n).operands) {
        const Value &val = fn_.value(v);
        if (!val.isArgument() && isShown_[val.def])
          continue;
        const Argument *a = fn_.argumentOf(v);
        if (a && a->role == ArgRole::Weight)
          continue;
        if (source_.count(v))
          continue;
        GraphPicture::Node in;
        in.kind = GraphPicture::NodeKind::Input;
        in.label = valueName(fn_, v);
        in.detail = fn_.type(v).str();
        in.tip = valueName(fn_, v) + " : " + fn_.type(v).str() +
                 (a ? a->role == ArgRole::State ? " (state)" : " (input)" : " (from outside this picture)");
        in.w = std::max(textWidth(in.label), textWidth(in.detail)) + 2 * kPad;
        in.h = kNodeH;
        source_[v] = newNode(std::move(in));
        Item item;
        item.node = source_[v];
        itemOfNode_[item.node] = static_cast<int>(items_.size());
        items_.push_back(item);
      }
  }

  int newNode(GraphPicture::Node n) {
    pic_.nodes.push_back(std::move(n));
    return static_cast<int>(pic_.nodes.size()) - 1;
  }

  /// The weights a node reads, for its hover text.
  std::string weightsOf(const fg::Node &n) {
    std::vector<std::string> names;
    for (ValueId v : n.operands)
      if (const Argument *a = fn_.argumentOf(v); a && a->role == ArgRole::Weight)
        names.push_back(valueName(fn_, v) + " : " + fn_.type(v).str());
    return names.empty() ? "" : "\nweights: " + llvm::join(names, ", ");
  }

  std::string launchText(NodeId n) {
    if (!entry_)
      return "";
    std::vector<std::string> parts;
    for (size_t i = 0; i < entry_->launches.size(); ++i) {
      const LaunchRecord &l = entry_->launches[i];
      if (l.node != n)
        continue;
      parts.push_back("#" + std::to_string(i) + " " +
                      (l.kind == LaunchRecord::Kind::Gemm ? std::string("cuBLAS") : l.symbol) +
                      " (level " + std::to_string(launchLevel_[i]) + ")");
    }
    return parts.empty() ? "\nno launch (a view of its operand)" : "\nlaunches: " + llvm::join(parts, "; ");
  }

  /// Adds an edge from whatever produces `v` in the picture to node `to`.
  void edgeFrom(ValueId v, int to, std::vector<int> &preds) {
    auto it = source_.find(v);
    if (it == source_.end())
      return; // a weight
    pic_.edges.push_back({it->second, to});
    int item = itemOfNode_.lookup(it->second);
    if (!llvm::is_contained(preds, item))
      preds.push_back(item);
  }

  llvm::Error addNode(NodeId id) {
    const fg::Node &n = fn_.node(id);
    Item item;
    int itemIndex = static_cast<int>(items_.size());
    std::string text = nodeText(fn_, n);
    if (!n.info().has(kFused)) {
      GraphPicture::Node p;
      p.kind = GraphPicture::NodeKind::Op;
      p.label = std::string(mnemonic(n.kind));
      p.detail = shorten(valueName(fn_, n.result()) + " : " + fn_.type(n.result()).str(), 44);
      p.tip = text + weightsOf(n) + launchText(id);
      p.node = id;
      p.level = nodeLevel_[id];
      p.w = std::max(textWidth(p.label) + 28, textWidth(p.detail)) + 2 * kPad;
      p.h = kNodeH;
      item.node = newNode(std::move(p));
      itemOfNode_[item.node] = itemIndex;
      for (ValueId v : n.operands)
        edgeFrom(v, item.node, item.preds);
      for (ValueId r : n.results)
        source_[r] = item.node;
      items_.push_back(std::move(item));
      return llvm::Error::success();
    }
    // A fused node: a cluster of its decomposition's steps.
    GraphPicture::Cluster c;
    c.label = std::string(mnemonic(n.kind));
    c.node = id;
    c.level = nodeLevel_[id];
    c.tip = text + weightsOf(n) + launchText(id);
    item.cluster = static_cast<int>(pic_.clusters.size());
    pic_.clusters.push_back(c);
    size_t nOperands = n.operands.size();
    std::vector<int> stepOfHandle(nOperands, -1);
    llvm::SmallVector<TensorType, 6> types;
    for (ValueId v : n.operands)
      types.push_back(fn_.type(v));
    auto step = [&](OpKind kind, llvm::ArrayRef<unsigned> ops, llvm::ArrayRef<Attribute>,
                    llvm::ArrayRef<TensorType> res) -> llvm::Error {
      GraphPicture::Node s;
      s.kind = GraphPicture::NodeKind::Step;
      s.label = std::string(mnemonic(kind));
      s.detail = res.empty() ? "" : res.front().str();
      s.cluster = item.cluster;
      s.node = id;
      s.tip = s.label + " : " + s.detail + "\npart of " + c.label + " (" +
              valueName(fn_, n.result()) + ")";
      s.w = std::max(textWidth(s.label), textWidth(s.detail)) + 2 * kPad;
      s.h = kNodeH;
      int sid = newNode(std::move(s));
      itemOfNode_[sid] = itemIndex;
      item.steps.push_back(sid);
      for (unsigned h : ops) {
        if (h < nOperands) {
          edgeFrom(n.operands[h], sid, item.preds);
        } else if (stepOfHandle[h] >= 0 &&
                   !llvm::any_of(pic_.edges, [&](const GraphPicture::Edge &e) {
                     return e.from == stepOfHandle[h] && e.to == sid;
                   })) {
          pic_.edges.push_back({stepOfHandle[h], sid});
        }
      }
      for (size_t r = 0; r < res.size(); ++r)
        stepOfHandle.push_back(sid);
      return llvm::Error::success();
    };
    llvm::SmallVector<unsigned, 2> handles;
    if (llvm::Error e = walkDecomposition(n.kind, types, n.attrs, step, handles))
      return e;
    for (size_t r = 0; r < n.results.size() && r < handles.size(); ++r) {
      unsigned h = handles[r];
      if (h >= nOperands)
        source_[n.results[r]] = stepOfHandle[h];
      else if (auto it = source_.find(n.operands[h]); it != source_.end())
        source_[n.results[r]] = it->second; // passes an operand through
    }
    // Edges into a step from another step of the same group are inner ones;
    // the item's preds are other items only.
    llvm::erase_value(item.preds, itemIndex);
    items_.push_back(std::move(item));
    return llvm::Error::success();
  }

  void markRefusals(llvm::ArrayRef<PictureRefusal> refusals) {
    for (const PictureRefusal &r : refusals) {
      llvm::StringRef root = r.root;
      ValueId v = fn_.lookup(root.startswith("%") ? root.drop_front() : root);
      if (v == kNoValue)
        continue;
      auto it = source_.find(v);
      if (it == source_.end() || pic_.nodes[it->second].kind == GraphPicture::NodeKind::Input)
        continue;
      GraphPicture::Node &p = pic_.nodes[it->second];
      std::string line = "refused " + r.pattern + ": " + r.reason;
      if (llvm::StringRef(p.refusal).contains(line))
        continue;
      p.refusal += (p.refusal.empty() ? "" : "\n") + line;
      p.tip += "\n" + line;
    }
  }

  void layout() {
    std::vector<LayoutBox> outer(items_.size());
    for (size_t i = 0; i < items_.size(); ++i) {
      Item &it = items_[i];
      outer[i].preds = it.preds;
      llvm::sort(outer[i].preds);
      if (it.node >= 0) {
        outer[i].w = pic_.nodes[it.node].w;
        outer[i].h = pic_.nodes[it.node].h;
        continue;
      }
      // Inner layout of the group's steps.
      std::vector<LayoutBox> inner(it.steps.size());
      llvm::DenseMap<int, int> local;
      for (size_t s = 0; s < it.steps.size(); ++s) {
        local[it.steps[s]] = static_cast<int>(s);
        inner[s].w = pic_.nodes[it.steps[s]].w;
        inner[s].h = pic_.nodes[it.steps[s]].h;
      }
      for (const GraphPicture::Edge &e : pic_.edges)
        if (local.count(e.to) && local.count(e.from))
          inner[local[e.to]].preds.push_back(local[e.from]);
      layoutBoxes(inner, 12, 18);
      double w = textWidth(pic_.clusters[it.cluster].label) + 40, h = 0;
      for (size_t s = 0; s < inner.size(); ++s) {
        GraphPicture::Node &p = pic_.nodes[it.steps[s]];
        p.x = inner[s].x + kPad;
        p.y = inner[s].y + kLabelH + kPad / 2;
        w = std::max(w, p.x + p.w + kPad);
        h = std::max(h, p.y + p.h + kPad);
      }
      outer[i].w = w;
      outer[i].h = h;
    }
    layoutBoxes(outer, 20, 30);
    for (size_t i = 0; i < items_.size(); ++i) {
      Item &it = items_[i];
      if (it.node >= 0) {
        pic_.nodes[it.node].x = outer[i].x;
        pic_.nodes[it.node].y = outer[i].y;
        continue;
      }
      GraphPicture::Cluster &c = pic_.clusters[it.cluster];
      c.x = outer[i].x;
      c.y = outer[i].y;
      c.w = outer[i].w;
      c.h = outer[i].h;
      for (int s : it.steps) {
        pic_.nodes[s].x += c.x;
        pic_.nodes[s].y += c.y;
      }
    }
    for (const LayoutBox &b : outer) {
      pic_.width = std::max(pic_.width, b.x + b.w);
      pic_.height = std::max(pic_.height, b.y + b.h);
    }
  }

  /// The launch DAG of the shown nodes (the input check with the whole
  /// entry), one row per level.
  void layoutLaunches() {
    if (!entry_)
      return;
    std::vector<int> index(entry_->launches.size(), -1);
    std::vector<LayoutBox> boxes;
    for (size_t i = 0; i < entry_->launches.size(); ++i) {
      const LaunchRecord &l = entry_->launches[i];
      bool shown = l.node < fn_.numNodes() ? isShown_[l.node] : !opts_.layer.has_value();
      if (!shown)
        continue;
      GraphPicture::Launch p;
      bool gemm = l.kind == LaunchRecord::Kind::Gemm;
      p.node = l.node;
      p.label = l.node >= fn_.numNodes() ? std::string("input check")
                                         : std::string(mnemonic(l.op)) + (gemm ? " [cublas]" : "");
      p.level = launchLevel_[i];
      p.tip = "#" + std::to_string(i) + " " + (gemm ? std::string("cuBLAS GEMM") : l.symbol) +
              "\n" + l.what + "\nlevel " + std::to_string(p.level);
      LayoutBox b;
      for (uint32_t d : l.deps)
        if (d < i && index[d] >= 0) {
          p.deps.push_back(index[d]);
          b.preds.push_back(index[d]);
        }
      b.w = std::max(textWidth(p.label) + 2 * kPad, 90.0);
      b.h = kLaunchH;
      index[i] = static_cast<int>(boxes.size());
      boxes.push_back(b);
      pic_.launches.push_back(std::move(p));
    }
    layoutBoxes(boxes, 12, 16);
    std::map<int, int> perLevel;
    for (size_t i = 0; i < boxes.size(); ++i) {
      GraphPicture::Launch &p = pic_.launches[i];
      p.x = boxes[i].x;
      p.y = boxes[i].y;
      p.w = boxes[i].w;
      p.h = boxes[i].h;
      pic_.launchWidth = std::max(pic_.launchWidth, p.x + p.w);
      pic_.launchHeight = std::max(pic_.launchHeight, p.y + p.h);
      ++perLevel[p.level];
    }
    pic_.levels = static_cast<int>(perLevel.size());
    for (auto &[level, count] : perLevel) {
      pic_.parallelLevels += count > 1;
      pic_.widestLevel = std::max(pic_.widestLevel, count);
    }
  }

  const Function &fn_;
  const CompiledEntry *entry_;
  const PictureOptions &opts_;
  GraphPicture pic_;
  std::vector<NodeId> shown_;
  std::vector<bool> isShown_;
  std::vector<int> nodeLevel_, launchLevel_;
  std::vector<Item> items_;
  llvm::DenseMap<ValueId, int> source_;  ///< value -> picture node producing it
  llvm::DenseMap<int, int> itemOfNode_;  ///< picture node -> item
};

// --- rendering ------------------------------------------------------------------------------

std::string xml(llvm::StringRef s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\n': out += "&#10;"; break;
    default: out += c;
    }
  }
  return out;
}

std::string num(double v) { return llvm::formatv("{0:f1}", v).str(); }

constexpr double kMargin = 20, kTop = 30;

void svgNode(std::string &o, const GraphPicture::Node &n, double dx, double dy) {
  bool refused = !n.refusal.empty();
  std::string cls = "fg-node";
  if (n.kind == GraphPicture::NodeKind::Input)
    cls += " fg-input";
  if (n.kind == GraphPicture::NodeKind::Step)
    cls += " fg-step";
  if (refused)
    cls += " fg-refused";
  o += "<g class=\"" + cls + "\" data-tip=\"" + xml(n.tip) + "\"";
  if (n.node != kNoNode)
    o += " data-node=\"" + std::to_string(n.node) + "\"";
  o += "><title>" + xml(n.tip) + "</title>";
  double x = n.x + dx, y = n.y + dy;
  o += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(n.w) + "\" height=\"" +
       num(n.h) + "\" rx=\"" + (n.kind == GraphPicture::NodeKind::Input ? "14" : "4") + "\"/>";
  o += "<text class=\"fg-label\" x=\"" + num(x + kPad) + "\" y=\"" + num(y + 15) + "\">" +
       xml(n.label) + "</text>";
  o += "<text class=\"fg-detail\" x=\"" + num(x + kPad) + "\" y=\"" + num(y + 29) + "\">" +
       xml(n.detail) + "</text>";
  if (n.level >= 0 && n.kind == GraphPicture::NodeKind::Op)
    o += "<text class=\"fg-level\" x=\"" + num(x + n.w - 4) + "\" y=\"" + num(y + 13) + "\">L" +
         std::to_string(n.level) + "</text>";
  if (refused)
    o += "<text class=\"fg-mark\" x=\"" + num(x + n.w - 4) + "\" y=\"" + num(y + n.h - 5) +
         "\">refused</text>";
  o += "</g>\n";
}

void svgEdge(std::string &o, double x1, double y1, double x2, double y2, llvm::StringRef cls) {
  double dy = std::max(12.0, (y2 - y1) / 2);
  o += "<path class=\"" + cls.str() + "\" d=\"M" + num(x1) + "," + num(y1) + " C" + num(x1) +
       "," + num(y1 + dy) + " " + num(x2) + "," + num(y2 - dy) + " " + num(x2) + "," + num(y2) +
       "\" marker-end=\"url(#fg-arrow)\"/>\n";
}

/// The graph panel's elements, offset by (dx, dy).
std::string svgGraph(const GraphPicture &p, double dx, double dy) {
  std::string o;
  o += "<text class=\"fg-panel\" x=\"" + num(dx) + "\" y=\"" + num(dy - 10) +
       "\">graph (boxes: fused groups; Ln: launch level)</text>\n";
  for (size_t c = 0; c < p.clusters.size(); ++c) {
    const GraphPicture::Cluster &cl = p.clusters[c];
    o += "<g class=\"fg-group\" id=\"fg-group-" + std::to_string(c) + "\" data-op=\"" +
         xml(cl.label) + "\" data-node=\"" + std::to_string(cl.node) + "\" data-tip=\"" +
         xml(cl.tip) + "\"><title>" + xml(cl.tip) + "</title>";
    o += "<rect x=\"" + num(cl.x + dx) + "\" y=\"" + num(cl.y + dy) + "\" width=\"" + num(cl.w) +
         "\" height=\"" + num(cl.h) + "\" rx=\"8\"/>";
    o += "<text class=\"fg-glabel\" x=\"" + num(cl.x + dx + kPad) + "\" y=\"" +
         num(cl.y + dy + 15) + "\">" + xml(cl.label) + "</text>";
    if (cl.level >= 0)
      o += "<text class=\"fg-level\" x=\"" + num(cl.x + dx + cl.w - 6) + "\" y=\"" +
           num(cl.y + dy + 15) + "\">L" + std::to_string(cl.level) + "</text>";
    o += "</g>\n";
  }
  for (const GraphPicture::Edge &e : p.edges) {
    const GraphPicture::Node &a = p.nodes[e.from], &b = p.nodes[e.to];
    svgEdge(o, a.x + a.w / 2 + dx, a.y + a.h + dy, b.x + b.w / 2 + dx, b.y + dy, "fg-edge");
  }
  for (const GraphPicture::Node &n : p.nodes)
    svgNode(o, n, dx, dy);
  return o;
}

/// The launch DAG panel's elements, offset by (dx, dy).
std::string svgLaunches(const GraphPicture &p, double dx, double dy) {
  std::string o;
  if (p.launches.empty())
    return o;
  o += "<text class=\"fg-panel\" x=\"" + num(dx) + "\" y=\"" + num(dy - 10) +
       "\">launch DAG (side by side: parallel)</text>\n";
  for (const GraphPicture::Launch &l : p.launches)
    for (int d : l.deps) {
      const GraphPicture::Launch &a = p.launches[d];
      svgEdge(o, a.x + a.w / 2 + dx, a.y + a.h + dy, l.x + l.w / 2 + dx, l.y + dy, "fg-ledge");
    }
  for (const GraphPicture::Launch &l : p.launches) {
    o += "<g class=\"fg-launch\" data-tip=\"" + xml(l.tip) + "\"";
    if (l.node != kNoNode)
      o += " data-node=\"" + std::to_string(l.node) + "\"";
    o += "><title>" + xml(l.tip) + "</title><rect x=\"" + num(l.x + dx) + "\" y=\"" +
         num(l.y + dy) + "\" width=\"" + num(l.w) + "\" height=\"" + num(l.h) +
         "\" rx=\"4\"/><text class=\"fg-label\" x=\"" + num(l.x + dx + kPad) + "\" y=\"" +
         num(l.y + dy + 16) + "\">" + xml(l.label) + "</text></g>\n";
  }
  return o;
}

const char *kStyle = R"css(
svg text { font-family: "DejaVu Sans Mono", monospace; font-size: 11px; }
.fg-panel { font-size: 13px; font-weight: bold; fill: #333; }
.fg-node rect { fill: #fff; stroke: #888; stroke-width: 1; }
.fg-step rect { fill: #f7fbff; stroke: #4a7fc1; }
.fg-input rect { fill: #eee; stroke: #aaa; }
.fg-refused rect { stroke: #d32f2f; stroke-width: 2.5; stroke-dasharray: 5 2; }
.fg-mark { fill: #d32f2f; text-anchor: end; font-size: 9px; }
.fg-label { font-weight: bold; fill: #111; }
.fg-detail { fill: #555; font-size: 10px; }
.fg-level { fill: #7b1fa2; text-anchor: end; font-size: 10px; }
.fg-group rect { fill: #e3eefc; stroke: #1e5bb0; stroke-width: 1.5; }
.fg-glabel { font-weight: bold; fill: #1e5bb0; font-size: 12px; }
.fg-edge { fill: none; stroke: #999; stroke-width: 1; }
.fg-ledge { fill: none; stroke: #b39ddb; stroke-width: 1; }
.fg-launch rect { fill: #f3e5f5; stroke: #7b1fa2; }
.fg-hl rect { stroke: #ff9800 !important; stroke-width: 3 !important; }
)css";

std::string summaryText(const GraphPicture &p) {
  size_t steps = llvm::count_if(p.nodes, [](const GraphPicture::Node &n) {
    return n.kind == GraphPicture::NodeKind::Step;
  });
  size_t refused = llvm::count_if(p.nodes, [](const GraphPicture::Node &n) {
    return !n.refusal.empty();
  });
  std::string s = std::to_string(p.clusters.size()) + " fused groups (" + std::to_string(steps) +
                  " ops inside), refused candidates at " + std::to_string(refused) +
                  (refused == 1 ? " node" : " nodes");
  if (!p.launches.empty())
    s += "; " + std::to_string(p.launches.size()) + " launches on " + std::to_string(p.levels) +
         " levels, " + std::to_string(p.parallelLevels) +
         " of them with launches in parallel (widest " + std::to_string(p.widestLevel) + ")";
  return s;
}

std::string svgDocument(const GraphPicture &p, bool standalone) {
  double gx = kMargin, gy = kTop + kMargin;
  double lx = gx + p.width + 3 * kMargin, ly = gy;
  double w = (p.launches.empty() ? gx + p.width : lx + p.launchWidth) + kMargin;
  double h = std::max(p.height, p.launchHeight) + gy + kMargin;
  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"fg-graph\" width=\"" + num(w) +
       "\" height=\"" + num(h) + "\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\">\n";
  o += "<defs><marker id=\"fg-arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
       "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" "
       "fill=\"#999\"/></marker></defs>\n";
  if (standalone)
    o += "<style>" + std::string(kStyle) + "</style>\n<text class=\"fg-panel\" x=\"" +
         num(kMargin) + "\" y=\"18\">" + xml(p.title + " - " + summaryText(p)) + "</text>\n";
  o += svgGraph(p, gx, gy);
  o += svgLaunches(p, lx, ly);
  o += "</svg>\n";
  return o;
}

std::string dotId(llvm::StringRef prefix, size_t i) { return "\"" + prefix.str() + std::to_string(i) + "\""; }

std::string dotStr(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

} // namespace

llvm::Expected<GraphPicture> buildGraphPicture(const Function &fn, const CompiledEntry *entry,
                                               llvm::ArrayRef<PictureRefusal> refusals,
                                               const PictureOptions &opts) {
  return Builder(fn, entry, opts).build(refusals);
}

std::string renderPictureSvg(const GraphPicture &p) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svgDocument(p, /*standalone=*/true);
}

std::string renderPictureHtml(const GraphPicture &p) {
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
       xml(p.title) + "</title>\n<style>\nbody { font-family: sans-serif; margin: 16px; }\n"
       "#fg-tip { position: fixed; right: 12px; bottom: 12px; max-width: 46em; display: none;"
       " white-space: pre-wrap; font: 12px monospace; background: #fffde7; border: 1px solid #999;"
       " padding: 8px; }\n.fg-legend span { margin-right: 1.5em; }\n" +
       std::string(kStyle) + "</style></head>\n<body>\n";
  o += "<h1 style=\"font-size:18px\">" + xml(p.title) + "</h1>\n";
  o += "<p id=\"fg-summary\">" + xml(summaryText(p)) + "</p>\n";
  o += "<p class=\"fg-legend\"><span><b style=\"color:#1e5bb0\">blue box</b>: a fused group "
       "(one kernel) with the ops it absorbed</span><span><b style=\"color:#d32f2f\">red dashed"
       "</b>: a refused fusion candidate (hover for the reason)</span><span><b style=\"color:"
       "#7b1fa2\">Ln</b>: launch DAG level; launches on one level run in parallel</span></p>\n";
  o += svgDocument(p, /*standalone=*/false);
  o += "<div id=\"fg-tip\"></div>\n";
  o += R"js(<script>
(function () {
  var tip = document.getElementById('fg-tip');
  function mark(node, on) {
    if (node === null) return;
    document.querySelectorAll('[data-node="' + node + '"]').forEach(function (el) {
      el.classList.toggle('fg-hl', on);
    });
  }
  document.querySelectorAll('[data-tip]').forEach(function (el) {
    el.addEventListener('mouseenter', function (ev) {
      ev.stopPropagation();
      tip.textContent = el.getAttribute('data-tip');
      tip.style.display = 'block';
      mark(el.getAttribute('data-node'), true);
    });
    el.addEventListener('mouseleave', function () {
      tip.style.display = 'none';
      mark(el.getAttribute('data-node'), false);
    });
  });
  document.body.setAttribute('data-fg-ready',
                             String(document.querySelectorAll('.fg-group').length));
})();
</script>
</body></html>
)js";
  return o;
}

std::string renderPictureDot(const GraphPicture &p) {
  std::string o = "digraph fusegraph {\n  label=" + dotStr(p.title + "\n" + summaryText(p)) +
                  ";\n  labelloc=t;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  auto nodeLine = [&](size_t i, llvm::StringRef indent) {
    const GraphPicture::Node &n = p.nodes[i];
    std::string label = n.label + "\n" + n.detail;
    if (n.level >= 0 && n.kind == GraphPicture::NodeKind::Op)
      label += "\nL" + std::to_string(n.level);
    o += indent.str() + dotId("n", i) + " [label=" + dotStr(label) + ", tooltip=" + dotStr(n.tip);
    if (n.kind == GraphPicture::NodeKind::Input)
      o += ", style=\"rounded,filled\", fillcolor=\"#eeeeee\"";
    if (!n.refusal.empty())
      o += ", color=\"#d32f2f\", penwidth=2.5, style=dashed";
    o += "];\n";
  };
  for (size_t c = 0; c < p.clusters.size(); ++c) {
    const GraphPicture::Cluster &cl = p.clusters[c];
    o += "  subgraph cluster_" + std::to_string(c) + " {\n    label=" +
         dotStr(cl.label + (cl.level >= 0 ? " L" + std::to_string(cl.level) : "")) +
         ";\n    tooltip=" + dotStr(cl.tip) +
         ";\n    style=filled; fillcolor=\"#e3eefc\"; color=\"#1e5bb0\";\n";
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (p.nodes[i].cluster == static_cast<int>(c))
        nodeLine(i, "    ");
    o += "  }\n";
  }
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (p.nodes[i].cluster < 0)
      nodeLine(i, "  ");
  for (const GraphPicture::Edge &e : p.edges)
    o += "  " + dotId("n", e.from) + " -> " + dotId("n", e.to) + ";\n";
  if (!p.launches.empty()) {
    o += "  subgraph cluster_launches {\n    label=\"launch DAG (same level: parallel)\";\n"
         "    color=\"#7b1fa2\";\n";
    for (size_t i = 0; i < p.launches.size(); ++i)
      o += "    " + dotId("l", i) + " [label=" + dotStr(p.launches[i].label) + ", tooltip=" +
           dotStr(p.launches[i].tip) + ", style=filled, fillcolor=\"#f3e5f5\"];\n";
    for (size_t i = 0; i < p.launches.size(); ++i)
      for (int d : p.launches[i].deps)
        o += "    " + dotId("l", d) + " -> " + dotId("l", i) + ";\n";
    o += "  }\n";
  }
  return o + "}\n";
}

} // namespace fg
