//===- BadInputTest.cpp - broken GGUF files and HF folders -----------------===//
//
// Every test builds a small valid model by hand (no Python needed), breaks one
// thing, and checks the one error that names the file and the key or tensor.
// A last GGUF test cuts a valid file at every length: each prefix must fail
// cleanly, never read past the mapped end.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "frontends/Frontend.h"
#include "frontends/gguf/GgufFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

namespace fg {
namespace {

using test::Bytes;

// --- a tiny llama, described once for both formats ------------------------------------------

constexpr int64_t kEmbd = 32, kHeads = 2, kKv = 1, kHead = 16, kFf = 32, kVocab = 8;

struct TensorSpec {
  std::string gguf, hf;
  Shape shape;
};

std::vector<TensorSpec> tinyLlama() {
  std::vector<TensorSpec> t = {{"token_embd.weight", "model.embed_tokens.weight", {kVocab, kEmbd}},
                               {"output_norm.weight", "model.norm.weight", {kEmbd}},
                               {"output.weight", "lm_head.weight", {kVocab, kEmbd}}};
  std::string g = "blk.0.", h = "model.layers.0.";
  t.push_back({g + "attn_norm.weight", h + "input_layernorm.weight", {kEmbd}});
  t.push_back({g + "attn_q.weight", h + "self_attn.q_proj.weight", {kHeads * kHead, kEmbd}});
  t.push_back({g + "attn_k.weight", h + "self_attn.k_proj.weight", {kKv * kHead, kEmbd}});
  t.push_back({g + "attn_v.weight", h + "self_attn.v_proj.weight", {kKv * kHead, kEmbd}});
  t.push_back({g + "attn_output.weight", h + "self_attn.o_proj.weight", {kEmbd, kHeads * kHead}});
  t.push_back({g + "ffn_norm.weight", h + "post_attention_layernorm.weight", {kEmbd}});
  t.push_back({g + "ffn_gate.weight", h + "mlp.gate_proj.weight", {kFf, kEmbd}});
  t.push_back({g + "ffn_up.weight", h + "mlp.up_proj.weight", {kFf, kEmbd}});
  t.push_back({g + "ffn_down.weight", h + "mlp.down_proj.weight", {kEmbd, kFf}});
  return t;
}

int64_t elems(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

// --- GGUF -----------------------------------------------------------------------------------

/// What to write; each test edits one field.
struct GgufSpec {
  uint32_t magic = 0x46554747, version = 3;
  std::string arch = "llama";
  std::map<std::string, uint32_t> u32 = {{"block_count", 1},
                                         {"embedding_length", kEmbd},
                                         {"feed_forward_length", kFf},
                                         {"attention.head_count", kHeads},
                                         {"attention.head_count_kv", kKv}};
  std::map<std::string, uint64_t> u64; ///< keys written as u64 (after the u32 ones)
  std::vector<TensorSpec> tensors = tinyLlama();
  std::map<std::string, uint32_t> typeOverride;   ///< ggml type by gguf name
  std::map<std::string, uint64_t> offsetOverride; ///< relative offset by gguf name
  std::map<std::string, Shape> headerShape;       ///< the shape the header claims (data as spec'd)
};

std::vector<uint8_t> writeGguf(const GgufSpec &s) {
  Bytes b;
  b.put(s.magic).put(s.version);
  b.put<uint64_t>(s.tensors.size()).put<uint64_t>(s.u32.size() + s.u64.size() + 2);
  b.str("general.architecture").put<uint32_t>(8).str(s.arch);
  b.str("general.name").put<uint32_t>(8).str("tiny");
  for (auto &[k, v] : s.u32)
    b.str(s.arch + "." + k).put<uint32_t>(4).put(v);
  for (auto &[k, v] : s.u64)
    b.str(s.arch + "." + k).put<uint32_t>(10).put(v);
  uint64_t rel = 0;
  for (const TensorSpec &t : s.tensors) {
    auto hs = s.headerShape.find(t.gguf);
    const Shape &claimed = hs == s.headerShape.end() ? t.shape : hs->second;
    b.str(t.gguf).put<uint32_t>(static_cast<uint32_t>(claimed.size()));
    for (auto it = claimed.rbegin(); it != claimed.rend(); ++it)
      b.put<uint64_t>(static_cast<uint64_t>(*it));
    auto ty = s.typeOverride.find(t.gguf);
    b.put<uint32_t>(ty == s.typeOverride.end() ? 0 : ty->second);
    auto off = s.offsetOverride.find(t.gguf);
    b.put<uint64_t>(off == s.offsetOverride.end() ? rel : off->second);
    rel += (static_cast<uint64_t>(elems(t.shape)) * 4 + 31) / 32 * 32;
  }
  while (b.b.size() % 32)
    b.put<uint8_t>(0);
  for (const TensorSpec &t : s.tensors) {
    for (int64_t i = 0; i < elems(t.shape); ++i)
      b.put<float>(t.gguf.find("norm") != std::string::npos ? 1.0f : 0.01f * (i % 7));
    while (b.b.size() % 32)
      b.put<uint8_t>(0);
  }
  return b.b;
}

std::string loadError(const std::string &path) {
  ModelOptions o;
  o.ctx = 8;
  o.prefill = {4};
  auto m = loadModelWithWeights(path, o);
  if (m)
    return "";
  return llvm::toString(m.takeError());
}

std::string ggufError(const GgufSpec &s) {
  std::string path = test::tempPath(".gguf");
  test::writeFile(path, writeGguf(s));
  std::string e = loadError(path);
  EXPECT_EQ(e.rfind(path + ": error: ", 0), 0u) << "the error names the file: " << e;
  llvm::sys::fs::remove(path);
  return e.substr(std::min(e.size(), path.size() + 9));
}

TEST(GgufBadInput, ValidTinyModelLoads) {
  std::string path = test::tempPath(".gguf");
  test::writeFile(path, writeGguf(GgufSpec()));
  EXPECT_EQ(loadError(path), "");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(bool(f)) << llvm::toString(f.takeError());
  EXPECT_EQ((*f)->version(), 3u);
  const GgufTensorInfo *q = (*f)->tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, Shape({kHeads * kHead, kEmbd})) << "innermost-first dims are reversed";
  EXPECT_EQ(q->offset % 32, 0u);
  llvm::sys::fs::remove(path);
}

TEST(GgufBadInput, WrongMagic) {
  GgufSpec s;
  s.magic = 0x46554746;
  EXPECT_EQ(ggufError(s), "not a GGUF file: bad magic 0x46554746 (expected \"GGUF\")");
}

TEST(GgufBadInput, WrongVersion) {
  GgufSpec s;
  s.version = 1;
  EXPECT_EQ(ggufError(s), "unsupported GGUF version 1 (supported: 2 and 3)");
  s.version = 4;
  EXPECT_EQ(ggufError(s), "unsupported GGUF version 4 (supported: 2 and 3)");
  s.version = 2; // the same layout as 3
  std::string path = test::tempPath(".gguf");
  test::writeFile(path, writeGguf(s));
  EXPECT_EQ(loadError(path), "");
  llvm::sys::fs::remove(path);
}

TEST(GgufBadInput, TensorDataOutOfBounds) {
  GgufSpec s;
  s.offsetOverride["output.weight"] = 1 << 20;
  EXPECT_EQ(ggufError(s).rfind("tensor 'output.weight': data [", 0), 0u) << ggufError(s);
  EXPECT_NE(ggufError(s).find("lies past the end of the"), std::string::npos);
}

TEST(GgufBadInput, MisalignedOffset) {
  GgufSpec s;
  s.offsetOverride["blk.0.attn_k.weight"] = 36;
  EXPECT_EQ(ggufError(s), "tensor 'blk.0.attn_k.weight': data offset 36 is not a multiple of "
                          "the alignment 32 (misaligned)");
}

TEST(GgufBadInput, MissingTensor) {
  GgufSpec s;
  std::erase_if(s.tensors, [](const TensorSpec &t) { return t.gguf == "blk.0.attn_q.weight"; });
  EXPECT_EQ(ggufError(s), "missing tensor 'blk.0.attn_q.weight'");
}

TEST(GgufBadInput, MisShapedTensor) {
  GgufSpec s;
  for (TensorSpec &t : s.tensors)
    if (t.gguf == "blk.0.ffn_up.weight")
      t.shape = {kFf + 1, kEmbd};
  EXPECT_EQ(ggufError(s), "tensor 'blk.0.ffn_up.weight' has shape [33, 32] but blk.0.ffn_up "
                          "needs [32, 32] from the model's hyperparameters (config and weights "
                          "disagree)");
}

TEST(GgufBadInput, UnknownArchitecture) {
  GgufSpec s;
  s.arch = "gpt2";
  EXPECT_EQ(ggufError(s), "unknown architecture 'gpt2' in general.architecture (supported: "
                          "llama, qwen2, qwen3, qwen3moe, gemma3)");
}

TEST(GgufBadInput, UnknownDType) {
  GgufSpec s;
  s.typeOverride["blk.0.attn_v.weight"] = 16; // iq2_xxs
  EXPECT_EQ(ggufError(s), "tensor 'blk.0.attn_v.weight' has unsupported dtype iq2_xxs (supported: "
                          "f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, "
                          "iq4_nl, iq4_xs, bf16)");
}

TEST(GgufBadInput, MissingKey) {
  GgufSpec s;
  s.u32.erase("block_count");
  EXPECT_EQ(ggufError(s), "missing metadata key 'llama.block_count'");
}

TEST(GgufBadInput, ConfigDisagreesWithWeights) {
  GgufSpec s;
  s.u32["embedding_length"] = 48; // every matrix is sized for 32
  EXPECT_EQ(ggufError(s), "tensor 'token_embd.weight' has shape [8, 32] but token_embd needs "
                          "[8, 48] from the model's hyperparameters (config and weights "
                          "disagree)");
}

/// Every prefix of a valid file fails with a clean error (truncation at any point).
TEST(GgufBadInput, TruncatedAtEveryLength) {
  std::vector<uint8_t> full = writeGguf(GgufSpec());
  std::string path = test::tempPath(".gguf");
  size_t step = 1;
  for (size_t n = 0; n < full.size(); n += step) {
    if (n > 1024)
      step = 97; // the data section: coarser
    test::writeFile(path, std::vector<uint8_t>(full.begin(), full.begin() + n));
    auto f = GgufFile::open(path);
    ASSERT_FALSE(bool(f)) << "a " << n << "-byte prefix opened";
    std::string e = llvm::toString(f.takeError());
    EXPECT_EQ(e.rfind(path + ": error: ", 0), 0u) << e;
    bool named =
        e.find("truncated") != std::string::npos || e.find("past the end") != std::string::npos ||
        e.find("too short") != std::string::npos || e.find("cannot fit") != std::string::npos ||
        e.find("does not fit") != std::string::npos;
    EXPECT_TRUE(named) << n << ": " << e;
  }
  llvm::sys::fs::remove(path);
}

// --- safetensors and config.json ----------------------------------------------------------------

struct HfSpec {
  std::string config = R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 1,
    "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 32,
    "vocab_size": 8, "rms_norm_eps": 1e-5, "hidden_act": "silu",
    "tie_word_embeddings": false})";
  std::vector<TensorSpec> tensors = tinyLlama();
  std::map<std::string, std::string> dtypeOverride; ///< by HF name
  std::map<std::string, std::pair<uint64_t, uint64_t>> offsetsOverride;
  int64_t cutBytes = 0;       ///< drop this many bytes from the end
  std::string headerOverride; ///< replaces the whole header JSON
};

