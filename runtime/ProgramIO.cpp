#include "runtime/ProgramIO.h"

#include "ir/Checked.h"
#include "ir/Diag.h"
#include "runtime/WeightLoad.h"

#include <cstring>

namespace fg {
namespace {

class Writer {
public:
  std::string out;
  template <typename T> void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out.append(reinterpret_cast<const char *>(&v), sizeof v);
  }
  void u64(uint64_t v) { pod(v); }
  void str(llvm::StringRef s) {
    u64(s.size());
    out.append(s.data(), s.size());
  }
  void bytes(const std::vector<uint8_t> &b) {
    u64(b.size());
    out.append(reinterpret_cast<const char *>(b.data()), b.size());
  }
  void type(const TensorType &t) {
    pod(static_cast<uint8_t>(t.dtype));
    u64(t.shape.size());
    for (int64_t d : t.shape)
      pod(d);
  }
  void ref(const BufferRef &r) {
    pod(static_cast<uint8_t>(r.space));
    pod(r.index);
    pod(r.offset);
  }
  void init(const WeightInit &w) {
    pod(static_cast<uint8_t>(w.kind));
    pod(w.seed);
    pod(w.mean);
    pod(w.std);
    pod(w.min);
    pod(w.max);
    pod(w.value);
    str(w.file);
    str(w.name);
  }
};

class Reader {
public:
  explicit Reader(llvm::StringRef b) : data_(b) {}
  bool failed() const { return failed_; }
  void fail() { failed_ = true; }
  size_t pos() const { return pos_; }

