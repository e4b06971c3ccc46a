// This process's name, as the kernel keeps it (/proc/self/comm): what Kineto names a trace's
// processes with, and so what opscope's traces do.
#pragma once

#include <string>

namespace opscope::util {

// "python3.10", "train"; empty when /proc cannot be read.
std::string program_name();

}  // namespace opscope::util
