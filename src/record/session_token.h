// The session a thread works for, as an opaque token that ThreadLocalState carries.
//
// Thread-limited sessions (the legacy profiler) need more than the collector's membership
// epoch: "is a profiler enabled on this thread?" and "which one?". The session layer above
// stores its own object here; the record layer only keeps it per thread and copies it into
// every ThreadLocalState snapshot, so work handed to a pool thread carries it.
#pragma once

#include <memory>

namespace opscope::record {

// Replaces the calling thread's token (nullptr: none).
void set_thread_session(std::shared_ptr<const void> token);
// The calling thread's token, or nullptr.
const std::shared_ptr<const void>& thread_session();

}  // namespace opscope::record
