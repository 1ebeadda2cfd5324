//===- Fusion.h - the fusion driver and its overlap-proof loop ----*- C++ -*-===//
//
// What the compile driver calls (after the cleanup pipeline, before lowering):
//
//   fg::FusionOptions opts;            // from --no-fusion, --disable-fusion, --debug-fusion
//   fg::FusionReport report;           // for `inspect`
//   if (llvm::Error e = fg::fuseWithOverlapProof(graph, opts, report, log)) ...
//
// The `fuse` pass of `fusegraph opt --passes=fuse` runs the same per entry,
// with options and report taken from its PassContext.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diag.h"
#include "ir/Graph.h"
#include "passes/fusion/FusionReport.h"

#include "llvm/Support/Error.h"

namespace fg {

/// Fusion of one function: each round collects every legal candidate and
/// applies them by decreasing benefit, skipping any that overlaps a fusion
/// already applied; refusals of the last round (those that are final) go to
/// `report`, debugged patterns log every candidate to `log`. Then plan memory
/// and prove that no fused node writes bytes it reads from outside itself
/// (passes/memory/OverlapProof.h); a fused node that
/// cannot be proven safe is split back into its decomposition (its pattern
/// stays off at that root, so smaller patterns may take the pieces) and the
/// loop runs again, to a fixed point. Reasons go to the report.
llvm::Expected<bool> fuseFunctionWithOverlapProof(Function &fn, const FusionOptions &opts,
                                                  FusionReport &report, const LogSink &log = {});

/// fuseFunctionWithOverlapProof on every entry of `g`.
llvm::Error fuseWithOverlapProof(Graph &g, const FusionOptions &opts, FusionReport &report,
                                 const LogSink &log = {});

} // namespace fg
