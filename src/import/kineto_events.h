// Reading the events of a Kineto / Chrome trace (the Kineto schema: phases, categories, the args
// the model has fields for) into a Piece, which shares nothing, so that two threads read two
// runs of events at once; Reader::merge (kineto_join.h) joins a piece to the model.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "import/name_list.h"
#include "import/text_walker.h"
#include "opscope/result.h"
#include "opscope/trace_reader.h"

namespace opscope::import {

// What reading a run of events gives before it joins the model: the events with their names
// and categories as views into the text that was read (or into the parser that read it), and
// threads, categories and flow categories numbered within the run. Reader::merge() joins a
// run to the model; runs are read apart (on two threads, PieceQueue) and joined in the order
// of the text, so that the model is the one a single walk builds.
struct Piece {
  // A (pid, tid) the run's events were on, in the order the run first named it, with what its
  // events said of it.
  struct Thread {
    Id pid;  // a text pid ("Spans") is numbered when it joins the model (Reader::text_pid)
    Id tid;
    bool gpu = false;
    std::int32_t device = -1;  // the last one the run's GPU work named, -1 none
    std::int64_t stream = -1;
    std::int64_t cpu_ranges = 0;
  };
  // One end of a flow ("s", "t" or "f").
  struct FlowEnd {
    std::int64_t id;
    std::int64_t ts;
    std::uint32_t category;  // index into flow_categories
    std::int32_t thread;     // index into threads
    char ph;
  };
  // What a metadata event ("ph": "M") said of a process or thread.
  struct Meta {
    enum class What {
      kProcessName,
      kProcessLabels,
      kProcessSortIndex,
      kThreadName,
      kThreadSortIndex
    };
    What what = What::kProcessName;
    Id pid;                    // for a process
    std::int32_t thread = -1;  // for a thread: index into threads
    std::string text;
    std::int64_t number = 0;
  };

  // Event::thread indexes threads; Event::category is 0 (implied) or 1 + an index into
  // categories; Event::detail indexes details; Event::other_args indexes other_args.
  std::vector<Event> events;
  std::vector<EventDetail> details;
  std::string other_text;  // the other args' texts, one after the other
  std::vector<std::pair<std::size_t, std::size_t>> other_args;  // (start, size) in other_text
  std::vector<Thread> threads;
  NameList<std::string_view> categories;
  std::vector<std::string> text_pids;  // the text pids named, in the order first named
  NameList<std::string_view> flow_categories;
  std::vector<FlowEnd> flow_ends;
  std::vector<Meta> metadata;  // in the order of the text
  std::uint64_t skipped = 0;   // events of a phase the model does not hold
  bool memory_events = false;  // some "[memory]" event was read
  // What the events' ts say of HTA's "ts" column (TsColumn bits, trace_times.h): asked only
  // when TraceReadOptions::times is one of HTA's.
  std::uint8_t ts_column = 0;
  std::exception_ptr error;    // what stopped the reading (after the events before it)

  void clear() {
    events.clear();
    details.clear();
    other_text.clear();
    other_args.clear();
    threads.clear();
    categories.clear();
    text_pids.clear();
    flow_categories.clear();
    flow_ends.clear();
    metadata.clear();
    skipped = 0;
    memory_events = false;
    ts_column = 0;
    error = nullptr;
  }
};

// Reads events into a Piece: everything a reading thread needs of its own (an args parser,
// scratch space). It touches nothing shared, so two of them read two pieces at once.
class EventReader : public TextWalker {
 public:
  EventReader(const std::string& path, const TraceReadOptions& options)
      : TextWalker(path), options_(options) {}

  // The events of the array `events` (walked in the text of place()), into `piece`; every
  // `flush_every` events (0: never) `flush(piece)` is called, which joins them to the model
  // and clears the piece.
  void read_events(od::array& events, Piece& piece, std::size_t flush_every,
                   const std::function<void(Piece&)>& flush);

  // A piece of the events array cut out of the text ("[" + events + "]", padded as simdjson
  // needs), parsed by `parser` (whose strings the piece's names then point into, until the
  // parser parses again). What stops it is kept in piece.error, for the merge to throw in
  // the order of the text.
  void read_piece(std::string_view text, std::int64_t offset, od::parser& parser, Piece& piece);

 private:
  // Each is described where it is defined (kineto_events.cpp), which inlines them into the
  // walk of an event as when the reader was one file.
  template <typename Flush>
  void read_each_event(od::array& events, Piece& piece, std::size_t flush_every, Flush&& flush);
  void read_event(od::object& e);

  bool leaves_out(std::string_view ph, std::string_view cat, std::string_view name) const;

  static void reset_gpu(EventDetail& d);

  void note_text_pid(const std::string& text);

  std::int32_t thread_index(const Id& pid, const Id& tid);

  static EventKind kind_of(std::string_view cat, RecordScope& scope);

  std::uint16_t category(std::string_view cat);
  std::uint16_t category_index(std::string_view cat, EventKind kind, RecordScope scope);

  static bool triple_of(std::string_view raw, std::int32_t (&out)[3]);

  bool read_args(std::string_view raw, Event& e, EventDetail& d, bool gpu_side);

  bool read_args_object(od::object& o, Event& e, EventDetail& d, bool gpu_side);

  static void add_other_arg(std::string& other, std::string_view key, std::string_view value);
  std::int32_t keep_other_args(std::string& other);

  void read_arg(simdjson::simdjson_result<od::field>& field, std::string_view& key,
                std::string_view& value_raw);

  std::int32_t add_detail(const EventDetail& d);

  void add_complete(std::string_view cat, EventKind kind, RecordScope scope, std::string_view name,
                    const Id& pid, const Id& tid, std::int64_t ts, std::int64_t dur, Event& e,
                    const EventDetail& d, bool has_detail);

  void add_instant(std::string_view cat, std::string_view name, const Id& pid, const Id& tid,
                   std::int64_t ts, std::string_view args);

  bool read_memory_args(std::string_view raw, Event& e, EventDetail& d);

  void read_metadata_event(std::string_view what, const Id& pid, const Id& tid,
                           std::string_view args);

  void add_meta(Piece::Meta::What what, const Id& pid, std::int32_t thread, std::string_view text,
                std::int64_t number);

  void add_flow_end(char ph, std::string_view cat, const Id& id, std::int32_t thread,
                    std::int64_t ts);

  bool reads_args_of(EventKind kind) const;
  static bool is_flow_phase(std::string_view ph);

  TraceReadOptions options_;
  Piece* piece_ = nullptr;
  std::size_t last_thread_ = 0;  // thread_index()'s last answer, tried first
  od::parser args_parser_;
  std::string other_args_;  // the other args being gathered (read_args_object() and
                            // read_memory_args()), kept by keep_other_args()
  EventDetail detail_;      // read_event()'s, for a complete event's args
};

}  // namespace opscope::import
