// The pause a spin loop makes each turn: the core's hint that it spins (x86
// PAUSE, AArch64 YIELD; nothing elsewhere).  The host pool's and the shard
// workers' spin-then-sleep loops (host_pool.h, shard_workers.h).
#pragma once

namespace udf::rt {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace udf::rt
