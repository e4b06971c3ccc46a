// opscope/extension.h: the runtime-embedding calls, over the collector's and the record
// layer's own (their private headers say what each does and costs).
#include "opscope/extension.h"

#include "collect/collector.h"
#include "collect/string_table.h"
#include "record/stack_capture.h"

namespace opscope::extension {

void set_foreign_stack_provider(ForeignStackProvider provider) noexcept {
  record::set_foreign_stack_provider(provider);
}

std::uint32_t intern(std::string_view text) { return collect::intern(text); }
std::string_view interned(std::uint32_t id) { return collect::interned(id); }

void set_thread_name_hook(ThreadNameHook hook) noexcept { collect::set_thread_name_hook(hook); }
void name_this_thread() noexcept { collect::name_this_thread(); }

OwnWorkScope::OwnWorkScope() noexcept { collect::begin_own_work(); }
OwnWorkScope::~OwnWorkScope() { collect::end_own_work(); }

}  // namespace opscope::extension
