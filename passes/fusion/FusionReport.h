//===- FusionReport.h - what fusion did, and why it declined ------*- C++ -*-===//
//
// Options of the `fuse` pass (--no-fusion, --disable-fusion=a,b,
// --debug-fusion=NAME) and its report: fusions applied per entry and pattern,
// and every candidate declined with its reason (legality, or the overlap
// proof after planning). `fusegraph inspect` prints the report.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg {

class Target; // passes/Target.h

/// Patterns that are off unless named in FusionOptions::optIn (measured
/// slower than what they replace on the H200; kept for their next iteration).
const std::vector<std::string> &optInFusionPatterns();

struct FusionOptions {
  bool enabled = true;               ///< false: --no-fusion
  std::vector<std::string> disabled; ///< pattern names (--disable-fusion)
  /// Off-by-default patterns to apply (--enable-fusion): optInFusionPatterns().
  std::vector<std::string> optIn;
  std::vector<std::string> debug;    ///< patterns whose every candidate is logged
  /// Plan memory after fusing and split back fused nodes whose writes overlap
  /// what they read (FUSIONS.md §1.4), until a fixed point.
  bool overlapProof = true;
  /// What the code generator answers (GEMV token limits, which kernels exist,
  /// aliasing, scratch); null: the `fuse` pass takes its context's target, and
  /// without one no kernel limit is assumed.
  const Target *target = nullptr;

  bool isEnabled(llvm::StringRef pattern) const;
  bool isDebugged(llvm::StringRef pattern) const;
};

/// Whether a pattern enabled by `o` folds the converts of the gemm-inputs
/// pass into the ops producing them (glu_convert, rms_norm_mul_convert): a
/// pipeline then runs gemm-inputs before fuse, so the converts exist when
/// fusion runs.
bool foldsGemmInputConverts(const FusionOptions &o);

struct FusionReport {
  struct Applied {
    std::string entry, pattern;
    int64_t count = 0;
    /// `%name` of each fused node's root result (the value it defines under
    /// the unfused root's name), so a reader finds the node in the final graph.
    std::vector<std::string> roots;
  };
  struct Refusal {
    std::string entry, pattern;
    std::string root;   ///< `%name` of the candidate's root value
    std::string reason; ///< why it did not fuse
  };
  std::vector<Applied> applied; ///< in order of first application
  std::vector<Refusal> refused; ///< candidates declined for good (deduplicated)
  int64_t splitBack = 0;        ///< fused nodes the overlap proof split back

  /// Counts `delta` fusions of `pattern`; with a `root`, adds it (delta > 0)
  /// or removes it (delta < 0, a split back).
  void addApplied(llvm::StringRef entry, llvm::StringRef pattern, int64_t delta = 1,
                  llvm::StringRef root = {});
  /// Takes back the fusion whose root is `root` in `entry` (a fused node a
  /// later round absorbed, or a recomputed norm that died): one fewer of its
  /// pattern, whichever pattern recorded it; nothing when no record names it.
  void withdraw(llvm::StringRef entry, llvm::StringRef root);
  void addRefusal(Refusal r);
  /// Fusions of `pattern` applied in `entry` (every entry when empty).
  int64_t count(llvm::StringRef pattern, llvm::StringRef entry = {}) const;
  int64_t total(llvm::StringRef entry = {}) const;
  /// Refusals that differ only in their layer numbers (`blk.3.` in names),
  /// as one group with those numbers written `blk.N.`, in order of first
  /// appearance. A group of one keeps its own names and no layers.
  struct RefusalGroup {
    std::string entry, pattern, root, reason;
    int64_t count = 0;
    std::vector<int64_t> layers; ///< layer of each member's root
  };
  std::vector<RefusalGroup> groupedRefusals() const;
  /// Human-readable: one line per (entry, pattern) applied, then one per
  /// refusal group ("refused 30× (layers 0-29) at %blk.N.out: ...").
  void print(llvm::raw_ostream &os) const;

  /// The plan's "fusion" section: a first line `fusion-report 1`, then one
  /// tab-separated record per line (`applied`, entry, pattern, count, roots
  /// joined by ','; `refused`, entry, pattern, root, reason; `split_back`, n).
  std::string serialize() const;
  /// Reads serialize()'s text; an error for anything else (a plan written
  /// before the report was structured holds print()'s text).
  static llvm::Expected<FusionReport> parse(llvm::StringRef text);
};

/// Every pattern name (= file name under passes/fusion/ = `--disable-fusion`
/// name = fused op mnemonic without "fused."), by decreasing benefit.
std::vector<std::string> fusionPatternNames();

} // namespace fg
