// execution_trace_example: writes the Chakra execution trace of a few steps of a tiny model.
//
//   execution_trace_example [PATH]     (default ./et.json)
//
// The trace covers the profiler's recording window only (steps 1 and 2 of schedule(wait=0,
// warmup=1, active=2, repeat=1)); the file appears, complete, when the profiler is destroyed.
// Each "aten::mm" node lists its two input tensors and its output; its ctrl_deps is the
// "forward" range around it, whose parent is "ProfilerStep#N".
#include <opscope/opscope.h>

#include <cstdio>
#include <memory>
#include <string>

namespace {

void mm(std::int64_t m, std::int64_t k, std::int64_t n) {
  opscope::RecordFunction rf(opscope::RecordScope::kFunction);
  static constexpr opscope::CallSite site{"aten::mm", __func__, __FILE__, __LINE__};
  if (rf.wants_inputs()) {
    rf.before(site, {opscope::Value::tensor({m, k}), opscope::Value::tensor({k, n})});
  } else {
    rf.before(site);
  }
  // ... the multiplication ...
  if (rf.wants_outputs()) rf.set_outputs({opscope::Value::tensor({m, n})});
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "et.json";
  auto et = std::make_shared<opscope::ExecutionTraceObserver>();
  et->register_callback(path);
  {
    opscope::Profiler prof({
        .schedule = opscope::schedule({.wait = 0, .warmup = 1, .active = 2, .repeat = 1}),
        .execution_trace_observer = et,
    });
    prof.start();
    for (int step = 0; step < 4; ++step) {
      {
        OPSCOPE_USER_SCOPE("forward");
        mm(64, 256, 512);
        mm(64, 512, 10);
      }
      prof.step();
    }
    prof.stop();
  }  // the profiler cleans up the observer: et.json is written now
  std::printf("execution trace written to %s\n", path.c_str());
  return 0;
}
