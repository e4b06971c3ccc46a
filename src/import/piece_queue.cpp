// PieceQueue (piece_queue.h): pieces parsed and joined in the order of the text.
#include "import/piece_queue.h"

#include <pthread.h>

#include <utility>

#include "util/thread_start.h"

namespace opscope::import {

PieceQueue::PieceQueue(const std::string& path, bool helper, const TraceReadOptions& options,
                       Join join)
    : slots_(helper ? kSlots : 1),
      join_(std::move(join)),
      reader_(path, options),
      helper_reader_(path, options) {
  for (auto& s : slots_) s = std::make_unique<Slot>();
  if (helper) helper_ = util::start_thread_beside([this] { help(); });
}

PieceQueue::~PieceQueue() {
  if (!helper_.joinable()) return;
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  helper_.join();
}

void PieceQueue::add(std::string& text, std::size_t json_size, std::int64_t offset) {
  std::unique_lock lock(mutex_);
  while (tail_ - head_ == slots_.size()) step(lock);
  throw_failure();
  Slot& s = slot(tail_);
  s.text.swap(text);
  s.json_size = json_size;
  s.offset = offset;
  s.state = State::kCut;
  ++tail_;
  if (helper_.joinable()) {
    work_.notify_one();
  } else {
    parse_next(lock, reader_);
    join_parsed(lock);
    throw_failure();
  }
}

void PieceQueue::finish() {
  std::unique_lock lock(mutex_);
  while (head_ != tail_) step(lock);
  throw_failure();
}

inline bool PieceQueue::head_joinable() const {
  return !joining_ && failure_ == nullptr && head_ != tail_ && slot(head_).state == State::kParsed;
}

inline void PieceQueue::throw_failure() const {
  if (failure_ != nullptr) std::rethrow_exception(failure_);
}

// The reading thread's progress towards freeing a slot: joins the head when it is parsed
// and nobody is joining, else parses the next unclaimed piece here, else waits for the
// helper to parse or join. One piece at a time: the cutting, which only this thread does,
// goes on as soon as a slot is free, so that the helper always has a piece to take.
inline void PieceQueue::step(std::unique_lock<std::mutex>& lock) {
  throw_failure();
  if (head_joinable()) {
    join_parsed(lock, 1);
  } else if (claimed_ != tail_) {
    parse_next(lock, reader_);
  } else {
    const std::uint64_t head = head_;
    changed_.wait(lock, [&] { return failure_ != nullptr || head_ != head || head_joinable(); });
  }
}

// Joins the parsed pieces at the head, in order (at most `most` of them), and frees their
// slots; the lock is let go while a piece is joined. What a join throws is kept in failure_.
inline void PieceQueue::join_parsed(std::unique_lock<std::mutex>& lock, std::size_t most) {
  if (!head_joinable() || stop_) return;
  joining_ = true;
  for (; most > 0 && head_ != tail_ && slot(head_).state == State::kParsed && !stop_; --most) {
    Slot& s = slot(head_);
    lock.unlock();
    std::exception_ptr failed;
    try {
      join_(s.piece);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    if (failed != nullptr) {
      failure_ = failed;
      break;
    }
    s.state = State::kFree;
    ++head_;
    changed_.notify_all();
  }
  joining_ = false;
  changed_.notify_all();
}

// The oldest piece not yet claimed, parsed by `reader` without the lock.
inline void PieceQueue::parse_next(std::unique_lock<std::mutex>& lock, EventReader& reader) {
  Slot& s = slot(claimed_++);
  s.state = State::kParsing;
  lock.unlock();
  reader.read_piece(std::string_view(s.text.data(), s.json_size), s.offset, s.parser, s.piece);
  lock.lock();
  s.state = State::kParsed;
  changed_.notify_all();
}

// The helper: parses pieces as they come, and joins what is parsed at the head, until
// stopped or a join fails.
inline void PieceQueue::help() {
  pthread_setname_np(pthread_self(), "opscope-parse");
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || failure_ != nullptr || claimed_ != tail_; });
    if (stop_ || failure_ != nullptr) return;
    parse_next(lock, helper_reader_);
    join_parsed(lock);
  }
}

}  // namespace opscope::import