  template <typename T> T pod() {
    T v{};
    if (!need(sizeof v))
      return v;
    std::memcpy(&v, data_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  uint64_t u64() { return pod<uint64_t>(); }
  /// A count of items of at least `minItemBytes` each: refuses counts the
  /// remaining bytes cannot hold (no huge allocations from corrupt input).
  uint64_t count(size_t minItemBytes) {
    uint64_t n = u64();
    if (failed_ || n > (data_.size() - pos_) / std::max<size_t>(minItemBytes, 1)) {
      failed_ = true;
      return 0;
    }
    return n;
  }
  std::string str() {
    uint64_t n = count(1);
    if (!need(n))
      return {};
    std::string s(data_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  std::vector<uint8_t> bytes() { return take(count(1)); }
  /// The next `n` bytes (empty and failed when fewer remain).
  std::vector<uint8_t> take(uint64_t n) {
    if (!need(n))
      return {};
    std::vector<uint8_t> b(data_.bytes_begin() + pos_, data_.bytes_begin() + pos_ + n);
    pos_ += n;
    return b;
  }
  TensorType type() {
    TensorType t;
    auto dt = pod<uint8_t>();
    if (dt >= kNumDTypes)
      failed_ = true;
    t.dtype = static_cast<DType>(dt);
    uint64_t rank = count(8);
    for (uint64_t i = 0; i < rank && !failed_; ++i) {
      int64_t d = pod<int64_t>();
      if (d < 0)
        failed_ = true;
      t.shape.push_back(d);
    }
    return t;
  }
  BufferRef ref() {
    BufferRef r;
    auto s = pod<uint8_t>();
    if (s > static_cast<uint8_t>(BufferSpace::Staging))
      failed_ = true;
    r.space = static_cast<BufferSpace>(s);
    r.index = pod<uint32_t>();
    r.offset = pod<uint64_t>();
    return r;
  }
  WeightInit init() {
    WeightInit w;
    auto k = pod<uint8_t>();
    if (k > static_cast<uint8_t>(WeightInit::Kind::Tensor))
      failed_ = true;
    w.kind = static_cast<WeightInit::Kind>(k);
    w.seed = pod<uint64_t>();
    w.mean = pod<double>();
    w.std = pod<double>();
    w.min = pod<double>();
    w.max = pod<double>();
    w.value = pod<double>();
    w.file = str();
    w.name = str();
    return w;
  }

private:
  bool need(uint64_t n) {
    if (failed_ || n > data_.size() - pos_) {
      failed_ = true;
      return false;
    }
    return true;
  }
  llvm::StringRef data_;
  size_t pos_ = 0;
  bool failed_ = false;
};

constexpr uint32_t kProgramTagV1 = 0x46475052; // "FGPR": slots without a file source
constexpr uint32_t kProgramTagV2 = 0x46475053; // "FGPS": launches without node ids and op kinds
constexpr uint32_t kProgramTagV3 = 0x46475054; // "FGPT": transformed weights embedded as bytes
constexpr uint32_t kProgramTagV4 = 0x46475055; // "FGPU": attention counters cleared by a kernel
constexpr uint32_t kProgramTagV5 =
    0x46475056; // "FGPV": inputs without value ranges (no input check)
constexpr uint32_t kProgramTagV6 = 0x46475057; // "FGPW": GEMMs without the Lt form (read)
constexpr uint32_t kProgramTagV7 =
    0x46475058; // "FGPX": every GEMM waits for the previous one (read)
// "FGPY": GEMMs in parallel branches run at once, in workspace slots
// (runtime/WorkspaceSlots.h). The layout is FGPX's; the new tag keeps a
// runtime from before the slots (one workspace) from running such a plan.
constexpr uint32_t kProgramTagV8 = 0x46475059; // "FGPY": launches without actQuant (read: exact)
constexpr uint32_t kProgramTagV9 = 0x4647505A; // "FGPZ": the input check reads the arena (read)
// "FGQA": the input check copies its inputs from the runner's pinned staging
// (BufferSpace::Staging arguments). The layout is FGPZ's (each launch ends
// with its ActQuant, a byte); the new tag keeps a runtime without the staging
// space from refusing such a plan as corrupt. An FGPZ plan runs as it did:
// its inputs are copied on the stream.
constexpr uint32_t kProgramTagV10 = 0x46475141; // "FGQA": weights in any placement (read)
// "FGQB": a GEMM may read two weight slots as one matrix (fused.gated_gemm's
// stacked GEMM), which holds only where the runner places the weights one
// after another (runtime/Program.h, weightOffsets). The layout is FGQA's;
// the new tag keeps a runtime that allocates each weight apart from running
// such a plan past the end of a weight. An FGQA plan runs as it did.
constexpr uint32_t kProgramTagV11 = 0x46475142; // "FGQB" (read)
// "FGQC": a GEMM record ends with a strided batch (count, then A, B and C
// strides in elements): k and v of a prefill chunk as one launch
// (codegen/cuda/GemmPairs.cpp). An FGQB plan's GEMMs read as single ones.
constexpr uint32_t kProgramTag = 0x46475143;
/// The largest cuBLAS workspace a plan may ask for (per slot): a larger one
/// is a corrupt file, not a plan (the compiler asks for 32 MiB).
constexpr uint64_t kMaxWorkspaceBytes = 1ull << 30;
constexpr uint32_t kWeightsTagV1 = 0x46475754; // "FGWT": transformed weights embedded as bytes
constexpr uint32_t kWeightsTag = 0x46475755;   // "FGWU"

/// The slot table: first the model files its recipes read (path, size at
/// compile time), then per slot its name, type, initialiser, embedded byte
/// count and recipe (sources as file index, offset, type, tensor name; steps
/// as op, heads, dtype, scalar).
void writeSlots(Writer &w, const std::vector<TensorSlot> &slots) {
  std::vector<std::pair<std::string, uint64_t>> files;
  auto fileIndex = [&](const RecipeSource &src) {
    for (size_t i = 0; i < files.size(); ++i)
      if (files[i].first == src.file && files[i].second == src.fileSize)
        return static_cast<uint32_t>(i);
    files.push_back({src.file, src.fileSize});
    return static_cast<uint32_t>(files.size() - 1);
  };
  for (const TensorSlot &s : slots)
    for (const RecipeSource &src : s.recipe.sources)
      fileIndex(src);
  w.u64(files.size());
  for (const auto &[path, size] : files) {
    w.str(path);
    w.u64(size);
  }
  w.u64(slots.size());
  for (const TensorSlot &s : slots) {
    w.str(s.name);
    w.type(s.type);
    w.init(s.init);
    w.u64(s.bytes.size());
    w.u64(s.recipe.sources.size());
    for (const RecipeSource &src : s.recipe.sources) {
      w.pod(fileIndex(src));
      w.u64(src.offset);
      w.type(src.type);
      w.str(src.tensor);
    }
    w.u64(s.recipe.steps.size());
    for (const RecipeStep &st : s.recipe.steps) {
      w.pod(static_cast<uint8_t>(st.op));
      w.pod(st.heads);
      w.pod(static_cast<uint8_t>(st.dtype));
      w.pod(st.scalar);
    }
  }
}

/// Reads what writeSlots wrote; `sizes` gets each slot's embedded byte count.
/// Each slot is checked as if the checksum were forged (checkSlot); the
/// first bad one is described in `bad`.
void readSlots(Reader &r, std::vector<TensorSlot> &slots, std::vector<uint64_t> &sizes,
               std::string &bad) {
  std::vector<std::pair<std::string, uint64_t>> files;
  uint64_t nFiles = r.count(16);
  for (uint64_t i = 0; i < nFiles && !r.failed(); ++i) {
    std::string path = r.str();
    uint64_t size = r.u64();
    files.push_back({std::move(path), size});
  }
  uint64_t n = r.count(16);
  for (uint64_t i = 0; i < n && !r.failed(); ++i) {
    TensorSlot s;
    s.name = r.str();
    s.type = r.type();
    s.init = r.init();
    sizes.push_back(r.u64());
    auto note = [&](const std::string &why) {
      if (bad.empty())
        bad = "slot '" + s.name + "': " + why;
    };
    uint64_t nSources = r.count(29);
    for (uint64_t k = 0; k < nSources && !r.failed(); ++k) {
      RecipeSource src;
      uint32_t file = r.pod<uint32_t>();
      src.offset = r.u64();
      src.type = r.type();
      src.tensor = r.str();
      if (file >= files.size()) {
        note("a recipe source names file " + std::to_string(file) + " of " +
             std::to_string(files.size()));
      } else {
        src.file = files[file].first;
        src.fileSize = files[file].second;
      }
      s.recipe.sources.push_back(std::move(src));
    }
    uint64_t nSteps = r.count(18);
    for (uint64_t k = 0; k < nSteps && !r.failed(); ++k) {
      RecipeStep st;
      auto op = r.pod<uint8_t>();
      st.heads = r.pod<int64_t>();
      auto dt = r.pod<uint8_t>();
      st.scalar = r.pod<double>();
      if (op >= kNumRecipeOps)
        note("unknown recipe step " + std::to_string(op));
      if (dt >= kNumDTypes)
        note("a recipe step names unknown dtype " + std::to_string(dt));
      st.op = static_cast<RecipeOp>(op < kNumRecipeOps ? op : 0);
      st.dtype = static_cast<DType>(dt >= kNumDTypes ? 0 : dt);
      s.recipe.steps.push_back(st);
    }
    if (!r.failed() && bad.empty())
      if (llvm::Error e = checkSlot(s))
        bad = "slot " + llvm::toString(std::move(e));
    slots.push_back(std::move(s));
  }
}

/// Appends the embedded bytes of `slots` (the bulk part).
void writeBulk(Writer &w, const std::vector<TensorSlot> &slots) {
  for (const TensorSlot &s : slots)
    w.out.append(reinterpret_cast<const char *>(s.bytes.data()), s.bytes.size());
}

/// Reads the embedded bytes of `slots` (sizes from readSlots); a message on error.
const char *readBulk(Reader &r, std::vector<TensorSlot> &slots,
                     const std::vector<uint64_t> &sizes) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!sizes[i])
      continue;
    std::optional<int64_t> want = checkedBytes(slots[i].type.dtype, slots[i].type.shape);
    if (!want || sizes[i] != static_cast<uint64_t>(*want))
      return "embedded weight size";
    slots[i].bytes = r.take(sizes[i]);
    if (r.failed())
      return "truncated weights";
  }
  return nullptr;
}

/// Why `r` cannot be resolved by the runner for entry `e` of `p` (a table
/// index out of range; a staging reference outside a kernel's arguments),
/// or null.
const char *badRef(const BufferRef &r, const CompiledProgram &p, const CompiledEntry &e,
                   bool stagingAllowed) {
  switch (r.space) {
  case BufferSpace::Weight:
    return r.index < p.weights.size() ? nullptr : "reference to a missing weight";
  case BufferSpace::State:
    return r.index < p.state.size() ? nullptr : "reference to a missing state buffer";
  case BufferSpace::Staging:
    if (!stagingAllowed)
      return "input staging outside a kernel's arguments";
    return r.index < e.inputs.size() ? nullptr : "staging of a missing input";
  default:
    return nullptr;
  }
}

/// Why GEMM `g` of entry `e` would reach outside its buffers, or null: its
/// sizes must fit cuBLAS's int arguments with leading dimensions that hold
/// a column, and A, B, C (and D) — every batch member, `batch` strides on —
/// must end inside the arena (arenaBytes), the weight allocation (from the
/// slot's placed offset to the end: a stacked GEMM reads on into the next
/// slot) or their state slot. A corrupt file, not a read past the end on the
/// device.
const char *badGemmExtent(const GemmDesc &g, const CompiledProgram &p, const CompiledEntry &e,
                          const std::vector<uint64_t> &weightAt, uint64_t weightTotal) {
  constexpr int64_t kInt = 0x7fffffff;
  auto inInt = [](int64_t v) { return v >= 1 && v <= kInt; };
  if (!inInt(g.m) || !inInt(g.n) || !inInt(g.k) || !inInt(g.lda) || !inInt(g.ldb) ||
      !inInt(g.ldc) || (g.lt && !inInt(g.ldd)))
    return "bad gemm size";
  struct Operand {
    const BufferRef *ref;
    DType type;
    GemmExtent x;
    int64_t stride;
  };
  std::vector<Operand> ops = {{&g.a, g.aType, extentA(g), g.strideA},
                              {&g.b, g.bType, extentB(g), g.strideB},
                              {&g.c, g.cType, extentC(g), g.strideC}};
  if (g.lt)
    ops.push_back({&g.d, g.cType, GemmExtent{g.m, g.n, g.ldd}, 0}); // D is m×n, ldd
  for (const Operand &o : ops) {
    if (o.x.ld < o.x.rows)
      return "gemm leading dimension below its rows";
    // (cols − 1)·ld + rows elements, then the batch; every factor < 2^31,
    // strides < 2^40 (checked), so the element count stays below 2^63; it
    // is compared in elements, never multiplied out to bytes.
    if (o.stride > (int64_t(1) << 40))
      return "bad gemm batch";
    const uint64_t one = o.x.elems();
    const uint64_t elems =
        one + static_cast<uint64_t>(g.batch - 1) * static_cast<uint64_t>(o.stride);
    const uint64_t elemBytes = static_cast<uint64_t>(storageBytes(o.type, 1));
    // The batch members' results may not share bytes (they are written side
    // by side: a race, and a different answer each run).
    if (o.ref == &g.c && g.batch > 1 && static_cast<uint64_t>(o.stride) < one)
      return "bad gemm batch";
    uint64_t room = 0;
    switch (o.ref->space) {
    case BufferSpace::Arena:
      room = e.arenaBytes;
      break;
    case BufferSpace::Weight:
      room = weightTotal - weightAt[o.ref->index];
      break;
    case BufferSpace::State:
      room = static_cast<uint64_t>(p.state[o.ref->index].type.bytes());
      break;
    default:
      return "gemm operand outside the arena, weights and state";
    }
    if (o.ref->offset > room || elems > (room - o.ref->offset) / elemBytes)
      return "gemm reaches past its buffer";
  }
  return nullptr;
}

} // namespace

EncodedProgram encodeProgram(const CompiledProgram &p) {
  Writer w;
  w.pod(kProgramTag);
  w.str(p.arch);
  w.pod(p.ctx);
  w.pod(p.initModule);
  w.u64(p.workspaceBytes);
  w.u64(p.counterBytes);
  w.u64(p.modules.size());
  for (const KernelImage &m : p.modules) {
    w.str(m.name);
    w.bytes(m.cubin);
    w.str(m.ptx);
  }
  writeSlots(w, p.weights);
  writeSlots(w, p.state);
  w.u64(p.entries.size());
  for (const CompiledEntry &e : p.entries) {
    w.str(e.name);
    w.u64(e.arenaBytes);
    w.u64(e.peakLiveBytes);
    for (const auto *list : {&e.inputs, &e.outputs}) {
      w.u64(list->size());
      for (const IoBinding &b : *list) {
        w.str(b.name);
        w.type(b.type);
        w.ref(b.where);
        w.pod(static_cast<uint8_t>(b.bind.kind));
        w.pod(b.bind.lo);
        w.pod(b.bind.hi);
      }
    }
    w.u64(e.launches.size());
    for (const LaunchRecord &l : e.launches) {
      w.pod(static_cast<uint8_t>(l.kind));
      w.pod(l.module);
      w.str(l.symbol);
      for (int i = 0; i < 3; ++i)
        w.pod(l.grid[i]);
      for (int i = 0; i < 3; ++i)
        w.pod(l.block[i]);
      w.pod(l.sharedBytes);
      w.u64(l.args.size());
      for (const BufferRef &r : l.args)
        w.ref(r);
      const GemmDesc &g = l.gemm;
      w.pod(static_cast<uint8_t>(g.transA));
      w.pod(static_cast<uint8_t>(g.transB));
      w.pod(g.m);
      w.pod(g.n);
      w.pod(g.k);
      w.pod(static_cast<uint8_t>(g.aType));
      w.pod(static_cast<uint8_t>(g.bType));
      w.pod(static_cast<uint8_t>(g.cType));
      w.pod(g.lda);
      w.pod(g.ldb);
      w.pod(g.ldc);
      w.ref(g.a);
      w.ref(g.b);
      w.ref(g.c);
      w.pod(g.alpha);
      w.pod(g.beta);
      w.pod(static_cast<uint8_t>(g.lt));
      w.pod(g.ldd);
      w.ref(g.d);
      w.pod(g.batch);
      w.pod(g.strideA);
      w.pod(g.strideB);
      w.pod(g.strideC);
      w.u64(l.deps.size());
      for (uint32_t d : l.deps)
        w.pod(d);
      w.pod(l.node);
      w.pod(static_cast<uint16_t>(l.op));
      w.str(l.what);
      w.pod(static_cast<uint8_t>(l.actQuant));
    }
  }
  EncodedProgram out;
  out.bulkOffset = w.out.size();
  writeBulk(w, p.weights);
  out.bytes = std::move(w.out);
  return out;
}

EncodedProgram encodeWeightTable(const std::vector<TensorSlot> &weights) {
  Writer w;
  w.pod(kWeightsTag);
  writeSlots(w, weights);
  EncodedProgram out;
  out.bulkOffset = w.out.size();
  writeBulk(w, weights);
  out.bytes = std::move(w.out);
  return out;
}

llvm::Expected<std::vector<TensorSlot>> decodeWeightTable(llvm::StringRef bytes) {
  Reader r(bytes);
  auto corrupt = [&](const char *what) {
    return makeError(llvm::Twine("plan section 'weights' is corrupt (") + what + " at byte " +
                     llvm::Twine(r.pos()) + ")");
  };
  uint32_t tag = r.pod<uint32_t>();
  if (tag == kWeightsTagV1)
    return makeError("this plan's weight table was written by an older fusegraph (transformed "
                     "weights embedded as bytes, not recipes); recompile the model");
  if (tag != kWeightsTag || r.failed())
    return corrupt("bad tag");
  std::vector<TensorSlot> slots;
  std::vector<uint64_t> sizes;
  std::string bad;
  readSlots(r, slots, sizes, bad);
  if (r.failed())
    return corrupt("truncated");
  if (!bad.empty())
    return corrupt(bad.c_str());
  if (const char *what = readBulk(r, slots, sizes))
    return corrupt(what);
  return slots;
}

llvm::Expected<CompiledProgram> decodeProgram(llvm::StringRef bytes) {
  Reader r(bytes);
  CompiledProgram p;
  auto corrupt = [&](const char *what) {
    return makeError(llvm::Twine("plan section 'program' is corrupt (") + what + " at byte " +
                     llvm::Twine(r.pos()) + ")");
  };
  uint32_t tag = r.pod<uint32_t>();
  if (tag == kProgramTagV1 || tag == kProgramTagV2 || tag == kProgramTagV3 ||
      tag == kProgramTagV4 || tag == kProgramTagV5)
    return makeError("this plan's CUDA program was written by an older fusegraph (" +
                     llvm::Twine(tag == kProgramTagV1 ? "weight table without model-file references"
                                 : tag == kProgramTagV2 ? "launches without node ids"
                                 : tag == kProgramTagV3 ? "transformed weights embedded as bytes, "
                                                          "not recipes"
                                 : tag == kProgramTagV4 ? "attention counters cleared by a kernel"
                                                        : "inputs without value ranges") +
                     "); recompile the model");
  // A V6 plan differs only in its GEMM records, which lack the Lt fields
  // (lt, ldd, d): it is read as plain cublasGemmEx calls. A V7 plan is read
  // as it is: its GEMMs are chained, so they all take workspace slot 0.
  // A V8 plan's launches lack their ActQuant: read as exact (the reference
  // then compares with the exact product, as before).
  const bool hasBatch = tag == kProgramTag;
  const bool hasActQuant =
      hasBatch || tag == kProgramTagV11 || tag == kProgramTagV10 || tag == kProgramTagV9;
  const bool hasLt = hasActQuant || tag == kProgramTagV8 || tag == kProgramTagV7;
  if ((tag != kProgramTag && tag != kProgramTagV11 && tag != kProgramTagV10 && tag != kProgramTagV9 &&
       tag != kProgramTagV8 && tag != kProgramTagV7 && tag != kProgramTagV6) ||
      r.failed())
    return corrupt("bad tag");
  p.arch = r.str();
  p.ctx = r.pod<int64_t>();
  p.initModule = r.pod<int32_t>();
  p.workspaceBytes = r.u64();
  // Each workspace slot starts workspaceBytes after the previous one, and
  // cublasSetWorkspace takes only 256-byte aligned workspaces.
  if (p.workspaceBytes > kMaxWorkspaceBytes || p.workspaceBytes % 256 != 0)
    return corrupt("workspace size");
  p.counterBytes = r.u64();
  uint64_t nModules = r.count(24);
  for (uint64_t i = 0; i < nModules && !r.failed(); ++i) {
    KernelImage m;
    m.name = r.str();
    m.cubin = r.bytes();
    m.ptx = r.str();
    p.modules.push_back(std::move(m));
  }
  if (p.initModule < -1 || p.initModule >= static_cast<int64_t>(nModules))
    return corrupt("bad init module");
  std::vector<uint64_t> weightBytes;
  std::string bad;
  readSlots(r, p.weights, weightBytes, bad);
  std::vector<uint64_t> ignored;
  readSlots(r, p.state, ignored, bad);
  if (!r.failed() && !bad.empty())
    return corrupt(bad.c_str());
  // Where the runner places each weight (one allocation): GEMM extents are
  // checked against it.
  uint64_t weightTotal = 0;
  {
    // The placed total may not wrap (each slot is checked, their sum not).
    uint64_t sum = 0;
    for (const TensorSlot &w : p.weights) {
      const uint64_t b = static_cast<uint64_t>(w.type.bytes());
      const uint64_t placed = (b + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
      if (placed < b || sum + placed < sum || sum + placed > (uint64_t(1) << 52))
        return corrupt("weights larger than any device");
      sum += placed;
    }
  }
  const std::vector<uint64_t> weightAt = weightOffsets(p.weights, &weightTotal);
  uint64_t nEntries = r.count(16);
  for (uint64_t i = 0; i < nEntries && !r.failed(); ++i) {
    CompiledEntry e;
    e.name = r.str();
    e.arenaBytes = r.u64();
    e.peakLiveBytes = r.u64();
    for (auto *list : {&e.inputs, &e.outputs}) {
      uint64_t n = r.count(16);
      for (uint64_t k = 0; k < n && !r.failed(); ++k) {
        IoBinding b;
        b.name = r.str();
        b.type = r.type();
        b.where = r.ref();
        auto kind = r.pod<uint8_t>();
        b.bind.lo = r.pod<int64_t>();
        b.bind.hi = r.pod<int64_t>();
        if (!r.failed() && !checkedBytes(b.type.dtype, b.type.shape))
          return corrupt("binding size overflows");
        if (!r.failed() &&
            (kind > static_cast<uint8_t>(BindKind::Positions) || b.bind.lo > b.bind.hi))
          return corrupt("bad input binding");
        b.bind.kind = static_cast<BindKind>(kind);
        list->push_back(std::move(b));
      }
    }
    uint64_t nLaunches = r.count(64);
    for (uint64_t k = 0; k < nLaunches && !r.failed(); ++k) {
      LaunchRecord l;
      auto kind = r.pod<uint8_t>();
      if (kind > static_cast<uint8_t>(LaunchRecord::Kind::Gemm))
        return corrupt("bad launch kind");
      l.kind = static_cast<LaunchRecord::Kind>(kind);
      l.module = r.pod<uint32_t>();
      l.symbol = r.str();
      for (int d = 0; d < 3; ++d)
        l.grid[d] = r.pod<uint32_t>();
      for (int d = 0; d < 3; ++d)
        l.block[d] = r.pod<uint32_t>();
      l.sharedBytes = r.pod<uint32_t>();
      uint64_t nArgs = r.count(13);
      for (uint64_t a = 0; a < nArgs && !r.failed(); ++a)
        l.args.push_back(r.ref());
      GemmDesc &g = l.gemm;
      g.transA = r.pod<uint8_t>() != 0;
      g.transB = r.pod<uint8_t>() != 0;
      g.m = r.pod<int64_t>();
      g.n = r.pod<int64_t>();
      g.k = r.pod<int64_t>();
      for (DType *t : {&g.aType, &g.bType, &g.cType}) {
        auto v = r.pod<uint8_t>();
        if (v > static_cast<uint8_t>(DType::BF16))
          return corrupt("bad gemm dtype");
        *t = static_cast<DType>(v);
      }
      g.lda = r.pod<int64_t>();
      g.ldb = r.pod<int64_t>();
      g.ldc = r.pod<int64_t>();
      g.a = r.ref();
      g.b = r.ref();
      g.c = r.ref();
      g.alpha = r.pod<float>();
      g.beta = r.pod<float>();
      if (hasLt) {
        auto lt = r.pod<uint8_t>();
        if (lt > 1)
          return corrupt("bad gemm form");
        g.lt = lt != 0;
        g.ldd = r.pod<int64_t>();
        g.d = r.ref();
      }
      if (hasBatch) {
        g.batch = r.pod<int32_t>();
        g.strideA = r.pod<int64_t>();
        g.strideB = r.pod<int64_t>();
        g.strideC = r.pod<int64_t>();
        // Two GEMMs at most (a sibling pair), of the plain form, forward.
        if (g.batch < 1 || g.batch > 2 || (g.batch > 1 && g.lt) || g.strideA < 0 ||
            g.strideB < 0 || g.strideC < 0)
          return corrupt("bad gemm batch");
      }
      uint64_t nDeps = r.count(4);
      for (uint64_t d = 0; d < nDeps && !r.failed(); ++d) {
        uint32_t dep = r.pod<uint32_t>();
        if (dep >= k)
          return corrupt("dependency on a later launch");
        l.deps.push_back(dep);
      }
      l.node = r.pod<uint32_t>();
      auto op = r.pod<uint16_t>();
      if (op >= allOps().size())
        return corrupt("bad op kind");
      l.op = static_cast<OpKind>(op);
      l.what = r.str();
      if (hasActQuant) {
        auto act = r.pod<uint8_t>();
        if (act > static_cast<uint8_t>(ActQuant::Int8NormDeferred))
          return corrupt("bad activation quantisation");
        l.actQuant = static_cast<ActQuant>(act);
      }
      if (l.kind == LaunchRecord::Kind::Kernel && l.module >= nModules)
        return corrupt("launch names a missing module");
      // The runner indexes its tables with these: a bad index is a corrupt
      // file, not an access out of bounds at load.
      for (const BufferRef &a : l.args)
        if (const char *bad = badRef(a, p, e, /*staging=*/l.kind == LaunchRecord::Kind::Kernel))
          return corrupt(bad);
      if (l.kind == LaunchRecord::Kind::Gemm) {
        for (const BufferRef *g : {&l.gemm.a, &l.gemm.b, &l.gemm.c, &l.gemm.d})
          if (const char *bad = badRef(*g, p, e, /*staging=*/false))
            return corrupt(bad);
        if (const char *bad = badGemmExtent(l.gemm, p, e, weightAt, weightTotal))
          return corrupt(bad);
      }
      e.launches.push_back(std::move(l));
    }
    for (const auto *list : {&e.inputs, &e.outputs})
      for (const IoBinding &b : *list)
        if (const char *bad = badRef(b.where, p, e, /*staging=*/false))
          return corrupt(bad);
    p.entries.push_back(std::move(e));
  }
  if (r.failed())
    return corrupt("truncated");
  // Embedded weight bytes follow, in table order.
  if (const char *what = readBulk(r, p.weights, weightBytes))
    return corrupt(what);
  return p;
}

} // namespace fg
