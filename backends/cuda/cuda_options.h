// cuda_options.h — the `backend.options` the cuda backend accepts.
//
//   device: 0            which CUDA device (cudaGetDeviceCount() numbering)
//   cuda_graphs: true    record single-token decode passes as a CUDA graph
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
#pragma once

#include <cstdint>

#include "duet/options.h"

namespace duet::cuda {

struct CudaOptions {
  int32_t device = 0;
  bool cuda_graphs = true;
  bool pdl = true;
  bool fuse = true;
  bool graph_stats = false;
  int64_t split_attention = 512;
};

// Reads every key above and rejects any other (Options::finish()). Throws
// duet::Error(kConfig) naming the key path and the accepted values. Whether
// `device` exists on this machine is checked when the backend is created.
CudaOptions parse_cuda_options(const Options& options);

}  // namespace duet::cuda
