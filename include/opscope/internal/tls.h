// opscope/internal/tls.h: the TLS model of opscope's hot thread_locals (t_ctx, t_module), as
// code that includes opscope's headers reaches them.
//
// initial-exec (the default) reaches a thread_local with one %fs-relative load (through the GOT
// when the variable lives in libopscope.so), which the range hot path relies on. Its price: the
// code using it must be loaded at program start (the program itself, a library it links, or an
// LD_PRELOAD). A module loaded later with dlopen that includes these headers, such as the
// Python extension (python/CMakeLists.txt) or a plugin, compiles with
//
//   -DOPSCOPE_TLS_MODEL="global-dynamic"
//
// (with -mtls-dialect=gnu2 its accesses cost a descriptor call, cheap once resolved). The
// library itself is always built that way (src/CMakeLists.txt), so libopscope.so can be loaded
// either way; the two models refer to the same variables and may be mixed freely.
#pragma once

#ifndef OPSCOPE_TLS_MODEL
#define OPSCOPE_TLS_MODEL "initial-exec"
#endif
