// The legacy profiler: RecordProfile writing PyTorch's legacy JSON, the enable/disable API with
// its event lists, and events from another process merged into a table.
//
//   build/examples/legacy_example [output_dir]
#include <opscope/legacy.h>
#include <opscope/opscope.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

namespace {

void layer() {
  OPSCOPE_RECORD_FUNCTION("aten::linear");
  OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::addmm", opscope::Value::tensor({64, 128}),
                                      opscope::Value::tensor({128, 32}));
}

void model() {
  OPSCOPE_USER_SCOPE("forward");
  for (int i = 0; i < 3; ++i) layer();
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : ".";
  std::filesystem::create_directories(dir);

  // 1. The RAII guard: everything in the block goes to legacy_trace.json when it closes.
  {
    opscope::RecordProfile guard((dir / "legacy_trace.json").string());
    model();
  }
  std::cout << "wrote " << (dir / "legacy_trace.json").string() << "\n";

  // 2. Enable and disable by hand, with shapes; a worker joins through ThreadLocalState.
  opscope::enable_profiler_legacy({.lenses = {.record_shapes = true}});
  model();
  std::thread(opscope::wrap([] { layer(); })).join();
  const opscope::ThreadEventLists lists = opscope::disable_profiler_legacy();
  for (const auto& list : lists) {
    std::cout << "thread " << list.front().thread_id() << ": " << list.size() << " events\n";
  }

  // 3. Events recorded elsewhere travel as bytes (here: a second session of this process,
  //    tagged as node 1) and join a running profiler; legacy_result makes a table of it all.
  opscope::set_default_node_id(1);
  opscope::enable_profiler_legacy();
  model();
  std::vector<opscope::LegacyEvent> remote;
  for (const auto& list : opscope::disable_profiler_legacy()) {
    remote.insert(remote.end(), list.begin(), list.end());
  }
  const std::string bytes = opscope::serialize_legacy_events(remote);  // send these anywhere
  opscope::set_default_node_id(0);

  opscope::enable_profiler_legacy();
  model();
  opscope::add_event_list(opscope::deserialize_legacy_events(bytes));
  const auto merged = opscope::legacy_result(opscope::disable_profiler_legacy());
  std::cout << opscope::key_averages(*merged).table({.sort_by = "cpu_time_total"});
  opscope::export_chrome_trace(*merged, (dir / "merged_trace.json").string());
  std::cout << "wrote " << (dir / "merged_trace.json").string() << "\n";
}
