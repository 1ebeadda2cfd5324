//===- SessionTest.cpp - prompt, prefill buckets, decode, sampling (CPU) ---===//
#include "runtime/Session.h"
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "frontends/models/Demo.h"
#include "ir/Parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace fg;
using namespace llvm;

namespace {

template <typename T> std::string errorText(Expected<T> &v) {
  return v ? std::string("(no error)") : toString(v.takeError());
}
template <typename T> std::string errorText(Expected<T> &&v) { return errorText(v); }
std::string errorText(Error e) { return e ? toString(std::move(e)) : "(no error)"; }

Plan compileCpu(Expected<Graph> g, int64_t ctx) {
  EXPECT_TRUE(bool(g)) << errorText(g);
  CompileOptions co;
  co.ctx = ctx;
  co.cuda = false; // the CPU executor needs no kernels
  Expected<Plan> p = compile(*g, co);
  EXPECT_TRUE(bool(p)) << errorText(p);
  return std::move(*p);
}

/// The demo with `buckets`; prefill returns the last row, or every row.
Plan demoPlan(std::vector<int64_t> buckets, bool allLogits, int64_t ctx = 32,
              std::string source = "demo") {
  ModelOptions mo;
  mo.ctx = ctx;
  mo.prefill = std::move(buckets);
  mo.allLogits = allLogits;
  Expected<Graph> g = loadModel("demo", mo);
  EXPECT_TRUE(bool(g)) << errorText(g);
  CompileOptions co;
  co.ctx = ctx;
  co.cuda = false;
  co.source = std::move(source);
  Expected<Plan> p = compile(*g, co);
  EXPECT_TRUE(bool(p)) << errorText(p);
  return std::move(*p);
}

/// A tiny dense model unlike the demo: q/k/v biases, rope factors, sinks, a
/// sliding window of 3 (padding and chunking must agree on the rows each
/// token sees), a softcap and GeGLU; vocab 64.
Plan tinyDensePlan(std::vector<int64_t> buckets, LogitRows rows) {
  DecoderConfig c = demoDenseConfig(24);
  return compileCpu(buildDecoderGraph(c, decoderEntries(buckets, rows)), 24);
}

/// What tools/Generate.cpp did before the Session (and before prefill
/// returned only its last row): a prefill bucket padded at the END with
/// positions past the prompt, row n-1 of every-row logits; greedy decode
/// steps. Returns the logits row each token was picked from and the tokens.
struct Generated {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> rows;
};

Generated oldGeneratePath(const Plan &allRowsPlan, ArrayRef<int32_t> prompt, int64_t steps) {
  Generated out;
  Expected<Executor> e = Executor::create(allRowsPlan, {});
  EXPECT_TRUE(bool(e)) << errorText(e);
  std::vector<PrefillBucket> buckets = prefillBuckets(allRowsPlan.graph());
  const int64_t P = static_cast<int64_t>(prompt.size());
  int64_t vocab = 0;
  std::vector<float> last;
  auto run = [&](StringRef entry, ArrayRef<int32_t> toks, ArrayRef<int32_t> pos, int64_t row) {
    EXPECT_FALSE(bool(e->setInput("tokens", toks)));
    EXPECT_FALSE(bool(e->setInput("positions", pos)));
    Error err = e->run(entry);
    ASSERT_FALSE(bool(err)) << toString(std::move(err));
    ArrayRef<float> l = *e->outputFloats("logits");
    vocab = static_cast<int64_t>(l.size()) / static_cast<int64_t>(toks.size());
    last = l.slice(row * vocab, vocab).vec();
  };
  int64_t done = 0;
  while (done < P) {
    int64_t left = P - done;
    const PrefillBucket *pick = buckets.empty() ? nullptr : &buckets.back();
    for (const PrefillBucket &b : buckets)
      if (b.tokens >= left) {
        pick = &b;
        break;
      }
    if (!pick || done + pick->tokens > e->ctx()) {
      run("decode", prompt[done], static_cast<int32_t>(done), 0);
      ++done;
      continue;
    }
    int64_t n = std::min(left, pick->tokens);
    std::vector<int32_t> toks(pick->tokens), pos(pick->tokens);
    for (int64_t i = 0; i < pick->tokens; ++i) {
      toks[i] = i < n ? prompt[done + i] : prompt[P - 1];
      pos[i] = static_cast<int32_t>(done + i);
    }
    run(pick->entry, toks, pos, n - 1);
    done += n;
  }
  for (int64_t s = 0; s < steps; ++s) {
    out.rows.push_back(last);
    out.tokens.push_back(greedyToken(last));
    if (s + 1 < steps)
      run("decode", out.tokens.back(), static_cast<int32_t>(P + s), 0);
  }
  return out;
}

/// The rows a session sampled from, and its tokens.
Generated sessionGenerate(const Plan &plan, ArrayRef<int32_t> prompt, int64_t steps) {
  Generated out;
  SessionOptions so;
  so.sample = [&](ArrayRef<float> logits) -> Expected<int32_t> {
    out.rows.push_back(logits.vec());
    return greedyToken(logits);
  };
  Expected<Session> s = Session::create(plan, {}, so);
  EXPECT_TRUE(bool(s)) << errorText(s);
  if (!s)
    return out;
  Expected<std::vector<int32_t>> t = s->generate(prompt, steps);
  EXPECT_TRUE(bool(t)) << errorText(t);
  if (t)
    out.tokens = *t;
  EXPECT_EQ(s->position(), static_cast<int64_t>(prompt.size()) + steps - 1);
  return out;
}

float maxAbsDiff(ArrayRef<float> a, ArrayRef<float> b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

void expectSameGeneration(const Generated &got, const Generated &want, const std::string &what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.rows.size(), want.rows.size()) << what;
  for (size_t i = 0; i < got.rows.size(); ++i)
    EXPECT_LE(maxAbsDiff(got.rows[i], want.rows[i]), 1e-6f) << what << ", token " << i;
}

/// The entries a session ran, with their positions.
struct RunLog {
  std::vector<std::string> entries;
  std::vector<std::vector<int32_t>> positions;
  std::vector<int64_t> newTokens;
};

SessionOptions logRuns(RunLog &log) {
  SessionOptions so;
  so.onRun = [&log](const SessionRun &r, Executor &) {
    log.entries.push_back(r.entry.str());
    log.positions.push_back(r.positions.vec());
    log.newTokens.push_back(r.newTokens);
    return Error::success();
  };
  return so;
}

const std::vector<int32_t> kPrompt10 = {17, 301, 5, 444, 90, 123, 7, 8, 250, 3};

} // namespace

