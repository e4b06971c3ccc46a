// StreamSplitter: the events array of a Chrome trace cut out of its text as the text comes, in
// pieces of whole events that are read apart (EventReader::read_piece) while the cutting goes
// on. A template over what takes the pieces, and inline: the cut is the one part of a read that
// only one thread does, and the byte walk is kept a tight loop in the caller's code.
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "import/event_blocks.h"

namespace opscope::import {

// The events array of a Chrome trace cut out of its text as the text comes, in pieces that end
// between two events: a byte-level walk that knows strings, escapes and nesting, nothing more
// (simdjson checks each piece). What is not the events (the top-level keys around them) is kept
// apart, the array emptied, to be read when the events are.
class StreamSplitter {
 public:
  // `array_key`: the top-level key whose array is cut; "traceEvents" but for a sniff
  // (refused_formats.cpp) that asks only whether the text opens such an array.
  explicit StreamSplitter(std::size_t batch_bytes, std::string_view array_key = "traceEvents")
      : batch_bytes_(batch_bytes), array_key_(array_key) {}

  // Takes the next bytes of the text; calls on_events(text, json_size, offset) for each piece
  // of the events ready: "[" + whole events separated by commas + "]" (json_size bytes),
  // followed by simdjson's padding, and the offset in the whole text that text[0] stands for.
  // on_events may swap the string for another buffer (the next piece is gathered in that).
  template <typename OnEvents>
  void feed(std::string_view chunk, OnEvents&& on_events) {
    const char* const data = chunk.data();
    const std::size_t n = chunk.size();
    std::size_t seg = 0;  // where the events text not yet copied starts in this chunk
    std::size_t i = 0;
    while (i < n) {
      if (where_ != Where::kEvents) {
        const char c = data[i];
        rest_.push_back(c);
        if (walk_outside(c)) {  // the events array opens after this '['
          where_ = Where::kEvents;
          depth_ = 2;
          events_offset_ = consumed_ + static_cast<std::int64_t>(i) + 1;
          seg = i + 1;
        }
        ++i;
        continue;
      }
      i = walk_events(data, n, i, seg, on_events);
    }
    if (where_ == Where::kEvents) events_.append(data + seg, n - seg);
    consumed_ += static_cast<std::int64_t>(n);
  }

  // True when the events array opened and closed.
  bool complete() const { return where_ == Where::kAfter; }
  // The events gathered since the last piece ("[" + their text), and the offset in the whole
  // text that its first byte stands for: what a text that ends inside the events array left.
  std::string_view pending() const { return events_; }
  std::int64_t pending_offset() const { return events_offset_ - 1; }
  // The bytes of text fed so far.
  std::int64_t consumed() const { return consumed_; }
  // Where a comma of the events array had no event before it (",," or "[,") or after it
  // ("},]"), between two pieces; -1 when none. A piece is checked whole (check_json), so such a
  // comma within one is refused there; one that a cut fell on leaves an empty piece, which
  // only this records.
  std::int64_t stray_comma() const { return stray_comma_; }
  // True when the events array opened.
  bool opened() const { return where_ != Where::kBefore; }
  // The text without the events ("traceEvents": []): what came before them, up to and with
  // the '[', and what came after, from the ']'.
  const std::string& rest() const { return rest_; }
  // Where the part after the events starts in rest(), and how much further on it stood in the
  // text.
  std::int64_t split_at() const { return split_at_; }
  std::int64_t split_shift() const { return suffix_offset_ - split_at_; }
  // The bytes of the piece being gathered (whole events up to the piece's size, then the one
  // that crosses it), and the text offset it starts at: what TraceLimits::max_event_bytes
  // is checked against (consumed(), above, is how much text was fed).
  std::size_t gathering() const { return events_.size(); }
  std::int64_t gathering_from() const { return events_offset_; }

 private:
  enum class Where { kBefore, kEvents, kAfter };