std::string hfFolder(const HfSpec &s) {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("fg-hf", dir);
  std::string folder = dir.str().str();
  test::writeFile(folder + "/config.json", std::vector<uint8_t>(s.config.begin(), s.config.end()));
  std::string header = "{\"__metadata__\": {\"format\": \"pt\"}";
  Bytes data;
  for (const TensorSpec &t : s.tensors) {
    uint64_t begin = data.b.size();
    for (int64_t i = 0; i < elems(t.shape); ++i)
      data.put<float>(t.hf.find("norm") != std::string::npos ? 1.0f : 0.01f * (i % 5));
    uint64_t end = data.b.size();
    auto dt = s.dtypeOverride.find(t.hf);
    auto off = s.offsetsOverride.find(t.hf);
    if (off != s.offsetsOverride.end())
      std::tie(begin, end) = off->second;
    header += ", \"" + t.hf + "\": {\"dtype\": \"" +
              (dt == s.dtypeOverride.end() ? std::string("F32") : dt->second) +
              "\", \"shape\": " + shapeStr(t.shape) + ", \"data_offsets\": [" +
              std::to_string(begin) + ", " + std::to_string(end) + "]}";
  }
  header += "}";
  if (!s.headerOverride.empty())
    header = s.headerOverride;
  Bytes file;
  file.put<uint64_t>(header.size())
      .raw(header.data(), header.size())
      .raw(data.b.data(), data.b.size());
  file.b.resize(file.b.size() - static_cast<size_t>(s.cutBytes));
  test::writeFile(folder + "/model.safetensors", file.b);
  return folder;
}