/// The session on the default plan (prefill returns the last row) gives the
/// tokens and logits of the old Generate path on an every-row plan: prompts
/// shorter than the bucket (padded), equal to it, longer (chunks), one token.
TEST(Session, MatchesTheOldGeneratePathOnTheDemo) {
  Plan last = demoPlan({4}, /*allLogits=*/false), all = demoPlan({4}, /*allLogits=*/true);
  for (ArrayRef<int32_t> prompt :
       {ArrayRef<int32_t>(kPrompt10).take_front(3), ArrayRef<int32_t>(kPrompt10).take_front(4),
        ArrayRef<int32_t>(kPrompt10), ArrayRef<int32_t>(kPrompt10).take_front(1)}) {
    std::string what = "prompt of " + std::to_string(prompt.size());
    Generated want = oldGeneratePath(all, prompt, 5);
    ASSERT_EQ(want.tokens.size(), 5u);
    expectSameGeneration(sessionGenerate(last, prompt, 5), want, what + ", last-row plan");
    expectSameGeneration(sessionGenerate(all, prompt, 5), want, what + ", every-row plan");
  }
}

/// The same on a tiny dense model with a sliding window of 3 and two buckets.
TEST(Session, MatchesTheOldGeneratePathOnATinyDenseModel) {
  Plan last = tinyDensePlan({2, 4}, LogitRows::Last), all = tinyDensePlan({2, 4}, LogitRows::All);
  const std::vector<int32_t> prompt = {3, 60, 7, 41, 9, 22, 5};
  for (size_t n : {3u, 7u}) {
    ArrayRef<int32_t> p = ArrayRef<int32_t>(prompt).take_front(n);
    Generated want = oldGeneratePath(all, p, 6);
    expectSameGeneration(sessionGenerate(last, p, 6), want, "prompt of " + std::to_string(n));
  }
}

