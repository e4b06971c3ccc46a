// The join of a Kineto / Chrome trace into the model: Reader walks the top-level object (its
// traceEvents, or what is left of it when the events were cut out and read in pieces), joins each
// Piece to the model in the order of the text (merge: threads, categories, names, flows and
// metadata numbered anew), and hands the model to the builder (build: the recording process,
// threads and processes, flows paired by id, the window).
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "import/kineto_events.h"
#include "import/text_walker.h"
#include "opscope/result.h"
#include "opscope/trace_reader.h"

namespace opscope::import {

class StreamSplitter;

// One Kineto / Chrome trace read into a builder: the whole text in one walk (read), or its
// events in pieces joined as they are read (read_streaming, merge), then its top-level keys.
class Reader : public TextWalker {
 public:
  // Builds into `builder`, which must outlive the reader. `text_size`: the size of the trace's
  // text, to make room for its events up front.
  Reader(std::string path, simdjson::padded_string json, std::int64_t text_size,
         const TraceReadOptions& options, ProfilerResult::Builder& builder);

  // The whole document in memory: one walk. The builder is then ready to finish().
  void read();

  // The document in pieces of about `batch_bytes` (StreamSplitter): each piece of the events
  // array parsed and joined to the model as it comes (on two threads with `parse_helper`),
  // then the rest of the document (its top-level keys around an emptied traceEvents). The
  // builder is then ready to finish(). Defined with the importer (kineto_importer.cpp), which
  // sets the text's chunks, the cutter and the piece queue to work.
  void read_streaming(std::size_t batch_bytes, std::size_t chunk_bytes, bool inflate_ahead,
                      bool parse_helper);

  // Joins what a piece read to the model, in the order of the text: its threads, categories
  // and names become the model's, its details and other args are added, then its events, flow
  // ends and metadata. Throws what stopped the piece's reading, after its events before it.
  void merge(Piece& p);

 private:
  // The private functions are described where they are defined (kineto_join.cpp).
  void read_top(bool events_read);
  // Throws the LimitError of TraceLimits::max_event_bytes: the text around the events, or an
  // event among those from byte `from` to `to`, is longer.
  [[noreturn]] void fail_over_limit(const StreamSplitter& splitter, std::int64_t from,
                                    std::int64_t to) const;

  struct Thread {
    std::int64_t pid;
    Id tid;
    std::string name;
    std::int64_t sort_index = -1;
    bool gpu = false;
    std::int32_t device = -1;
    std::int64_t stream = -1;
  };
  struct Process {
    std::string name;
    std::string labels;
    std::int64_t sort_index = -1;
  };
  // One end of a flow ("s", "t" or "f"), in the order the trace gave it.
  struct FlowEnd {
    std::int64_t id;
    std::int64_t ts;
    std::uint32_t category;  // index into flow_categories_
    std::int32_t thread;
    std::uint32_t order;  // its place among the trace's flow ends (wraps; see hand_over_flows)
    char ph;
  };

  std::int32_t thread_index(std::int64_t pid, const Id& tid);

  std::string_view keep_name(std::string_view name);

  void read_distributed_info(std::string_view raw);

  std::int64_t text_pid(const std::string& text);
  std::int64_t pid_of(const Id& pid) { return pid.text.empty() ? pid.number : text_pid(pid.text); }

  void hand_over_flows();
  void round_as_hta();

  void build();

  simdjson::padded_string json_;  // the whole text, or its top-level keys when streamed
  TraceReadOptions options_;      // what the read keeps (the piece readers' too)
  EventReader events_;            // the events read on this thread
  ProfilerResult::Builder& builder_;
  std::map<std::pair<std::int64_t, Id>, std::int32_t> thread_of_;
  std::vector<Thread> threads_;
  std::map<std::int64_t, Process> processes_;
  std::map<std::string, std::int64_t> text_pids_;
  std::map<std::int64_t, std::int64_t> cpu_events_by_pid_;
  std::unordered_map<std::string_view, std::string_view> names_;
  NameList<std::string> flow_categories_;
  std::vector<FlowEnd> flow_ends_;
  std::vector<std::int32_t> thread_map_;          // merge(): a piece's threads, the model's
  std::vector<std::uint16_t> category_map_;       // its categories
  std::unordered_map<std::string, std::uint16_t> category_of_;  // the model's, by name
  std::vector<std::uint32_t> flow_category_map_;  // its flow categories
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::int64_t rank_ = -1;
  std::string device_properties_;
  std::uint64_t skipped_ = 0;   // events of a phase the model does not hold
  bool memory_events_ = false;  // some "[memory]" event was read: the memory lens is on
  std::uint8_t ts_column_ = 0;  // Piece::ts_column of every piece
};

}  // namespace opscope::import