/// The error for `s`, after checking that it names the file or folder.
std::string hfError(const HfSpec &s, llvm::StringRef named = "model.safetensors") {
  std::string folder = hfFolder(s);
  std::string e = loadError(folder);
  std::string where = named.empty() ? folder : folder + "/" + named.str();
  EXPECT_EQ(e.rfind(where + ": error: ", 0), 0u) << "the error names " << where << ": " << e;
  llvm::sys::fs::remove_directories(folder);
  return e.substr(std::min(e.size(), where.size() + 9));
}

TEST(HfBadInput, ValidTinyModelLoads) {
  std::string folder = hfFolder(HfSpec());
  EXPECT_EQ(loadError(folder), "");
  llvm::sys::fs::remove_directories(folder);
}

TEST(HfBadInput, TruncatedFile) {
  HfSpec s;
  s.cutBytes = 100;
  EXPECT_NE(hfError(s).find("lies past the end of the"), std::string::npos) << hfError(s);
  s.headerOverride = "{";
  s.cutBytes = 0;
  EXPECT_EQ(hfError(s), "the header is not valid JSON (not a safetensors file?)");
}

TEST(HfBadInput, HeaderSizePastTheEnd) {
  std::string folder = hfFolder(HfSpec());
  Bytes b;
  b.put<uint64_t>(1 << 30).raw("{}", 2);
  test::writeFile(folder + "/model.safetensors", b.b);
  EXPECT_EQ(loadError(folder), folder + "/model.safetensors: error: truncated file: the header "
                                        "claims 1073741824 bytes but only 2 follow");
  llvm::sys::fs::remove_directories(folder);
}

