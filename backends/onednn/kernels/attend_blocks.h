// kernels/attend_blocks.h — how the decode attention kernels walk a run of
// cache rows: blocks of kBlock positions, each after prefetching the rows
// ahead of it. Shared by the AVX-512 and AVX2 halves (attend_avx512.h,
// attend_avx2.h); a template, so each instruction set's file has its own
// instances. Internal to the onednn backend's kernels.
#pragma once

#include <algorithm>
#include <cstdint>

#include "duet/dtype.h"
#include "kernels/cpu_features.h"
#include "kernels/prefetch.h"

namespace duet::onednn::detail {

// Calls body.template operator()<T>() with T the cache's element type:
// f16, q8_0, or (any other) f32.
template <class Body>
__attribute__((always_inline)) inline void with_cache_type(DType type, const Body& body) {
  switch (type) {
    case DType::kF16:
      return body.template operator()<DType::kF16>();
    case DType::kQ8_0:
      return body.template operator()<DType::kQ8_0>();
    default:
      return body.template operator()<DType::kF32>();
  }
}

// How the decode kernels prefetch the cache rows ahead of them. Two schemes:
//   pages: ask L2 for the first line of each 4 KiB page ahead
//          (prefetch_pages) and let the L2 streamer bring the rest of the
//          page, and fetch the next block into L1 line by line;
//   lines: ask L2 for every line ahead and leave L1 to the hardware.
// `attend_bench` f16, one thread, 30 layers of 2,048 positions streamed: on
// the Xeon with AMX of 2026-12-05, pages 3.15-3.27 ms against every line of
// the block four on (with the L1 prefetch) 3.54-3.67, and in the model
// (SmolLM2, 2 threads, decode at 1,919 cached tokens, six pairs) +3.4%; on
// the Zen 4 EPYC of 2026-12-06 (lscpu family 25 model 17), whose L2 does
// not carry a page on, pages 6.99-7.15 ms, every line 16 KiB on with the
// L1 prefetch 4.07-5.55, lines 3.53-3.96 (8 to 64 KiB on measured level),
// and in the model (2 threads, `duet bench configs/smollm2-onednn.yaml -n
// 64 --depth 1919 -r 3 --tests tg`, plugins alternated) 132.9-137.8 t/s
// with pages, 146.6-153.3 with every line and the L1 prefetch (four pairs),
// 149.7 / 170.0 / 167.8 / 152.9 with lines against 143.0 / 163.0 / 148.7 /
// 157.7 for that. Asking at the start of a pass also for the rows before
// the distance (a decode row's positions are split into stretches, each a
// pass of its own) is a small gain: 176.4 / 183.7 / 183.3 / 182.1 against
// 162.6 / 163.9 / 163.5 / 181.6, then three pairs with depth 0 between
// them mixed (152-167 against 150-163), and side by side, one thread each
// (bench/ab_plugins.sh, two rounds), 1.051 / 1.027 / 0.946 / 1.024 times
// without. (Also asking for the values' first rows before the scores:
// 157-169 against 166-171, not kept.) So: lines where
// 512-bit operations run on split units (avx512_split_units(): the Zen 4
// measured), pages elsewhere — for the AVX2 kernels too, whose CPUs were
// not measured apart (on the Zen 4 with the AVX2 path forced, lines).

// Calls fn(block, first, m) for the blocks of m ≤ kBlock positions of the n rows
// at base (rows `stride_bytes` apart, of which `row_bytes` are read), each
// after prefetching the rows from kL2Ahead bytes
// past this block (at least two blocks on): every line of kBlock rows'
// `row_bytes` (and, before the first block, of the rows up to there), or
// the first line of each page in their bytes up to the last byte the n
// rows read and the next block into L1.
template <int64_t kBlock, class Fn>
void for_each_block(const uint8_t* base, int64_t n, int64_t stride_bytes, int64_t row_bytes,
                    const Fn& fn) {
  constexpr int64_t kL2Ahead = 16384;
  const int64_t block_bytes = kBlock * stride_bytes;
  const int64_t distance = std::max(kL2Ahead, 2 * block_bytes);
  const int64_t extent = n > 0 ? (n - 1) * stride_bytes + row_bytes : 0;
  const bool lines = avx512_split_units();
  const int64_t ahead_rows = (distance + stride_bytes - 1) / stride_bytes;
  if (lines) {
    // The rows before the first block's prefetch reaches them, all asked
    // for at once rather than each on demand.
    for (int64_t r = 0; r < std::min(ahead_rows, n); ++r) {
      prefetch_lines<CacheLevel::kL2>(base + r * stride_bytes, row_bytes);
    }
  }
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const uint8_t* block = base + i0 * stride_bytes;
    if (lines) {
      for (int64_t r = i0 + ahead_rows; r < std::min(i0 + ahead_rows + kBlock, n); ++r) {
        prefetch_lines<CacheLevel::kL2>(base + r * stride_bytes, row_bytes);
      }
    } else {
      for (int64_t r = kBlock; r < std::min(2 * kBlock, n - i0); ++r) {
        prefetch_lines<CacheLevel::kL1>(block + r * stride_bytes, row_bytes);
      }
      const int64_t ahead = i0 * stride_bytes + distance;
      if (ahead < extent) prefetch_pages(base + ahead, std::min(block_bytes, extent - ahead));
    }
    fn(block, i0, std::min(kBlock, n - i0));
  }
}

}  // namespace duet::onednn::detail
