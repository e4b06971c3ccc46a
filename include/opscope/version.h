// opscope/version.h: the version of the opscope library a program runs with.
//
//   std::cout << "opscope " << opscope::version() << "\n";   // "0.1.0"
#pragma once

namespace opscope {

// The library's version ("MAJOR.MINOR.PATCH"), from the libopscope the program loaded, which
// may be newer than the headers it was compiled with. Never null; thread-safe.
const char* version() noexcept;

}  // namespace opscope