  // The events array from data[i] on: cuts between events, hands full pieces to on_events,
  // and returns where the walk stopped (n, or just past the ']' that closes the array). The
  // text goes 64 bytes at a time. Until a cut is due, skip_event_blocks() walks the blocks
  // with no backslash and no ']' that could close the array (nearly all), counting their
  // brackets. Another block has which bytes lie in strings computed for the whole block at
  // once, and only its brackets (and its commas, once a cut is due) visited one by one; one
  // with a backslash, and the tail of the chunk, go byte by byte (walk_bytes). The state lives
  // in locals, so that the loop keeps it in registers.
  template <typename OnEvents>
  std::size_t walk_events(const char* data, std::size_t n, std::size_t i, std::size_t& seg,
                          OnEvents& on_events) {
    Walk w{in_string_, escaped_, depth_};
    std::size_t closed_at = n;  // where the ']' closing the array stands, when it came
    std::size_t cut = n;        // where the comma of a cut stands
    while (i < n && closed_at == n) {
      const std::size_t filled = events_.size() + (i - seg);
      if (filled < batch_bytes_ && !w.escaped) {
        // Up to where a cut falls due, the blocks with nothing in them to stop for are
        // walked whole (skip_event_blocks); this loop goes on from the first that has.
        BlockWalk quick{w.in_string, w.depth};
        i = skip_event_blocks(data, i, std::min(n, i + (batch_bytes_ - filled)), quick);
        w.in_string = quick.in_string;
        w.depth = quick.depth;
      }
      const bool cut_due = events_.size() + (i - seg) >= batch_bytes_;
      if (n - i >= 64 && !w.escaped) {
        const BlockMasks b = block_masks(data + i, cut_due);
        if (b.backslash == 0) {
          const std::uint64_t in_string = prefix_xor(b.quote) ^ (w.in_string ? ~0ULL : 0);
          w.in_string = (in_string >> 63) != 0;
          // The brackets, and the commas once a cut is due, in order.
          std::uint64_t marks = (b.open | b.close | (cut_due ? b.comma : 0)) & ~in_string;
          for (; marks != 0; marks &= marks - 1) {
            const std::size_t at = i + static_cast<std::size_t>(std::countr_zero(marks));
            if (w.step(data[at]) != Walk::kNothing) {
              (data[at] == ',' ? cut : closed_at) = at;
              break;
            }
          }
          if (cut != n || closed_at != n) {
            w.in_string = false;  // a cut's comma and the closing ']' lie outside strings
            i = (cut != n ? cut : closed_at);
          } else {
            i += 64;
          }
        } else {
          i = walk_bytes(data, i, i + 64, w, cut_due, cut, closed_at);
        }
      } else {
        i = walk_bytes(data, i, std::min(n, i + 64), w, cut_due, cut, closed_at);
      }
      if (cut != n) {
        events_.append(data + seg, cut - seg);
        flush(on_events, consumed_ + static_cast<std::int64_t>(cut), true);
        seg = cut + 1;
        events_offset_ = consumed_ + static_cast<std::int64_t>(seg);
        i = seg;
        cut = n;
      }
    }
    in_string_ = w.in_string;
    escaped_ = w.escaped;
    depth_ = w.depth;
    if (closed_at == n) return n;
    // The events array closes: the last piece, then the text after it.
    events_.append(data + seg, closed_at - seg);
    flush(on_events, consumed_ + static_cast<std::int64_t>(closed_at), false);
    where_ = Where::kAfter;
    split_at_ = static_cast<std::int64_t>(rest_.size());
    suffix_offset_ = consumed_ + static_cast<std::int64_t>(closed_at);
    rest_.push_back(']');
    return closed_at + 1;
  }

