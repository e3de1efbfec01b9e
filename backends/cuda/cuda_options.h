// cuda_options.h — the `backend.options` the cuda backend accepts.
//
//   device: 0            which CUDA device (cudaGetDeviceCount() numbering)
//   cuda_graphs: true    record decode passes (one new token per sequence, one
//                        sequence or a batch) as a CUDA graph
//                        and replay it (see forward_pass.h); false runs
//                        every pass kernel by kernel
//   pdl: true            programmatic dependent launch on sm_90 and newer:
//                        each kernel is scheduled while the previous one
//                        finishes; false serialises launches as usual
//   fuse: true           merge neighbouring kernels of a forward pass
//                        (command_fusion.h) and store decode K/V inside the
//                        attention kernel; false launches one kernel per op
//                        (same results, bit for bit: for diagnosis)
//   graph_stats: false   print how many passes ran eagerly, were captured
//                        and were replayed to stderr when the backend ends
//   split_attention: 512 decode attention over more positions than this
//                        splits each row's positions over many blocks and
//                        merges them (flash-decoding, cuda_attention.h);
//                        0 never splits
//   tiled_attention: false  true: prompt chunks of 16 or more rows of one
//                        sequence attend in tiles of 32 rows that share
//                        every K/V row they read (prefill_attention.cu);
//                        false gives every row a block of its own, as
//                        decode rows get (2.4x faster at pp512 on an H200:
//                        the tiles leave most of the device idle)
//   matmul_min_rows: 9   matmuls of fewer rows are matrix-vector products
//                        over the stored weights (gemv.cu: f32, a weight
//                        read once per 8 rows); from this many rows on,
//                        quantized weights are expanded to f16 for cuBLAS
//                        on tensor cores (gemm.h). 9 keeps decode steps of
//                        up to 8 sequences on the gemv
//   batch_invariant: false  true: each row's results, hence a sequence's
//                        logits, are the same bits whatever else is in the
//                        batch (every matmul through the gemv, attention of
//                        one block shape, no split, no tiles): for fidelity checks
//                        and batched-equals-alone tests, at the cost of
//                        prefill and long-context speed. It fixes
//                        matmul_min_rows, split_attention and
//                        tiled_attention, so setting one with it is an error
#pragma once

#include <cstdint>

#include "duet/options.h"
#include "kernel_args.h"

namespace duet::cuda {

struct CudaOptions {
  int32_t device = 0;
  bool cuda_graphs = true;
  bool pdl = true;
  bool fuse = true;
  bool graph_stats = false;
  int64_t split_attention = 512;
  bool tiled_attention = false;
  int64_t matmul_min_rows = kGemvChunkRows + 1;
  bool batch_invariant = false;
};

// Reads every key above and rejects any other (Options::finish()). Throws
// duet::Error(kConfig) naming the key path and the accepted values. Whether
// `device` exists on this machine is checked when the backend is created.
CudaOptions parse_cuda_options(const Options& options);

}  // namespace duet::cuda
