// What every translation unit of the shim shares: the error convention, handle validation,
// the export macro. The C ABI itself is native/include/rlx.h.
#pragma once
#include "../include/rlx.h"

namespace rlx {

// The thread-local message behind rlx_last_error().
std::string& last_error();

// Whether this build has c10d's NCCL backend (a CUDA libtorch with nccl.h; dist.cpp).
bool nccl_compiled();

// Thrown for bad arguments from the caller (lengths, ids, null pointers); surfaces as the
// message of a NativeError in TypeScript, like every other exception.
struct ArgError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

inline void require(bool ok, const std::string& message) {
  if (!ok) throw ArgError(message);
}

// Live handles. Every object handed out through the ABI is registered here with its kind, and
// every entry point resolves the raw pointer through `get`, so a null, freed or wrong-kind handle
// is an error message, never a segfault that takes the whole Bun process down.
enum class Kind : int { Model = 1, Optimizer = 2, Generator = 3, Group = 4, Receiver = 5 };

void register_handle(const void* p, Kind kind);
void unregister_handle(const void* p, Kind kind);
bool is_live(const void* p, Kind kind);
const char* kind_name(Kind kind);

template <typename T>
T* get(void* handle, Kind kind) {
  if (!handle) throw ArgError(std::string("null ") + kind_name(kind) + " handle");
  if (!is_live(handle, kind))
    throw ArgError(std::string("invalid ") + kind_name(kind) + " handle (freed, or not a " + kind_name(kind) + ")");
  return static_cast<T*>(handle);
}

}  // namespace rlx

#define RLX_API extern "C" __attribute__((visibility("default")))

// Wraps an entry point body: every C++ exception becomes the thread-local message and the
// given error value. Variadic because bodies contain commas.
#define RLX_TRY(onerr, ...)                                                     \
  try {                                                                         \
    rlx::last_error().clear();                                                  \
    __VA_ARGS__                                                                 \
  } catch (const c10::Error& e) {                                               \
    rlx::last_error() = e.what_without_backtrace();                             \
    return onerr;                                                               \
  } catch (const std::exception& e) {                                           \
    rlx::last_error() = e.what();                                               \
    return onerr;                                                               \
  } catch (...) {                                                               \
    rlx::last_error() = "unknown C++ exception";                                \
    return onerr;                                                               \
  }
