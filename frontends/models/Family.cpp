//===- Family.cpp - the family table, lookups and the shared decoder options -===//
#include "frontends/models/Family.h"

#include "frontends/gguf/GgufFile.h"

#include "llvm/ADT/STLExtras.h"

namespace fg {

#define FG_FAMILY(record) extern const ModelFamily record;
#include "frontends/models/families/Families.def"

namespace {

const ModelFamily *const kFamilies[] = {
#define FG_FAMILY(record) &record,
#include "frontends/models/families/Families.def"
};

std::string joinFirst(llvm::ArrayRef<llvm::StringRef> ModelFamily::*names) {
  std::string out;
  for (const ModelFamily *f : kFamilies) {
    llvm::ArrayRef<llvm::StringRef> n = f->*names;
    if (n.empty())
      continue;
    out += (out.empty() ? "" : ", ") + n.front().str();
  }
  return out;
}

} // namespace

llvm::ArrayRef<const ModelFamily *> modelFamilies() { return kFamilies; }

const ModelFamily *familyForGgufArch(llvm::StringRef arch) {
  for (const ModelFamily *f : kFamilies)
    if (llvm::is_contained(f->ggufArchs, arch))
      return f;
  return nullptr;
}

const ModelFamily *familyForHfModelType(llvm::StringRef modelType) {
  for (const ModelFamily *f : kFamilies)
    if (llvm::is_contained(f->hfModelTypes, modelType))
      return f;
  return nullptr;
}

std::string supportedGgufArchs() { return joinFirst(&ModelFamily::ggufArchs); }
std::string supportedHfModelTypes() { return joinFirst(&ModelFamily::hfModelTypes); }

// --- GgufKeys -----------------------------------------------------------------------

llvm::Expected<int64_t> GgufKeys::i(llvm::StringRef k) const { return f.getInt(key(k)); }

llvm::Expected<int64_t> GgufKeys::i(llvm::StringRef k, int64_t dflt) const {
  auto v = f.optInt(key(k));
  if (!v)
    return v.takeError();
  return v->value_or(dflt);
}

llvm::Expected<double> GgufKeys::d(llvm::StringRef k, double dflt) const {
  auto v = f.optFloat(key(k));
  if (!v)
    return v.takeError();
  return v->value_or(dflt);
}

// --- the decoder ----------------------------------------------------------------------

llvm::Expected<DecoderConfig> decoderConfigFor(const ModelHParams &hp, int64_t ctx, DType kvDType) {
  assert(hp.family && "the readers set the family");
  DecoderConfig c;
  c.nLayers = hp.nLayers;
  c.nEmbd = hp.nEmbd;
  c.nHeads = hp.nHeads;
  c.nKvHeads = hp.nKvHeads;
  c.headDim = hp.headDim;
  c.vocab = hp.vocab;
  c.nFf = hp.nFf;
  // GGUF stores these as f32 and the kernels use them in f32: round the
  // config.json doubles the same way, so both formats give the same graph.
  c.normEps = static_cast<float>(hp.normEps);
  c.rope.theta = static_cast<float>(hp.ropeTheta);
  c.rope.freqScale = 1 / static_cast<double>(static_cast<float>(hp.ropeLinearFactor));
  c.rope.mode = RopeMode::Neox;
  c.tieEmbeddings = hp.tieEmbeddings;
  c.ctx = ctx;
  c.kvDType = kvDType;
  // Matrices take the file's dtype (weightDTypeOf, set by the loader); this
  // marks them as "not f32 by rule".
  c.weightDType = DType::F16;
  c.glu = GluKind::SwiGLU;
  if (hp.family->decoderOptions)
    hp.family->decoderOptions(hp, c);
  if (auto e = validateDecoderConfig(c))
    return e;
  return c;
}

} // namespace fg
