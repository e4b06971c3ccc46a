// PieceQueue: the pieces of a trace's events array between the cutter (StreamSplitter) and the
// model (Reader::merge), parsed and joined on one thread or two.
#pragma once

#include <simdjson.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "import/kineto_events.h"
#include "opscope/trace_reader.h"

namespace opscope::import {

// The pieces of the events array between the cutter and the model. The reading thread cuts
// them; they are parsed in that order by whichever thread is free, and joined to the model
// (`join`) in that order by whichever thread is free when the oldest one is parsed: the
// reading thread and, with `helper`, a second one. Joining is a third of the work of a piece
// (most of it the model's fresh pages) and the reading thread alone cuts, so the helper joins
// too: with the reading thread joining every piece, it was the one the read waited for
// (bench/RESULTS.md, 2026-11-28). Each piece has a slot of its own (its text, the parser whose
// strings its names point into, what it read) until it is joined, so at most kSlots pieces are
// held. One join runs at a time (`joining_`); what a join throws (a piece's error) stops the queue,
// and the reading thread throws it.
class PieceQueue {
 public:
  using Join = std::function<void(Piece&)>;
  PieceQueue(const std::string& path, bool helper, const TraceReadOptions& options, Join join);
  ~PieceQueue();
  PieceQueue(const PieceQueue&) = delete;
  PieceQueue& operator=(const PieceQueue&) = delete;

  // Takes a piece the cutter filled ("[" + events + "]" + simdjson's padding; `json_size`
  // bytes of JSON standing at `offset` in the text), swapping buffers with it. With a helper,
  // the reading thread then goes back to cutting, and parses or joins only when every slot is
  // taken (step()); without one, it parses the piece and joins it here.
  void add(std::string& text, std::size_t json_size, std::int64_t offset);

  // Every piece added parsed and joined.
  void finish();

 private:
  // The private functions are described where they are defined (piece_queue.cpp).
  // Each slot's text, parser and piece are fresh memory once, which this machine pays for
  // more than for the wait a fuller queue would spare: 4 slots read the 9.8 MB trace in
  // 10.1 ms, 6 in 10.5, 8 in 10.6, 12 in 11.1, 2 in 12.5 (2026-11-28, 60 interleaved runs).
  static constexpr std::size_t kSlots = 4;
  enum class State { kFree, kCut, kParsing, kParsed };
  struct Slot {
    std::string text;
    std::size_t json_size = 0;
    std::int64_t offset = 0;
    od::parser parser;
    Piece piece;
    State state = State::kFree;
  };
  Slot& slot(std::uint64_t n) const { return *slots_[n % slots_.size()]; }

  bool head_joinable() const;

  void throw_failure() const;

  void step(std::unique_lock<std::mutex>& lock);

  void join_parsed(std::unique_lock<std::mutex>& lock,
                   std::size_t most = std::numeric_limits<std::size_t>::max());

  void parse_next(std::unique_lock<std::mutex>& lock, EventReader& reader);

  void help();

  std::vector<std::unique_ptr<Slot>> slots_;
  Join join_;
  std::uint64_t head_ = 0;     // the oldest piece not joined
  std::uint64_t claimed_ = 0;  // the oldest piece not claimed for parsing
  std::uint64_t tail_ = 0;     // the next piece to come
  bool joining_ = false;       // a thread is joining pieces at the head
  bool stop_ = false;
  std::exception_ptr failure_;  // what a join threw
  std::mutex mutex_;
  std::condition_variable work_;     // the helper waits for pieces
  std::condition_variable changed_;  // the reading thread waits for a parse or a join
  EventReader reader_;               // the reading thread's
  EventReader helper_reader_;
  std::thread helper_;  // last: started when everything it uses is there
};

}  // namespace opscope::import
