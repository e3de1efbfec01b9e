// kernels/prefetch.h — software prefetches for the kernels that stream
// weights or a KV cache once per step.
//
// The hardware prefetchers follow one sequential stream well but lose it at
// every range a thread claims and lag on interleaved streams, so the
// streaming kernels ask for their next lines themselves: into L1 a little
// ahead and into L2 further ahead. A prefetch never faults, so one past the
// end of a buffer is harmless.
//
// Internal to the onednn backend's kernels; portable (GCC's
// __builtin_prefetch), whatever the file's instruction set.
#pragma once

#include <cstdint>

namespace duet::onednn::detail {

// Where a prefetch brings its lines: __builtin_prefetch's locality,
// prefetcht0 and prefetcht1.
enum class CacheLevel { kL1 = 3, kL2 = 2 };

// Asks for the cache lines of [p, p + bytes) at `level`.
template <CacheLevel kLevel>
inline void prefetch_lines(const uint8_t* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, static_cast<int>(kLevel));
}

// Asks L2 for the first line of each 4 KiB page that starts in
// [p, p + bytes), bytes ≥ 0 (nothing when no page starts there); the L2
// streamer, which follows a stream within a page, then brings in the rest
// of the page itself. For the decode attention kernels, which read a cache
// front to back: one prefetch per page a little way ahead instead of one
// per line, each of which holds a fill buffer until its line arrives
// (measured in kernels/attend_avx512.cc).
inline void prefetch_pages(const uint8_t* p, int64_t bytes) {
  constexpr uintptr_t kPage = 4096;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t page = (begin + kPage - 1) & ~(kPage - 1); page < begin + bytes; page += kPage) {
    __builtin_prefetch(reinterpret_cast<const void*>(page), 0, static_cast<int>(CacheLevel::kL2));
  }
}

// The distances, in bytes, at which a thread reading a weight matrix front
// to back (row tiles, K-quant rows) prefetches: into L1 kStreamL1Ahead on,
// into L2 kStreamL2Ahead on. On the Xeon with AMX of 2026-12-05, 2 threads,
// alternated runs: the L1 prefetch alone decoded SmolLM2 Q4_1 at 246-252
// t/s and the 1B-shaped Q4_K_M at 28.1; with the L2 one, 289-308 and
// 30.9-31.5 (an L2 distance of 16 KiB did as well), batches of 2 and 4 rows
// 15-25% and 5% faster, 8 rows level, SmolLM2 Q6_K's K-quant rows +2%,
// Gemma 3 270M level; one L1 prefetch 8 KiB ahead instead, SmolLM2 277-285
// but the 1B file 25.4-26.5 and batches of 4 and 8 rows 5-6% slower.
// (Earlier, L1 prefetches alone: the hardware prefetchers left the 1B
// file's decode at 14-15 tok/s, 1 KiB ahead 17-18, 2-8 KiB 18.6-20.7.)
inline constexpr int64_t kStreamL1Ahead = 2048;
inline constexpr int64_t kStreamL2Ahead = 8192;

// The `bytes` a stream reads next from p, at both distances.
inline void prefetch_stream(const uint8_t* p, int64_t bytes) {
  prefetch_lines<CacheLevel::kL1>(p + kStreamL1Ahead, bytes);
  prefetch_lines<CacheLevel::kL2>(p + kStreamL2Ahead, bytes);
}

// For a kernel that reads R rows' blocks side by side and prefetches one
// pass (R rows' worth of bytes) ahead into L1: the L2 distance beside it, whole
// passes, about 8 KiB, at least two. On the Xeon with AMX of 2026-12-05,
// 2 threads, alternated tg128 runs: SmolLM2 Q4_1 (its q8_0 LM head, 2,448
// bytes a pass of 4 rows) decoded 254-275 t/s without it and 276-290 with
// it; Gemma 3 270M (a 178 MB q8_0 LM head from DRAM) and the 1B-shaped
// Q4_K_M stayed level. An L1 prefetch three passes ahead instead gained as
// much on SmolLM2 but cost Gemma 6%.
inline int64_t far_prefetch_bytes(int64_t pass_bytes) {
  constexpr int64_t kFarBytes = 8192;
  const int64_t passes = kFarBytes / pass_bytes;
  return (passes > 2 ? passes : 2) * pass_bytes;
}

}  // namespace duet::onednn::detail