  // The walk's state between bytes.
  struct Walk {
    bool in_string;
    bool escaped;
    int depth;
    enum Step { kNothing, kCut, kClosed };
    // A byte outside strings that is a bracket or a comma: kCut for a comma between two events
    // (depth 2), kClosed for the ']' that closes the events array.
    Step step(char c) {
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}') {
        --depth;
      } else if (c == ']') {
        if (--depth == 1) return kClosed;
      } else if (c == ',' && depth == 2) {
        return kCut;
      }
      return kNothing;
    }
  };

  // Bytes [i, stop) one by one; stops early at a cut (when `cut_due`) or at the array's close,
  // and says where in `cut` or `closed_at`. Returns where it stopped.
  static std::size_t walk_bytes(const char* data, std::size_t i, std::size_t stop, Walk& w,
                                bool cut_due, std::size_t& cut, std::size_t& closed_at) {
    for (; i < stop; ++i) {
      const char c = data[i];
      if (w.in_string) {
        if (w.escaped) {
          w.escaped = false;
        } else if (c == '\\') {
          w.escaped = true;
        } else if (c == '"') {
          w.in_string = false;
        }
        continue;
      }
      if (c == '"') {
        w.in_string = true;
        continue;
      }
      if (c == ',' && !cut_due) continue;
      switch (w.step(c)) {
        case Walk::kCut:
          cut = i;
          return i;
        case Walk::kClosed:
          closed_at = i;
          return i;
        case Walk::kNothing:
          break;
      }
    }
    return i;
  }

  // Not inlined into feed(): the byte walk stays a small loop of its own (with the reading of a
  // piece inlined into it, the walk ran 30 % slower).
  // `end`: the text offset of the comma (`at_comma`) or ']' that ends the piece.
  template <typename OnEvents>
  [[gnu::noinline]] void flush(OnEvents&& on_events, std::int64_t end, bool at_comma) {
    const bool empty = events_.find_first_not_of(" \t\r\n", 1) == std::string::npos;
    // An empty piece is an empty array ("[ ]") unless a comma stands before or after it.
    if (empty && (at_comma || cut_before_) && stray_comma_ < 0) stray_comma_ = end;
    cut_before_ = at_comma;
    if (!empty) {
      // The piece as an array of its own, padded as simdjson needs; the buffer is kept for
      // the next piece, so its memory is written fresh once.
      events_.push_back(']');
      const std::size_t size = events_.size();
      events_.append(simdjson::SIMDJSON_PADDING, '\0');
      on_events(events_, size, events_offset_ - 1);  // which may take the buffer, giving another
    }
    events_.assign(1, '[');
    // Room for the whole piece (its last event crosses the nominal size; then the padding),
    // so that the buffer is not moved, and more fresh pages written, as the piece grows.
    events_.reserve(batch_bytes_ + batch_bytes_ / 8 + simdjson::SIMDJSON_PADDING);
  }

  // Outside the events: follows strings and nesting to find the top-level key "traceEvents"
  // whose value is an array; returns true on that array's '['.
  bool walk_outside(char c) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 1 && expect_key_) {
          key_ = rest_.substr(key_start_, rest_.size() - 1 - key_start_);
        }
      }
      return false;
    }
    if (events_next_ && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      events_next_ = false;
      if (c == '[' && where_ == Where::kBefore) return true;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        key_start_ = rest_.size();
        break;
      case '{':
      case '[':
        if (++depth_ == 1) expect_key_ = true;
        break;
      case '}':
      case ']':
        --depth_;
        break;
      case ',':
        if (depth_ == 1) expect_key_ = true;
        break;
      case ':':
        if (depth_ == 1) {
          expect_key_ = false;
          events_next_ = key_ == array_key_;
        }
        break;
      default:
        break;
    }
    return false;
  }

  std::size_t batch_bytes_;
  std::string_view array_key_;
  Where where_ = Where::kBefore;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  bool expect_key_ = false;
  bool events_next_ = false;
  std::size_t key_start_ = 0;
  std::string key_;
  std::string rest_;
  std::string events_ = "[";        // the piece being gathered, after a '[' of its own
  std::int64_t events_offset_ = 0;  // the text offset of events_[1]
  std::int64_t consumed_ = 0;       // bytes of text before the chunk being fed
  std::int64_t suffix_offset_ = 0;
  std::int64_t split_at_ = INT64_MAX;
  bool cut_before_ = false;         // the piece being gathered follows a comma
  std::int64_t stray_comma_ = -1;
};

}  // namespace opscope::import
