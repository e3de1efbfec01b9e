#include "cuda_options.h"

namespace duet::cuda {

CudaOptions parse_cuda_options(const Options& options) {
  CudaOptions o;
  o.device = static_cast<int32_t>(options.get_int("device", o.device, 0, 1023));
  o.cuda_graphs = options.get_bool("cuda_graphs", o.cuda_graphs);
  o.pdl = options.get_bool("pdl", o.pdl);
  o.fuse = options.get_bool("fuse", o.fuse);
  o.graph_stats = options.get_bool("graph_stats", o.graph_stats);
  o.split_attention = options.get_int("split_attention", o.split_attention, 0, int64_t{1} << 30);
  options.finish();
  return o;
}

}  // namespace duet::cuda
