#include "cuda_options.h"

#include <string>

#include "duet/error.h"

namespace duet::cuda {

CudaOptions parse_cuda_options(const Options& options) {
  CudaOptions o;
  o.device = static_cast<int32_t>(options.get_int("device", o.device, 0, 1023));
  o.cuda_graphs = options.get_bool("cuda_graphs", o.cuda_graphs);
  o.pdl = options.get_bool("pdl", o.pdl);
  o.fuse = options.get_bool("fuse", o.fuse);
  o.graph_stats = options.get_bool("graph_stats", o.graph_stats);
  o.split_attention = options.get_int("split_attention", o.split_attention, 0, int64_t{1} << 30);
  o.tiled_attention = options.get_bool("tiled_attention", o.tiled_attention);
  o.matmul_min_rows = options.get_int("matmul_min_rows", o.matmul_min_rows, 1, int64_t{1} << 30);
  o.batch_invariant = options.get_bool("batch_invariant", o.batch_invariant);
  options.finish();
  if (o.batch_invariant) {
    const std::string at = options.path().empty() ? "" : options.path() + ".";
    for (const char* fixed : {"matmul_min_rows", "split_attention", "tiled_attention"}) {
      if (!options.has(fixed)) continue;
      throw Error(ErrorKind::kConfig,
                  at + fixed +
                      ": batch_invariant: true fixes it (every matmul row through the gemv, "
                      "attention of one shape, never split or tiled); remove one of " +
                      at + "batch_invariant and " + at + fixed);
    }
    o.matmul_min_rows = int64_t{1} << 30;
    o.split_attention = 0;
    o.tiled_attention = false;
  }
  return o;
}

}  // namespace duet::cuda