TEST(HfBadInput, OffsetsDisagreeWithShape) {
  HfSpec s;
  s.offsetsOverride["model.norm.weight"] = {0, 12};
  EXPECT_EQ(hfError(s), "tensor 'model.norm.weight': data_offsets [0, 12) span 12 bytes but "
                        "f32[32] needs 128");
}

TEST(HfBadInput, UnknownDType) {
  HfSpec s;
  s.dtypeOverride["model.norm.weight"] = "F8_E4M3";
  EXPECT_EQ(hfError(s), "tensor 'model.norm.weight' has unsupported dtype F8_E4M3 (supported: "
                        "F32, F16, BF16)");
}

TEST(HfBadInput, MissingTensor) {
  HfSpec s;
  std::erase_if(s.tensors, [](const TensorSpec &t) {
    return t.hf == "model.layers.0.self_attn.k_proj.weight";
  });
  EXPECT_EQ(hfError(s, ""), "missing tensor 'model.layers.0.self_attn.k_proj.weight' (for "
                            "blk.0.attn_k)");
}

TEST(HfBadInput, ConfigDisagreesWithWeights) {
  HfSpec s;
  s.config.replace(s.config.find("\"vocab_size\": 8"), 15, "\"vocab_size\": 9");
  EXPECT_EQ(hfError(s), "tensor 'model.embed_tokens.weight' has shape [8, 32] but token_embd "
                        "needs [9, 32] from the model's hyperparameters (config and weights "
                        "disagree)");
}

