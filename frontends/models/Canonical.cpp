//===- Canonical.cpp - one canonical weight layout for both formats -------===//
#include "frontends/models/Canonical.h"

#include "frontends/gguf/GgufFile.h"
#include "frontends/safetensors/Safetensors.h"
#include "ir/Diag.h"
#include "ir/Numeric.h"

#include <cstring>

namespace fg {

TensorSource::~TensorSource() = default;

namespace {

/// A tensor as stored in a file, or stacked from several (experts).
struct RawTensor {
  std::string file, tensor; ///< where it is, for messages
  DType dtype = DType::F32;
  Shape shape;
  std::vector<RecipeSource> sources; ///< one, or one per stacked tensor
  std::vector<std::shared_ptr<const llvm::MemoryBuffer>> mappings; ///< one per source
  bool stacked = false; ///< the sources are concatenated along a new first dim
};

enum class Transform { None, PermuteRows, AddOne };

/// `tensor` of `file` has `have` where canonical weight `name` needs `want`.
llvm::Error shapeMismatch(llvm::StringRef file, llvm::StringRef tensor,
                          llvm::ArrayRef<int64_t> have, llvm::StringRef name,
                          llvm::ArrayRef<int64_t> want) {
  return makeError(file, Loc{},
                   "tensor '" + tensor + "' has shape " + shapeStr(have) + " but " + name +
                       " needs " + shapeStr(want) +
                       " from the model's hyperparameters (config and weights disagree)");
}

/// Adds `name` to `out` as a recipe over `raw`'s sources (checking its
/// shape): concat when stacked, convert when the graph's dtype differs, then
/// `tf`. No byte is copied here; the recipe runs at load time.
llvm::Error addWeight(llvm::StringRef name, const TensorType &type, const RawTensor &raw,
                      Transform tf, int64_t headDim, ModelWeights &out) {
  if (raw.shape != type.shape)
    return shapeMismatch(raw.file, raw.tensor, raw.shape, name, type.shape);
  WeightRecipe r;
  r.sources = raw.sources;
  if (raw.stacked)
    r.steps.push_back(RecipeStep::concat());
  if (raw.dtype != type.dtype) {
    if (isQuantized(type.dtype) || !isFloat(type.dtype) || !isReal(raw.dtype))
      return makeError(raw.file, Loc{},
                       "tensor '" + raw.tensor + "' is " + std::string(dtypeName(raw.dtype)) +
                           " but " + name + " must be " + std::string(dtypeName(type.dtype)));
    r.steps.push_back(RecipeStep::convert(type.dtype));
  }
  switch (tf) {
  case Transform::None:
    break;
  case Transform::PermuteRows: {
    int64_t rows = type.shape[0];
    if (headDim < 2 || headDim % 2 || rows % headDim)
      return makeError(raw.file, Loc{},
                       "tensor '" + raw.tensor + "': " + llvm::Twine(rows) +
                           " rows cannot be permuted in heads of " + llvm::Twine(headDim) +
                           " (head_dim must be even and divide the rows)");
    r.steps.push_back(RecipeStep::permuteHeads(rows / headDim));
    break;
  }
  case Transform::AddOne:
    assert(type.dtype == DType::F32 && "norm weights are f32 in the graph");
    r.steps.push_back(RecipeStep::addScalar(1.0));
    break;
  }
  return out.addRecipe(name.str(), type, std::move(r), raw.mappings);
}

/// `raw` for one tensor of a file.
RawTensor rawTensor(std::string file, std::string tensor, DType dtype,
                    llvm::ArrayRef<int64_t> shape, uint64_t offset,
                    std::shared_ptr<const llvm::MemoryBuffer> mapping) {
  RawTensor raw;
  raw.file = file;
  raw.tensor = tensor;
  raw.dtype = dtype;
  raw.shape.assign(shape.begin(), shape.end());
  raw.sources.push_back({std::move(file), 0, offset, TensorType{dtype, shape}, std::move(tensor)});
  raw.mappings.push_back(std::move(mapping));
  return raw;
}

// --- GGUF: the canonical layout ---------------------------------------------------------

class GgufSource : public TensorSource {
public:
  GgufSource(const GgufFile &f) : f_(f) {}

  static std::string fileName(llvm::StringRef name) {
    return name.endswith(".bias") ? name.str() : name.str() + ".weight";
  }

  std::optional<DType> storedDType(llvm::StringRef name) const override {
    const GgufTensorInfo *t = f_.tensor(fileName(name));
    return t ? std::optional<DType>(t->dtype) : std::nullopt;
  }

