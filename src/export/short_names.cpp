// shortened_names(): see short_names.h.
#include "export/short_names.h"

#include <algorithm>
#include <map>
#include <set>

namespace opscope::internal {
namespace {

bool continuation(std::string_view s, std::size_t i) {
  return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
}

// The start of the character at or before byte i, and at or after it.
std::size_t char_before(std::string_view s, std::size_t i) {
  while (i > 0 && continuation(s, i)) --i;
  return i;
}
std::size_t char_after(std::string_view s, std::size_t i) {
  while (continuation(s, i)) ++i;
  return i;
}

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         (static_cast<unsigned char>(c) & 0x80) != 0;
}

// Start and end around the ellipsis: the start gets three fifths of the room, as the text
// tables always cut (60 bytes of a 100-byte cell).
std::string plain(std::string_view s, std::size_t max, std::string_view ellipsis) {
  const std::size_t room = max - ellipsis.size();
  const std::size_t head = char_before(s, max * 3 / 5);
  const std::size_t tail = char_after(s, s.size() - (room - max * 3 / 5));
  return std::string(s.substr(0, head)) + std::string(ellipsis) + std::string(s.substr(tail));
}

// `s` cut so that byte `at` (where it first differs from a name that looks alike) and the rest
// of the word there stay: the start runs to the end of that word when that leaves ten
// bytes for the end; otherwise the word comes as a third piece between two ellipses.
std::string keeping(std::string_view s, std::size_t at, std::size_t max,
                    std::string_view ellipsis) {
  if (at >= s.size()) return plain(s, max, ellipsis);  // the name ends there: its end shows
  std::size_t word_end = at + 1;
  while (word_end < s.size() && word_char(s[word_end])) ++word_end;
  const std::size_t room = max - ellipsis.size();
  constexpr std::size_t kMinTail = 10;
  if (word_end + kMinTail <= room) {
    const std::size_t head = char_before(s, std::max(word_end, max * 3 / 5));
    const std::size_t tail = char_after(s, s.size() - (room - std::max(word_end, max * 3 / 5)));
    return std::string(s.substr(0, head)) + std::string(ellipsis) + std::string(s.substr(tail));
  }
  const std::size_t room3 = max - 2 * ellipsis.size();
  const std::size_t head = room3 / 4, tail = room3 / 4, window = room3 - head - tail;
  if (at >= s.size() - tail) return plain(s, max, ellipsis);
  // The window starts at the word's start (within half the window before `at`).
  std::size_t from = at;
  while (from > head && at - from < window / 2 && word_char(s[from - 1])) --from;
  from = char_before(s, std::max(from, head));
  const std::size_t to = char_before(s, std::min(from + window, s.size() - tail));
  return std::string(s.substr(0, char_before(s, head))) + std::string(ellipsis) +
         std::string(s.substr(from, to - from)) + std::string(ellipsis) +
         std::string(s.substr(char_after(s, s.size() - tail)));
}

std::size_t common_prefix(std::string_view a, std::string_view b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<std::size_t>(ia - a.begin());
}

}  // namespace

std::vector<std::string> shortened_names(std::span<const std::string> names, std::size_t max,
                                         std::string_view ellipsis) {
  max = std::max<std::size_t>(max, 24);
  // Each distinct name once, with its plain shortening.
  std::map<std::string_view, std::string> shown;
  for (const std::string& n : names) {
    if (!shown.contains(n)) shown.emplace(n, n.size() <= max ? n : plain(n, max, ellipsis));
  }
  // Names that look alike (or one like another's full name) keep where each first differs from
  // its nearest in the group (sorted, the nearest is a neighbour); while some still look alike,
  // they get twice the room, until whole names, which are distinct, are all that is left.
  for (std::size_t room = max;;) {
    std::map<std::string_view, std::set<std::string_view>> alike;
    for (const auto& [n, s] : shown) alike[s].insert(n);
    for (const auto& [n, s] : shown) {
      if (s != n && alike.contains(n)) alike[n].insert(n);  // n's full name shown for another
    }
    std::vector<std::vector<std::string_view>> groups;
    for (const auto& [s, group] : alike) {
      if (group.size() > 1) groups.emplace_back(group.begin(), group.end());
    }
    if (groups.empty()) break;
    std::map<std::string_view, std::string> next;
    for (const std::vector<std::string_view>& sorted : groups) {
      for (std::size_t i = 0; i < sorted.size(); ++i) {
        if (sorted[i].size() <= room) {
          next[sorted[i]] = std::string(sorted[i]);
          continue;
        }
        std::size_t at = 0;
        if (i > 0) at = std::max(at, common_prefix(sorted[i - 1], sorted[i]));
        if (i + 1 < sorted.size()) at = std::max(at, common_prefix(sorted[i], sorted[i + 1]));
        next[sorted[i]] = keeping(sorted[i], at, room, ellipsis);
      }
    }
    for (auto& [n, s] : next) shown[n] = std::move(s);
    room *= 2;
  }
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const std::string& n : names) out.push_back(shown[n]);
  return out;
}

}  // namespace opscope::internal
