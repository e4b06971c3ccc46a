// Long names (a templated kernel's runs to thousands of bytes) shortened in the middle for a
// table or a chart, so that names distinct in full stay distinct when shortened.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::internal {

// Each of `names` as shown where only `max` bytes fit (max >= 24): a name of up to `max` bytes
// as it is; a longer one as its start, `ellipsis` and its end. When that would show two
// different names alike (split_embedding_backward_..._cta_per_row_1<...> and ..._warp_per_row_1
// <...> share 70 bytes of start and 1,400 of end), those keep, besides their start and end, the
// word where they first differ from each other; names that would still look alike get twice the
// room, and again, up to their whole length.
// A cut never falls inside a UTF-8 sequence. The result has one entry per name, in order.
std::vector<std::string> shortened_names(std::span<const std::string> names, std::size_t max,
                                         std::string_view ellipsis);

}  // namespace opscope::internal