  llvm::Error checkShape(llvm::StringRef name, llvm::ArrayRef<int64_t> shape) const override {
    std::string tn = fileName(name);
    const GgufTensorInfo *t = f_.tensor(tn);
    if (!t)
      return f_.error("missing tensor '" + tn + "'");
    if (llvm::ArrayRef<int64_t>(t->shape) != shape)
      return shapeMismatch(f_.path(), tn, t->shape, name, shape);
    return llvm::Error::success();
  }

  llvm::Error provide(llvm::StringRef name, const TensorType &type,
                      ModelWeights &out) const override {
    std::string tn = fileName(name);
    const GgufTensorInfo *t = f_.tensor(tn);
    if (!t)
      return f_.error("missing tensor '" + tn + "'");
    RawTensor raw = rawTensor(f_.path().str(), tn, t->dtype, t->shape, t->offset, f_.mapping());
    return addWeight(name, type, raw, Transform::None, 0, out);
  }

private:
  const GgufFile &f_;
};

// --- Hugging Face: every transformation -------------------------------------------------

/// The standard transformers name of a canonical per-layer weight (relative
/// to `model.layers.N.`), "" for none; "{}" stands for an expert's index.
/// Families depart from it through ModelFamily::hfLayerNames.
llvm::StringRef standardLayerName(llvm::StringRef canonical) {
  static constexpr HfTensorName kNames[] = {
      {"attn_norm", "input_layernorm.weight"},
      {"attn_q", "self_attn.q_proj.weight"},
      {"attn_k", "self_attn.k_proj.weight"},
      {"attn_v", "self_attn.v_proj.weight"},
      {"attn_output", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_q_norm", "self_attn.q_norm.weight"},
      {"attn_k_norm", "self_attn.k_norm.weight"},
      {"ffn_norm", "post_attention_layernorm.weight"},
      {"ffn_gate", "mlp.gate_proj.weight"},
      {"ffn_up", "mlp.up_proj.weight"},
      {"ffn_down", "mlp.down_proj.weight"},
      {"ffn_gate_inp", "mlp.gate.weight"},
      {"ffn_gate_exps", "mlp.experts.{}.gate_proj.weight"},
      {"ffn_up_exps", "mlp.experts.{}.up_proj.weight"},
      {"ffn_down_exps", "mlp.experts.{}.down_proj.weight"},
  };
  for (const HfTensorName &n : kNames)
    if (n.canonical == canonical)
      return n.hf;
  return "";
}

class HfSource : public TensorSource {
public:
  HfSource(const HfCheckpoint &ck, const ModelHParams &hp) : ck_(ck), hp_(hp) {
    for (llvm::StringRef p : {"model.", "model.language_model.", "language_model.model."})
      if (ck.tensor((p + "embed_tokens.weight").str())) {
        prefix_ = p.str();
        break;
      }
    lmHead_ = ck.tensor("language_model.lm_head.weight") ? "language_model.lm_head.weight"
                                                         : "lm_head.weight";
  }

  /// The HF tensor(s) behind a canonical name and what to do with them.
  struct Mapping {
    std::string hfName;    ///< one tensor, or the per-expert pattern with "{}"
    bool stacked = false;  ///< experts: hfName has "{}" for the expert index
    bool computed = false; ///< hfComputedWeight gives it
    Transform tf = Transform::None;
  };

  Mapping map(llvm::StringRef name) const {
    const ModelFamily &fam = *hp_.family;
    Mapping m;
    if (fam.hfComputedWeight && fam.hfComputedWeight(name, hp_)) {
      m.computed = true;
      return m;
    }
    // Every canonical norm's name ends in "norm" (attn_norm, attn_q_norm,
    // ffn_norm, post_ffw_norm, output_norm, ...).
    if (fam.hfNormPlusOne && name.endswith("norm"))
      m.tf = Transform::AddOne;
    if (name == "token_embd")
      m.hfName = prefix_ + "embed_tokens.weight";
    else if (name == "output")
      m.hfName = lmHead_;
    else if (name == "output_norm")
      m.hfName = prefix_ + "norm.weight";
    if (!m.hfName.empty() || !name.consume_front("blk."))
      return m;
    auto [layer, rest] = name.split('.');
    if (fam.hfPermuteQK && (rest == "attn_q" || rest == "attn_k"))
      m.tf = Transform::PermuteRows;
    llvm::StringRef hf = standardLayerName(rest);
    for (const HfTensorName &n : fam.hfLayerNames)
      if (n.canonical == rest)
        hf = n.hf;
    if (hf.empty())
      return m;
    m.hfName = prefix_ + "layers." + layer.str() + "." + hf.str();
    m.stacked = hf.contains("{}");
    return m;
  }

  std::optional<DType> storedDType(llvm::StringRef name) const override {
    Mapping m = map(name);
    if (m.computed)
      return DType::F32;
    std::string n = m.stacked ? expertName(m.hfName, 0) : m.hfName;
    const SafetensorsTensor *t = ck_.tensor(n);
    return t ? std::optional<DType>(t->dtype) : std::nullopt;
  }

  llvm::Error checkShape(llvm::StringRef name, llvm::ArrayRef<int64_t> shape) const override {
    Mapping m = map(name);
    if (m.computed || m.stacked)
      return llvm::Error::success();
    if (m.hfName.empty())
      return makeError(ck_.folder(), Loc{}, "no Hugging Face tensor for weight '" + name + "'");
    const SafetensorsTensor *t = ck_.tensor(m.hfName);
    if (!t)
      return makeError(ck_.folder(), Loc{}, "missing tensor '" + m.hfName + "' (for " + name + ")");
    if (llvm::ArrayRef<int64_t>(t->shape) != shape)
      return shapeMismatch(t->file, t->name, t->shape, name, shape);
    return llvm::Error::success();
  }

  llvm::Error provide(llvm::StringRef name, const TensorType &type,
                      ModelWeights &out) const override {
    Mapping m = map(name);
    if (m.computed) {
      HfComputedWeight computed = *hp_.family->hfComputedWeight(name, hp_);
      const std::vector<float> &f = computed.values;
      std::vector<uint8_t> bytes(f.size() * 4);
      if (!f.empty()) // memcpy from an empty vector's null data() is UB
        std::memcpy(bytes.data(), f.data(), bytes.size());
      if (static_cast<int64_t>(bytes.size()) != type.bytes())
        return ck_.config().error(name + ": " + llvm::Twine(f.size()) + " values computed but " +
                                  type.str() + " is needed");
      out.addEmbedded(name.str(), type, std::move(bytes), computed.note);
      return llvm::Error::success();
    }
    if (m.hfName.empty())
      return makeError(ck_.folder(), Loc{}, "no Hugging Face tensor for weight '" + name + "'");
    RawTensor raw;
    if (m.stacked) {
      if (auto e = stack(m.hfName, type, raw))
        return e;
    } else {
      const SafetensorsTensor *t = ck_.tensor(m.hfName);
      if (!t)
        return makeError(ck_.folder(), Loc{},
                         "missing tensor '" + m.hfName + "' (for " + name + ")");
      raw = rawTensor(t->file, t->name, t->dtype, t->shape, t->offset, t->mapping);
    }
    return addWeight(name, type, raw, m.tf, hp_.headDim, out);
  }

private:
  static std::string expertName(const std::string &pattern, int64_t e) {
    size_t at = pattern.find("{}");
    return pattern.substr(0, at) + std::to_string(e) + pattern.substr(at + 2);
  }

  /// Experts 0..E-1 as the sources of one [E, out, in] tensor (concat).
  llvm::Error stack(const std::string &pattern, const TensorType &type, RawTensor &raw) const {
    int64_t experts = type.shape[0];
    raw.file = ck_.folder().str();
    raw.tensor =
        pattern.substr(0, pattern.find("{}")) + "*" + pattern.substr(pattern.find("{}") + 2);
    for (int64_t e = 0; e < experts; ++e) {
      std::string n = expertName(pattern, e);
      const SafetensorsTensor *t = ck_.tensor(n);
      if (!t)
        return makeError(ck_.folder(), Loc{},
                         "missing tensor '" + n + "' (expert " + llvm::Twine(e) + " of " +
                             llvm::Twine(experts) + ")");
      Shape want(type.shape.begin() + 1, type.shape.end());
      if (t->shape != want)
        return makeError(t->file, Loc{},
                         "tensor '" + n + "' has shape " + shapeStr(t->shape) + " but " +
                             shapeStr(want) +
                             " is needed from the model's hyperparameters (config and weights "
                             "disagree)");
      if (e == 0)
        raw.dtype = t->dtype;
      else if (t->dtype != raw.dtype)
        return makeError(t->file, Loc{},
                         "tensor '" + n + "' is " + std::string(dtypeName(t->dtype)) +
                             " but expert 0 is " + std::string(dtypeName(raw.dtype)));
      raw.sources.push_back({t->file, 0, t->offset, TensorType{t->dtype, t->shape}, t->name});
      raw.mappings.push_back(t->mapping);
    }
    raw.shape = type.shape;
    raw.stacked = true;
    return llvm::Error::success();
  }

  const HfCheckpoint &ck_;
  ModelHParams hp_;
  std::string prefix_ = "model.";
  std::string lmHead_;
};

} // namespace

std::unique_ptr<TensorSource> makeGgufSource(const GgufFile &f, const ModelHParams &) {
  return std::make_unique<GgufSource>(f);
}

std::unique_ptr<TensorSource> makeHfSource(const HfCheckpoint &ck, const ModelHParams &hp) {
  return std::make_unique<HfSource>(ck, hp);
}

} // namespace fg
