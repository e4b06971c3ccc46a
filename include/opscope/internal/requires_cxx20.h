// opscope/internal/requires_cxx20.h: a clear error instead of pages of them when opscope's
// headers are compiled as C++17 or older (g++ 12 defaults to C++17: pass -std=c++20).
#pragma once

#if __cplusplus < 202002L
#error "opscope needs C++20: compile with -std=c++20 (or a later standard)"
#endif
