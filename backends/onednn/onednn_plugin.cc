// The onednn backend's plugin entry: registers the "onednn" backend. The
// probe picks the CPU path (kernels/cpu_features.h) — any x86-64 CPU can run
// at least the portable one — and the backend's summary names it, so
// `duet plugins` shows which path this machine gets.
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "duet/plugin.h"
#include "onednn_backend.h"
#include "onednn_options.h"

namespace {

// Refuses only when DUET_CPU_PATH names no path (detect_cpu_path throws).
int probe_onednn(char* reason, size_t reason_size) {
  try {
    duet::onednn::detect_cpu_path();
    return 1;
  } catch (const std::exception& e) {
    std::snprintf(reason, reason_size, "%s", e.what());
    return 0;
  }
}

std::string summary(duet::onednn::CpuPath path) {
  const dnnl_version_t* v = dnnl_version();
  std::string matmuls = "matmuls on quantized gemv kernels, oneDNN ";
  if (path == duet::onednn::CpuPath::kAvx512Vnni) {
    matmuls =
        "matmuls on row tiles (16 repacked weight rows per vpdpbusd; "
        "q4_0/q4_1/iq4_nl/q4_k/q5_0/q5_1/q5_k/q6_k/q8_0 from 1 row, q2_k/q3_k from 2" +
        (duet::onednn::amx_int8_present()
             ? "; AMX-INT8 tiles from " + std::to_string(duet::onednn::kAmxMinRows) +
                   " rows, q2_k/q3_k/q6_k from " + std::to_string(duet::onednn::kAmxMinRowsHalves) +
                   (duet::onednn::amx_bf16_present()
                        ? ", AMX-BF16 from " + std::to_string(duet::onednn::kAmxBf16MinRows) +
                              " rows, q2_k/q3_k/q6_k from " +
                              std::to_string(duet::onednn::kAmxBf16MinRowsHalves)
                        : std::string())
             : std::string()) +
        "), quantized gemv otherwise, oneDNN ";
  } else if (duet::onednn::row_tiles_path(path)) {
    matmuls =
        "matmuls on row tiles for q4_0/q4_1/q4_k/q5_0/q5_1/q8_0 (vpmaddubsw; q4_0/q4_1/q5_0/q5_1 "
        "from 1 row, the others from 2), quantized gemv otherwise, oneDNN ";
  }
  // The caches kept in tiles for the backend's own attention (kernels/kv_tiles.h).
  const std::string tiles = path == duet::onednn::CpuPath::kAvx512Vnni
                                ? " (f16 by default and q8_0 in tiles)"
                            : path == duet::onednn::CpuPath::kAvx512 ? " (f16 in tiles by default)"
                                                                     : "";
  return matmuls + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) +
         " GEMM from matmul_min_rows rows; flash attention; KV cache f32, f16 or q8_0" + tiles +
         "; cpu path: " + duet::onednn::cpu_path_name(path) + " (" +
         duet::onednn::cpu_features_summary() + ")";
}

void register_onednn(duet::PluginRegistrar& registrar) {
  const duet::onednn::CpuPath path = duet::onednn::detect_cpu_path();
  registrar.add_backend("onednn", summary(path),
                        [path](const duet::Options& options) -> std::unique_ptr<duet::Backend> {
                          return std::make_unique<duet::onednn::OnednnBackend>(
                              duet::onednn::BackendOptions::parse(options, path), path);
                        });
}

}  // namespace

DUET_DEFINE_PLUGIN("onednn", "0.1.0", "fast multi-threaded CPU backend on oneDNN", probe_onednn,
                   register_onednn)
