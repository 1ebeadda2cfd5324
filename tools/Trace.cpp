//===- Trace.cpp - `run|bench --trace FILE`: one traced step ---------------===//
#include "tools/Commands.h"

#include "runtime/StepTrace.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace fg::cli {

Error writeStepTrace(const Plan &plan, StringRef path, int64_t position, const LogSink &log) {
  // The output is checked before the GPU work.
  std::error_code ec;
  raw_fd_ostream os(path, ec, sys::fs::OF_Text);
  if (ec)
    return makeError("cannot write '" + path + "': " + ec.message());
  const Function *fn = plan.graph().lookup("decode");
  if (!fn)
    return makeError("--trace replays the 'decode' entry; this plan has none");
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = ExecOptions::Mode::Graph; // the real step: one graph launch, PDL edges included
  eo.profileLaunches = true;
  eo.log = log;
  Expected<Executor> exec = Executor::create(plan, eo);
  if (!exec)
    return exec.takeError();
  int32_t token = 0, pos = static_cast<int32_t>(position);
  if (Error e = exec->setInput("tokens", ArrayRef<int32_t>(token)))
    return e;
  if (Error e = exec->setInput("positions", ArrayRef<int32_t>(pos)))
    return e;
  // The first replay builds and warms the graph; the second is the one traced.
  for (int i = 0; i < 2; ++i)
    if (Error e = exec->run("decode"))
      return e;
  std::vector<Executor::LaunchTime> launches = exec->lastLaunchTimes();
  if (launches.empty() || llvm::none_of(launches, [](const Executor::LaunchTime &l) {
        return l.endNs > l.startNs;
      }))
    return makeError("the traced step recorded no kernel times (CUPTI)");
  os << chromeTraceJson(*exec->entry("decode"), launches, position + 1,
                        "fusegraph " + sys::path::filename(plan.options().source).str() +
                            " decode at position " + std::to_string(position));
  os.close();
  if (os.has_error())
    return makeError("cannot write '" + path + "': " + os.error().message());
  if (log)
    log(LogLevel::Info, "wrote the trace of one decode step to " + path.str() +
                            " (open it in ui.perfetto.dev or chrome://tracing)");
  return Error::success();
}

} // namespace fg::cli
