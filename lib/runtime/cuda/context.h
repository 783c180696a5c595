// The driver's context and library handles, owned: a context made current for
// a scope, a loaded CUlibrary unloaded on destruction.
#pragma once

#include <utility>

#include "cuda/cuda_dl.h"

namespace udf::rt {

/// Makes a context current for the scope (push/pop: the caller's current
/// context is restored).
class CtxGuard {
 public:
  explicit CtxGuard(CUcontext c) { CU(cuCtxPushCurrent, c); }
  ~CtxGuard() {
    CUcontext c;
    cuda().cuCtxPopCurrent(&c);
  }
  CtxGuard(const CtxGuard&) = delete;
  CtxGuard& operator=(const CtxGuard&) = delete;
};

/// A loaded library (cuLibraryLoadData), unloaded on destruction.
class Library {
 public:
  Library() = default;
  explicit Library(CUlibrary l) : l_(l) {}
  Library(Library&& o) noexcept : l_(std::exchange(o.l_, nullptr)) {}
  Library& operator=(Library&& o) noexcept {
    if (this != &o) {
      reset();
      l_ = std::exchange(o.l_, nullptr);
    }
    return *this;
  }
  ~Library() { reset(); }
  void reset() noexcept {
    if (l_) cuda().cuLibraryUnload(l_);
    l_ = nullptr;
  }
  CUlibrary get() const { return l_; }

 private:
  CUlibrary l_ = nullptr;
};

}  // namespace udf::rt