/// How tokens are fed: the largest bucket the rest fills, then the smallest
/// bucket that holds the rest, padded FIRST at the positions after the last
/// token; one token left goes through decode; padding that would pass ctx is
/// not used (decode instead).
TEST(Session, ChunksPaddingAndDecode) {
  {
    RunLog log;
    Expected<Session> s = Session::create(demoPlan({4, 8}, false, 32), {}, logRuns(log));
    ASSERT_TRUE(bool(s)) << errorText(s);
    ASSERT_FALSE(bool(s->feed(kPrompt10)));
    EXPECT_EQ(log.entries, (std::vector<std::string>{"prefill_8", "prefill_4"}));
    EXPECT_EQ(log.positions[1], (std::vector<int32_t>{10, 11, 8, 9}));
    EXPECT_EQ(log.newTokens, (std::vector<int64_t>{8, 2}));
    EXPECT_EQ(s->position(), 10);
    EXPECT_EQ(s->stats().promptRuns, 2);
    // One more token: decode, not a padded bucket.
    ASSERT_FALSE(bool(s->feed(42)));
    EXPECT_EQ(log.entries.back(), "decode");
    EXPECT_EQ(log.positions.back(), (std::vector<int32_t>{10}));
    EXPECT_EQ(s->history().size(), 11u);
    EXPECT_EQ(s->history().back(), 42);
  }
  {
    // ctx 11: prefill_4 at position 8 would write rows 8..11; decode instead.
    RunLog log;
    Expected<Session> s = Session::create(demoPlan({4, 8}, false, 11), {}, logRuns(log));
    ASSERT_TRUE(bool(s)) << errorText(s);
    ASSERT_FALSE(bool(s->feed(kPrompt10)));
    EXPECT_EQ(log.entries, (std::vector<std::string>{"prefill_8", "decode", "decode"}));
  }
}

/// Long prompts run as a sequence of chunks: full largest buckets, then the
/// smallest bucket that holds the rest (padded), or decode for one token;
/// near ctx a padded bucket that would pass it gives way to smaller ones.
TEST(Session, PlanPromptChunks) {
  std::vector<PrefillBucket> b = {{"prefill_64", 64}, {"prefill_512", 512}};
  auto shape = [](const std::vector<PromptChunk> &cs) {
    std::vector<std::tuple<std::string, int64_t, int64_t>> out;
    for (const PromptChunk &c : cs)
      out.emplace_back(c.entry, c.size, c.tokens);
    return out;
  };
  using V = std::vector<std::tuple<std::string, int64_t, int64_t>>;
  EXPECT_EQ(shape(planPromptChunks(b, 0, 1, 4096)), (V{{"decode", 1, 1}}));
  EXPECT_EQ(shape(planPromptChunks(b, 0, 63, 4096)), (V{{"prefill_64", 64, 63}}));
  EXPECT_EQ(shape(planPromptChunks(b, 0, 64, 4096)), (V{{"prefill_64", 64, 64}}));
  EXPECT_EQ(shape(planPromptChunks(b, 0, 65, 4096)), (V{{"prefill_512", 512, 65}}));
  EXPECT_EQ(shape(planPromptChunks(b, 0, 1025, 4096)),
            (V{{"prefill_512", 512, 512}, {"prefill_512", 512, 512}, {"decode", 1, 1}}));
  EXPECT_EQ(shape(planPromptChunks(b, 0, 2049 + 60, 4096)),
            (V{{"prefill_512", 512, 512},
               {"prefill_512", 512, 512},
               {"prefill_512", 512, 512},
               {"prefill_512", 512, 512},
               {"prefill_64", 64, 61}}));
  // At position 3700 of 4096: 90 tokens do not fit prefill_512 padded
  // (3700 + 512 > 4096): prefill_64 full, then prefill_64 padded (3764 + 64 <= 4096).
  EXPECT_EQ(shape(planPromptChunks(b, 3700, 90, 4096)),
            (V{{"prefill_64", 64, 64}, {"prefill_64", 64, 26}}));
  // At 4000: after the full prefill_64, a padded one would pass ctx (4064 + 64):
  // the last 26 tokens go through decode.
  std::vector<PromptChunk> nearEnd = planPromptChunks(b, 4000, 90, 4096);
  ASSERT_EQ(nearEnd.size(), 27u);
  EXPECT_EQ(nearEnd[0].entry, "prefill_64");
  EXPECT_EQ(nearEnd[26].entry, "decode");
  EXPECT_EQ(shape(planPromptChunks({}, 0, 3, 16)),
            (V{{"decode", 1, 1}, {"decode", 1, 1}, {"decode", 1, 1}}));
  // Every prompt token is fed exactly once.
  for (int64_t n : {1, 2, 63, 64, 65, 511, 512, 513, 2047, 2049}) {
    int64_t fed = 0;
    for (const PromptChunk &c : planPromptChunks(b, 7, n, 8192)) {
      EXPECT_LE(c.tokens, c.size);
      fed += c.tokens;
    }
    EXPECT_EQ(fed, n) << n;
  }
  EXPECT_EQ(describeChunks(planPromptChunks(b, 0, 2049 + 60, 4096)),
            "prefill_512 x4, prefill_64 (3 padding rows)");
  EXPECT_EQ(describeChunks(planPromptChunks(b, 0, 1025, 4096)), "prefill_512 x2, decode");
}

