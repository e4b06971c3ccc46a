// opscope/internal/tls.h: the TLS model of opscope's hot thread_locals.
//
// initial-exec (the default) reaches a thread_local with one %fs-relative load, which the
// range hot path relies on. Its price: a shared object with initial-exec TLS must be loaded at
// program start (linked in, or LD_PRELOADed). One loaded later with dlopen has to fit its TLS
// into the few hundred bytes glibc keeps spare for that, and opscope's ~4 KB do not ("cannot
// allocate memory in static TLS block"). A library that is dlopen'ed, such as the Python
// extension (python/CMakeLists.txt) or a plugin, compiles opscope with
//
//   -DOPSCOPE_TLS_MODEL="global-dynamic"
//
// which allocates each thread's block on first use and costs a __tls_get_addr call per access.
// Every translation unit of one copy of the library must agree, as must code that includes
// the headers that declare these variables (collector.h, module.h).
#pragma once

#ifndef OPSCOPE_TLS_MODEL
#define OPSCOPE_TLS_MODEL "initial-exec"
#endif
