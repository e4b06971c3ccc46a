// Interned names for ranges with dynamic names.
//
// A dynamic name is copied once into a process-wide append-only table and referred to by id
// afterwards; the text lives until the process exits, so results can hold string_views into
// it. Each thread keeps a small cache of the names it used recently so that a name repeated
// in a loop costs a hash lookup, not a lock.
#pragma once

#include <cstdint>
#include <string_view>

namespace opscope::collect {

// Returns the id of `name`, adding it if new. Thread-safe; takes a lock only for names the
// calling thread has not seen before.
std::uint32_t intern(std::string_view name);

// The text of an id returned by intern(); "<unknown name>" for any other id (a damaged
// record). Thread-safe; the view stays valid forever.
std::string_view interned(std::uint32_t id);

}  // namespace opscope::collect