/// --verbose: the buckets and the chunks chosen, then one line per chunk.
TEST(Session, VerboseShowsBucketsAndChunks) {
  std::vector<std::string> lines;
  ExecOptions eo;
  eo.log = [&](LogLevel, llvm::StringRef m) { lines.push_back(m.str()); };
  Expected<Session> s = Session::create(demoPlan({4, 8}, false, 32), eo);
  ASSERT_TRUE(bool(s)) << errorText(s);
  ASSERT_FALSE(bool(s->feed(kPrompt10)));
  auto has = [&](llvm::StringRef text) {
    return llvm::any_of(lines, [&](const std::string &l) { return StringRef(l).contains(text); });
  };
  EXPECT_TRUE(has("session: 10 prompt tokens at position 0; prefill buckets: 4, 8; chunks: "
                  "prefill_8, prefill_4 (2 padding rows)"));
  EXPECT_TRUE(has("tokens at positions 8..9 through prefill_4 (2 padding rows)"));
}

/// Feeding in pieces continues the conversation: the logits of the last token
/// match feeding everything at once (prefill vs decode rounding: 1e-4).
TEST(Session, ContinuesAConversation) {
  Plan plan = demoPlan({4}, false);
  Expected<Session> a = Session::create(plan, {}), b = Session::create(plan, {});
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(bool(a->feed(ArrayRef<int32_t>(kPrompt10).take_front(6))));
  ASSERT_FALSE(bool(a->feed(ArrayRef<int32_t>(kPrompt10).drop_front(6))));
  ASSERT_FALSE(bool(b->feed(kPrompt10)));
  EXPECT_EQ(a->position(), 10);
  EXPECT_LE(maxAbsDiff(a->lastLogits(), b->lastLogits()), 1e-4f);
  Expected<int32_t> ta = a->sampleNext(), tb = b->sampleNext();
  ASSERT_TRUE(ta && tb);
  EXPECT_EQ(*ta, *tb);
  // reset() starts over: the same prompt gives the same logits again.
  std::vector<float> before = b->lastLogits().vec();
  b->reset();
  EXPECT_EQ(b->position(), 0);
  EXPECT_TRUE(b->lastLogits().empty());
  ASSERT_FALSE(bool(b->feed(kPrompt10)));
  EXPECT_EQ(b->lastLogits().vec(), before);
}

/// Sampling and streaming hooks: the sampler's pick is what is fed next and
/// what onToken sees; onToken returning false stops after that token.
TEST(Session, SamplerAndStreamingHooks) {
  RunLog log;
  SessionOptions so = logRuns(log);
  // Not greedy: the second-largest logit.
  so.sample = [](ArrayRef<float> l) -> Expected<int32_t> {
    std::vector<float> v = l.vec();
    int32_t top = greedyToken(v);
    v[top] = -INFINITY;
    return greedyToken(v);
  };
  std::vector<int32_t> streamed;
  so.onToken = [&](int32_t t) {
    streamed.push_back(t);
    return streamed.size() < 3;
  };
  Expected<Session> s = Session::create(demoPlan({4}, false), {}, so);
  ASSERT_TRUE(bool(s)) << errorText(s);
  Expected<std::vector<int32_t>> t = s->generate(ArrayRef<int32_t>(kPrompt10).take_front(4), 10);
  ASSERT_TRUE(bool(t)) << errorText(t);
  EXPECT_EQ(*t, streamed);
  ASSERT_EQ(t->size(), 3u); // stopped by onToken
  // Tokens 0 and 1 were fed (decode at positions 4, 5); the third was not.
  EXPECT_EQ(s->position(), 6);
  EXPECT_EQ(s->history()[4], (*t)[0]);
  EXPECT_EQ(s->history()[5], (*t)[1]);
  EXPECT_EQ(s->stats().decodeSteps, 2);
  // Greedy would have picked another first token.
  Expected<Session> g = Session::create(demoPlan({4}, false), {});
  ASSERT_TRUE(bool(g));
  Expected<std::vector<int32_t>> gt = g->generate(ArrayRef<int32_t>(kPrompt10).take_front(4), 1);
  ASSERT_TRUE(bool(gt));
  EXPECT_NE((*gt)[0], (*t)[0]);
  // A sampler's error stops generation and comes back.
  SessionOptions bad;
  bad.sample = [](ArrayRef<float>) -> Expected<int32_t> { return makeError("no luck"); };
  Expected<Session> b = Session::create(demoPlan({4}, false), {}, bad);
  ASSERT_TRUE(bool(b));
  Expected<std::vector<int32_t>> bt = b->generate({1, 2}, 3);
  EXPECT_EQ(errorText(bt), "no luck");
}

