// opscope/execution_trace.h: the execution trace (Chakra ET JSON) of every operator range.
//
// An execution trace is the program as a graph, not a timeline: one node per range with its
// parent (ctrl_deps), its inputs and outputs (values, shapes, types, strides) and its ids,
// in the format that Chakra's converters and PARAM's replay read. It is PyTorch's
// torch.profiler.ExecutionTraceObserver:
//
//   opscope::ExecutionTraceObserver et;
//   et.register_callback("et.json");   // opens the output; records nothing yet
//   et.start();
//   train_step();                      // every range on every thread becomes a node
//   et.stop();
//   et.unregister_callback();          // the file appears at et.json, complete
//
// or handed to a Profiler (ProfilerConfig::execution_trace_observer), which starts it when a
// recording window starts, stops it when the window stops and cleans it up when the Profiler
// is destroyed.
//
// The file: {"schema": "1.1.1-chakra.0.0.4", "pid", "time" (local, "YYYY-MM-DD HH:MM:SS"),
// "start_ts" and "finish_ts" (steady-clock ms), "nodes": [...]}. Node 1 is the process
// "[pytorch|profiler|execution_trace|process]", each recording thread gets a
// "[pytorch|profiler|execution_trace|thread]" node under it, and each range a node under the
// range that encloses it on its thread (or under the thread node). Ids come from one counter
// shared by nodes and tensors, starting at 2; a range takes its id when it begins, so a child
// always has a larger id than its parent. Nodes are written as their ranges end.
//
// Values are written as PyTorch's execution trace writes IValues: a tensor as type
// "Tensor(<dtype>)", its sizes and strides (strides [] when the range did not give them),
// and the value [tensor_id, storage_id, offset, numel, itemsize, "device"]; scalars as
// "Int", "Double" (infinities and NaN as the strings "inf", "-inf", "nan"), "Bool", "String";
// lists as "GenericList[...]" with nested arrays, cut at kMaxRecordedListItems elements.
// opscope::Value carries no tensor identity, so each tensor occurrence gets a fresh id from
// the shared counter (the same tensor passed to two ranges gets two ids), its storage id is
// 0 and its offset 0; the item size is derived from the dtype name ("float" 4, "double" 8,
// "long int" 8, "int" 4, "c10::Half" 2, ...; 0 for a name it does not know).
//
// Outputs come from RecordFunction::set_outputs() (opscope/record_function.h).
//
// Cost: while running, every range takes the observer path (the start callback copies the
// inputs, the end callback formats the node and appends it under one process-wide mutex);
// bench/execution_trace_bench.cpp measures it. Registered but stopped, and unregistered, it
// costs nothing: the observer is only attached between start() and stop().
#pragma once

#include <memory>
#include <string>

namespace opscope {

// At most one observer is registered per process. The control methods (register, start, stop,
// unregister) are called from one thread at a time; ranges may run on any thread meanwhile.
class ExecutionTraceObserver {
 public:
  ExecutionTraceObserver();
  // Unregisters (finalizing the file); a failure is sent to the warning handler, never thrown.
  ~ExecutionTraceObserver();
  ExecutionTraceObserver(const ExecutionTraceObserver&) = delete;
  ExecutionTraceObserver& operator=(const ExecutionTraceObserver&) = delete;

  // Opens `output_file_path` for writing (under a temporary name in the same directory,
  // renamed onto the path by unregister_callback()) and writes the header. Records nothing
  // until start(). Throws opscope::Error when the path cannot be written (naming the path and
  // the reason) or when another observer is registered in this process (naming its path).
  // Registering again while registered does nothing but warn: the first path is kept.
  ExecutionTraceObserver& register_callback(const std::string& output_file_path);
  // Stops recording and finalizes the file: the process node and "finish_ts" are written and
  // the temporary is renamed onto the path. Does nothing when not registered. Throws
  // opscope::Error when the file cannot be completed; the observer is unregistered anyway.
  void unregister_callback();
  // Records every range that begins from now until stop(), on every thread. Warns and does
  // nothing when not registered; does nothing when already running. When distributed info
  // is set (opscope::set_distributed_info), first records a "## process_group:init ##" range
  // whose input is the process-group configuration.
  void start();
  // Stops recording. Ranges that began while running are still written when they end (so
  // that their children's ctrl_deps stay resolvable); does nothing when not running.
  void stop();
  // As unregister_callback() (the name torch.profiler.profile calls on exit).
  void cleanup();

  bool is_registered() const;
  bool is_running() const;
  // The path given to register_callback(). Throws opscope::Error when not registered.
  std::string get_output_file_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace opscope