TEST(HfBadInput, UnknownArchitecture) {
  HfSpec s;
  s.config.replace(s.config.find("\"llama\""), 7, "\"mamba\"");
  EXPECT_EQ(hfError(s, "config.json"), "unknown architecture: model_type 'mamba' (supported: "
                                       "llama, qwen2, qwen3, qwen3_moe, gemma3_text)");
}

TEST(HfBadInput, MalformedConfig) {
  HfSpec s;
  s.config = "{\"model_type\": ";
  EXPECT_EQ(hfError(s, "config.json"), "malformed JSON");
}

TEST(HfBadInput, WrongKeyType) {
  HfSpec s;
  s.config.replace(s.config.find("\"num_hidden_layers\": 1"), 22, "\"num_hidden_layers\": \"1\"");
  EXPECT_EQ(hfError(s, "config.json"), "key 'num_hidden_layers' must be an integer");
}

// --- hostile inputs (issue 10): sizes that wrap, counts past the file, files that are not ---

/// f32 [2^56, 64] is 2^64 bytes: its size must not wrap to 0 and pass the
/// bounds check (it crashed `run` in get_rows and gave `inspect` a vocab of 7.2e16).
TEST(GgufBadInput, TensorByteSizeOverflows) {
  GgufSpec s;
  s.headerShape["token_embd.weight"] = {int64_t(1) << 56, 64};
  EXPECT_EQ(ggufError(s), "tensor 'token_embd.weight' f32[72057594037927936, 64]: its size "
                          "overflows (corrupt dims)");
  // One that fits in 64 bits but not in the file: past the end, as before.
  s.headerShape["token_embd.weight"] = {int64_t(1) << 40, 64};
  EXPECT_NE(ggufError(s).find("lies past the end of the"), std::string::npos) << ggufError(s);
}

/// A layer count above the file's tensor count is refused before anything
/// loops over the layers (2^31 - 1 aborted with bad_alloc; 100000 built a
/// 2.4 GB graph first).
TEST(GgufBadInput, BlockCountBeyondTheTensors) {
  for (uint32_t n : {0x7fffffffu, 100000u}) {
    GgufSpec s;
    s.u32["block_count"] = n;
    EXPECT_EQ(ggufError(s), "metadata key 'llama.block_count' gives " + std::to_string(n) +
                                " layers but the file holds only 12 tensors");
  }
}

/// gemma3 builds its sliding-layer pattern per layer: 2^40 layers hung there.
TEST(GgufBadInput, Gemma3BlockCountBeyondTheTensors) {
  GgufSpec s;
  s.arch = "gemma3";
  s.u32.erase("block_count");
  s.u64["block_count"] = uint64_t(1) << 40;
  EXPECT_EQ(ggufError(s), "metadata key 'gemma3.block_count' gives 1099511627776 layers but the "
                          "file holds only 12 tensors");
}

/// More layers than the file has tensors for: refused before the graph is built.
TEST(GgufBadInput, MoreLayersThanTheWeightsHold) {
  GgufSpec s;
  s.u32["block_count"] = 3;
  EXPECT_EQ(ggufError(s), "the hyperparameters give 3 layers but the weights hold 1 (no tensor "
                          "for blk.1.attn_norm)");
}

/// A zero key length is refused by name (it is no "use n_embd / n_heads").
TEST(GgufBadInput, KeyLengthZero) {
  GgufSpec s;
  s.u32["attention.key_length"] = 0;
  EXPECT_EQ(ggufError(s), "metadata key 'llama.attention.key_length' must be >= 1, got 0");
}

/// config.json with "head_dim": 0 crashed `run` and `inspect` (SIGFPE permuting q/k rows).
TEST(HfBadInput, HeadDimZero) {
  HfSpec s;
  s.config.insert(s.config.rfind('}'), ", \"head_dim\": 0");
  EXPECT_EQ(hfError(s, "config.json"), "key 'head_dim' must be >= 1, got 0");
}

/// Llama-3 rope scaling with head_dim 2^31 hung computing 2^30 rope factors:
/// the q projection's shape disagrees with the file first.
TEST(HfBadInput, Llama3RopeScalingWithAHugeHeadDim) {
  HfSpec s;
  s.config.insert(s.config.rfind('}'),
                  ", \"head_dim\": 2147483648, \"rope_scaling\": {\"rope_type\": \"llama3\", "
                  "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                  "\"original_max_position_embeddings\": 8192}");
  EXPECT_EQ(hfError(s), "tensor 'model.layers.0.self_attn.q_proj.weight' has shape [32, 32] but "
                        "blk.0.attn_q needs [4294967296, 32] from the model's hyperparameters "
                        "(config and weights disagree)");
}