/// Teacher forcing feeds the given tokens instead of the sampled ones.
TEST(Session, TeacherForcing) {
  RunLog log;
  Expected<Session> s = Session::create(demoPlan({4}, false), {}, logRuns(log));
  ASSERT_TRUE(bool(s));
  const std::vector<int32_t> forced = {5, 6, 7};
  Expected<std::vector<int32_t>> t = s->generate({1, 2, 3}, 4, forced);
  ASSERT_TRUE(bool(t)) << errorText(t);
  EXPECT_EQ(t->size(), 4u);
  EXPECT_EQ(s->history(), ArrayRef<int32_t>({1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(errorText(s->generate({1}, 5, forced)),
            "teacher forcing gives 3 tokens but 5 generated tokens feed 4; give more tokens or "
            "generate fewer");
}

/// Errors come back before anything runs: past ctx (counting what was fed
/// before), an empty prompt, nothing to sample from; a token id outside the
/// vocabulary is the executor's error.
TEST(Session, Errors) {
  Expected<Session> s = Session::create(demoPlan({4}, false, 16), {});
  ASSERT_TRUE(bool(s));
  EXPECT_EQ(errorText(s->generate({1, 2, 3}, 15)),
            "the prompt (3 tokens) plus 15 generated tokens needs 17 positions but the plan's "
            "ctx is 16; compile with a larger --ctx or generate fewer tokens");
  EXPECT_EQ(s->position(), 0); // nothing ran
  EXPECT_EQ(errorText(s->generate({}, 1)), "the prompt is empty");
  EXPECT_EQ(errorText(s->sampleNext().takeError()),
            "no logits to sample from: feed a token first");
  ASSERT_FALSE(bool(s->feed({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})));
  EXPECT_EQ(errorText(s->generate({1, 2, 3}, 5)),
            "the prompt (3 tokens) plus 5 generated tokens needs 17 positions from position 10 "
            "but the plan's ctx is 16; compile with a larger --ctx or generate fewer tokens");
  EXPECT_EQ(errorText(s->feed({1, 2, 3, 4, 5, 6, 7})),
            "feeding 7 tokens at position 10 needs 17 positions but the plan's ctx is 16");
  // The executor's fourth run (prefill_4 x3 above): the tokens' binding is [0, vocab).
  EXPECT_EQ(errorText(s->feed(512)), "step 3: input 'tokens'[0] = 512 is outside [0, 512)");
  EXPECT_EQ(s->position(), 10);
}

/// A plan without `decode`, or whose logits are not [T, vocab] rows, is refused.
TEST(Session, RefusesPlansThatAreNotDecoders) {
  Graph g;
  Function &fn = g.addFunction("step");
  fn.addArgument("tokens", TensorType(DType::I32, {1}), ArgRole::Input);
  Plan p(std::move(g), PlanOptions{});
  Expected<Session> s = Session::create(p, {});
  EXPECT_EQ(errorText(s), "the plan has no 'decode' entry; its entries are: step");
}

/// A plan written before issue 12 carries the meta line `last_logits_only`
/// (a flag that changed nothing: its prefill returns every row). It still
/// loads — the key is ignored — and a session runs it.
TEST(Session, APlanWithTheOldLastLogitsOnlyKeyStillRuns) {
  // A source value runs to the end of its line: this writes the old key as a
  // meta line of its own, checksummed like every other.
  Plan old = demoPlan({4}, /*allLogits=*/true, 32, "demo\nlast_logits_only 1");
  std::string bytes = old.serialize();
  ASSERT_NE(bytes.find("\nlast_logits_only 1\n"), std::string::npos);
  Expected<Plan> loaded = Plan::deserialize(bytes, "old.plan");
  ASSERT_TRUE(bool(loaded)) << errorText(loaded);
  EXPECT_EQ(loaded->options().source, "demo");
  const Function *p4 = loaded->graph().lookup("prefill_4");
  EXPECT_EQ(p4->type(p4->results()[0]), TensorType(DType::F32, {4, 512}));
  Generated got = sessionGenerate(*loaded, ArrayRef<int32_t>(kPrompt10).take_front(3), 3);
  Generated want = sessionGenerate(demoPlan({4}, false), ArrayRef<int32_t>(kPrompt10).take_front(3), 3);
  expectSameGeneration(got, want, "old plan");
}

/// prefillBuckets reads the entry roles, not the names: a `prefill_N` without
/// a role is no bucket, an entry of role prefill is one whatever its name.
TEST(Session, PrefillBucketsComeFromEntryRoles) {
  Expected<Graph> g = parseGraph(R"(graph @prefill_4(
    input %tokens: i32[4],
    weight %emb: f32[16, 8] {init = constant(value = 1.0)}) {
  %x = get_rows(%emb, %tokens) : f32[4, 8]
  return %x
}

graph @chunk(
    input %tokens: i32[3] {bind = tokens, range = [0, 16)},
    weight %emb: f32[16, 8] {init = constant(value = 1.0)}) attributes {role = prefill, n = 3} {
  %x = get_rows(%emb, %tokens) : f32[3, 8]
  return %x
}

graph @decode(
    input %tokens: i32[1] {bind = tokens, range = [0, 16)},
    weight %emb: f32[16, 8] {init = constant(value = 1.0)}) attributes {role = decode} {
  %x = get_rows(%emb, %tokens) : f32[1, 8]
  return %x
}
)");
  ASSERT_TRUE(bool(g)) << errorText(g);
  std::vector<PrefillBucket> b = prefillBuckets(*g);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].entry, "chunk");
  EXPECT_EQ(b[0].tokens, 3);
  EXPECT_EQ(prefillBuckets(demoPlan({8, 4}, false, 32).graph()).size(), 2u);
}

