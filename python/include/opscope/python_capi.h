/* opscope/python_capi.h: ranges from a C or C++ Python extension, into the session of the
 * opscope Python package, without linking opscope.
 *
 * The package's native module (opscope._C) holds the one opscope of the process that its
 * profile objects drive. An extension with its own static copy of libopscope would record
 * into a session nobody starts; instead it takes opscope._C's functions from a capsule:
 *
 *   #include "opscope/python_capi.h"
 *
 *   static const OpscopeCApi* opscope_api;      // in the module's init, with the GIL:
 *   opscope_api = opscope_capi_import();         // NULL (and an ImportError) without opscope
 *
 *   void worker(void) {                          // any thread, no GIL needed
 *     OpscopeRange* r = opscope_api->range_begin("decode", 6, OPSCOPE_CAPI_USER_SCOPE);
 *     decode();
 *     opscope_api->range_end(r);
 *   }
 *
 * Ranges of C++ threads land in the session the Python code started, like those of Python
 * threads. Only this header is needed (it is installed next to the package's _C.pyi).
 */
#ifndef OPSCOPE_PYTHON_CAPI_H_
#define OPSCOPE_PYTHON_CAPI_H_

#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OPSCOPE_CAPI_CAPSULE "opscope._C._C_API"
/* Raised when a function is added; fields are never removed or reordered. */
#define OPSCOPE_CAPI_VERSION 1

/* The scope of a range: an operator ("cpu_op" in traces) or a user annotation. */
#define OPSCOPE_CAPI_FUNCTION 0
#define OPSCOPE_CAPI_USER_SCOPE 7

typedef struct OpscopeRange OpscopeRange; /* opaque */

typedef struct OpscopeCApi {
  uint32_t version; /* OPSCOPE_CAPI_VERSION of the opscope that made it */
  uint32_t size;    /* sizeof(OpscopeCApi) there */
  /* Begins a range named by `name` (`name_len` bytes of UTF-8, copied) with `scope`
   * (OPSCOPE_CAPI_FUNCTION or OPSCOPE_CAPI_USER_SCOPE). Returns NULL when nothing records:
   * then it cost one relaxed load. Any thread; the GIL is neither needed nor taken. */
  OpscopeRange* (*range_begin)(const char* name, size_t name_len, int scope);
  /* Ends a range (on any thread; ending on another thread makes it an async range) and
   * frees it. NULL does nothing. */
  void (*range_end)(OpscopeRange* range);
} OpscopeCApi;

/* The API of the imported opscope package, or NULL with a Python exception set. Call with
 * the GIL held, once (in the extension's module init). */
static inline const OpscopeCApi* opscope_capi_import(void) {
  return (const OpscopeCApi*)PyCapsule_Import(OPSCOPE_CAPI_CAPSULE, 0);
}

#ifdef __cplusplus
}
#endif

#endif /* OPSCOPE_PYTHON_CAPI_H_ */
