// A CUDA event, created on first use.
#pragma once

#include "cuda/cuda_dl.h"

namespace udf::rt {

/// A CUDA event (timing enabled), created on first use.
class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (e_) cuda().cuEventDestroy(e_);
  }
  CUevent get() {
    if (!e_) CU(cuEventCreate, &e_, CU_EVENT_DEFAULT);
    return e_;
  }
  void record(CUstream s) { CU(cuEventRecord, get(), s); }
  /// Waits for the last recorded work (at once when never recorded).
  void sync() {
    if (e_) CU(cuEventSynchronize, e_);
  }
  bool created() const { return e_ != nullptr; }

 private:
  CUevent e_ = nullptr;
};

/// The milliseconds between two recorded events.
inline float elapsed(Event& a, Event& b) {
  float ms = 0;
  CU(cuEventElapsedTime, &ms, a.get(), b.get());
  return ms;
}

}  // namespace udf::rt