/// num_hidden_layers above the checkpoint's tensor count: refused before any layer loop.
TEST(HfBadInput, LayerCountBeyondTheTensors) {
  HfSpec s;
  s.config.replace(s.config.find("\"num_hidden_layers\": 1"), 22,
                   "\"num_hidden_layers\": 2147483647");
  EXPECT_EQ(hfError(s, "config.json"), "key 'num_hidden_layers' gives 2147483647 layers but the "
                                       "checkpoint holds only 12 tensors");
}

/// Replaces `path` with a symbolic link to `target`.
void linkTo(const std::string &path, const std::string &target) {
  llvm::sys::fs::remove(path);
  ASSERT_FALSE(llvm::sys::fs::create_link(target, path)) << path << " -> " << target;
}

/// Model files that are links to devices are refused unread (they aborted
/// with "LLVM ERROR: out of memory" or hung at 3+ GB).
TEST(HostileFiles, LinksToDevicesAreNotRead) {
  for (std::string dev : {"/dev/zero", "/dev/urandom"}) {
    std::string want = ": error: cannot read: not a regular file (a character device)";
    std::string gguf = test::tempPath(".gguf");
    linkTo(gguf, dev);
    EXPECT_EQ(loadError(gguf), gguf + want);
    llvm::sys::fs::remove(gguf);

    for (std::string name : {"config.json", "model.safetensors"}) {
      std::string folder = hfFolder(HfSpec());
      linkTo(folder + "/" + name, dev);
      EXPECT_EQ(loadError(folder), folder + "/" + name + want);
      llvm::sys::fs::remove_directories(folder);
    }
    std::string index = hfFolder(HfSpec());
    linkTo(index + "/model.safetensors.index.json", dev);
    EXPECT_EQ(loadError(index), index + "/model.safetensors.index.json" + want);
    llvm::sys::fs::remove_directories(index);
  }
}

/// A folder where a file is expected, and an oversized config.json.
TEST(HostileFiles, FoldersAndHugeConfigs) {
  std::string folder = hfFolder(HfSpec());
  llvm::sys::fs::remove(folder + "/model.safetensors");
  ASSERT_FALSE(llvm::sys::fs::create_directory(folder + "/model.safetensors"));
  EXPECT_EQ(loadError(folder),
            folder + "/model.safetensors: error: cannot read: not a regular file (a folder)");
  llvm::sys::fs::remove_directories(folder);

  folder = hfFolder(HfSpec());
  std::string config = HfSpec().config;
  config.insert(config.rfind('}'), ", \"padding\": \"" + std::string(65 << 20, ' ') + "\"");
  test::writeFile(folder + "/config.json", std::vector<uint8_t>(config.begin(), config.end()));
  EXPECT_EQ(loadError(folder), folder + "/config.json: error: cannot read: the file is " +
                                   std::to_string(config.size()) +
                                   " bytes; at most 67108864 are read as JSON");
  llvm::sys::fs::remove_directories(folder);
}

TEST(HfBadInput, ShardIndexNamesAMissingTensor) {
  std::string folder = hfFolder(HfSpec());
  llvm::sys::fs::rename(folder + "/model.safetensors",
                        folder + "/model-00001-of-00001.safetensors");
  std::string index = R"({"weight_map": {"model.norm.weight": "model-00001-of-00001.safetensors",
      "model.extra.weight": "model-00001-of-00001.safetensors"}})";
  test::writeFile(folder + "/model.safetensors.index.json",
                  std::vector<uint8_t>(index.begin(), index.end()));
  EXPECT_EQ(loadError(folder), folder + "/model.safetensors.index.json: error: tensor "
                                        "'model.extra.weight' is listed in weight_map but not in "
                                        "'model-00001-of-00001.safetensors'");
  llvm::sys::fs::remove_directories(folder);
}

} // namespace
} // namespace fg
