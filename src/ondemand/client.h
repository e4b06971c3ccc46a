// Internals of the on-demand client (opscope/ondemand.h) that tests reach directly.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace opscope::ondemand {

// The delay of KINETO_DAEMON_INIT_DELAY_S / OPSCOPE_DAEMON_INIT_DELAY_S: nullopt when unset or
// not a number (as PyTorch's kineto_client_interface.cpp treats it), else the seconds.
std::optional<int> parse_init_delay_s(const char* value);

// Whether the environment opts in (KINETO_USE_DAEMON or OPSCOPE_USE_DAEMON set, not "0").
bool autostart_requested();

// Warns when OPSCOPE_SIGUSR2 is set but the environment does not enable the client that
// reads it (called at load when KINETO_USE_DAEMON and OPSCOPE_USE_DAEMON are unset).
void warn_sigusr2_without_client();

// Where a SIGUSR2 capture goes: `<dir>/opscope_sigusr2_<pid>.json`.
std::string sigusr2_trace_path(const std::string& dir, pid_t pid);

}  // namespace opscope::ondemand