/// A decode-only graph (no prefill entry, no KV state) runs through a session
/// made from an Executor: every prompt token goes through decode, and the
/// tokens are the argmax of matmul(emb[token], out) computed here.
TEST(Session, DecodeOnlyGraphFromAnExecutor) {
  Expected<Graph> g = parseGraph(R"(graph @decode(
    input %tokens: i32[1],
    input %positions: i32[1],
    weight %emb: f32[16, 8] {init = normal(seed = 5, std = 1.0)},
    weight %out: f32[16, 8] {init = normal(seed = 6, std = 1.0)}) {
  %x = get_rows(%emb, %tokens) : f32[1, 8]
  %logits = matmul(%x, %out) : f32[1, 16]
  return %logits
})");
  Plan plan = compileCpu(std::move(g), 0);
  Expected<Executor> e = Executor::create(plan, {});
  ASSERT_TRUE(bool(e)) << errorText(e);
  RunLog log;
  Expected<Session> s = Session::create(std::move(*e), logRuns(log));
  ASSERT_TRUE(bool(s)) << errorText(s);
  EXPECT_TRUE(s->buckets().empty());
  EXPECT_EQ(s->vocab(), 16);
  Expected<std::vector<int32_t>> t = s->generate({3, 1, 4}, 4);
  ASSERT_TRUE(bool(t)) << errorText(t);
  EXPECT_EQ(log.entries, std::vector<std::string>(6, "decode"));
  // Each token only depends on the one before: next = argmax(out · emb[prev]).
  Expected<Executor> ref = Executor::create(plan, {});
  ASSERT_TRUE(bool(ref));
  int32_t prev = 4;
  for (int32_t got : *t) {
    ASSERT_FALSE(bool(ref->setInput("tokens", prev)));
    ASSERT_FALSE(bool(ref->setInput("positions", 0)));
    ASSERT_FALSE(bool(ref->run("decode")));
    EXPECT_EQ(got, greedyToken(*ref->outputFloats("logits")));
    prev = got;
  }
}
