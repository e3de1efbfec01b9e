// quantize_model of duet/app/quantize.h: every tensor of the plan converted
// row by row (dequantize exactly, check, quantize), rows shared among
// threads, then one GGUF written beside the destination and renamed over it.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "duet/app/quantize.h"
#include "duet/error.h"
#include "duet/quant.h"

namespace duet {
namespace {

int default_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string where(const GgufFile& in, const TensorPlan& p) {
  return in.path().string() + ": tensor '" + p.name + "'";
}

// Refuses a conversion the options do not allow, before any work is done.
void check_convertible(const GgufFile& in, const GgufTensorInfo& t, const TensorPlan& p,
                       const QuantizeOptions& o) {
  if (!t.dtype) {
    throw Error(ErrorKind::kModelFile,
                where(in, p) + " is stored as " + t.type_name() +
                    ", which Duet cannot read, so it cannot be converted to " +
                    std::string(dtype_name(p.to)));
  }
  if (is_block_quantized(*t.dtype) && o.type != FileType::kF32 && !o.allow_requantize) {
    throw Error(ErrorKind::kModelFile,
                where(in, p) + " is already quantized (" + std::string(dtype_name(*t.dtype)) +
                    "); converting it to " + std::string(dtype_name(p.to)) +
                    " rounds twice: pass --allow-requantize, or start from an f32/f16/bf16 file "
                    "(`duet quantize IN OUT --type f32` makes an exact one)");
  }
}

// Converts rows [begin, end) of tensor t into dst (rows of p.to).
void convert_rows(const GgufFile& in, const GgufTensorInfo& t, const TensorPlan& p, int64_t begin,
                  int64_t end, uint8_t* dst) {
  const int64_t n = t.shape.innermost();
  const uint64_t in_row = *dtype_row_bytes(*t.dtype, static_cast<uint64_t>(n));
  const uint64_t out_row = *dtype_row_bytes(p.to, static_cast<uint64_t>(n));
  const auto* src = static_cast<const uint8_t*>(t.data());
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = begin; r < end; ++r) {
    dequantize_row(*t.dtype, src + r * in_row, row.data(), n);
    for (int64_t c = 0; c < n; ++c) {
      if (!std::isfinite(row[static_cast<size_t>(c)])) {
        throw Error(ErrorKind::kModelFile,
                    where(in, p) + " row " + std::to_string(r) + " column " + std::to_string(c) +
                        " holds " + std::to_string(row[static_cast<size_t>(c)]) +
                        "; a model with non-finite weights cannot be quantized");
      }
    }
    quantize_row(p.to, row.data(), dst + r * out_row, n);
  }
}

// The tensor's new bytes, its rows split among `threads` threads.
std::vector<uint8_t> convert(const GgufFile& in, const GgufTensorInfo& t, const TensorPlan& p,
                             int threads) {
  const int64_t rows = t.shape.rows();
  std::vector<uint8_t> out(*dtype_row_bytes(p.to, static_cast<uint64_t>(t.shape.elements())));
  // Chunks of rows handed out from one counter: K-quant rows cost ~100x
  // f32 rows, so equal shares would leave threads idle on mixed work.
  const int64_t chunk = std::max<int64_t>(1, rows / (8 * threads));
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (int64_t r = next.fetch_add(chunk); r < rows; r = next.fetch_add(chunk)) {
        convert_rows(in, t, p, r, std::min(rows, r + chunk), out.data());
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = rows;
    }
  };
  std::vector<std::thread> pool;
  const int helpers = static_cast<int>(std::min<int64_t>(threads, (rows + chunk - 1) / chunk)) - 1;
  for (int i = 0; i < helpers; ++i) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
  return out;
}

// Converts every tensor of the plan and writes the file to `path`.
void write_converted(const GgufFile& in, const QuantizeOptions& options, int threads,
                     const std::filesystem::path& path, QuantizeResult& result) {
  GgufWriter writer;
  for (const GgufMetadataEntry& e : in.metadata()) writer.set_value(e.key, e.value);
  // As llama-quantize writes them.
  writer.set_uint32("general.quantization_version", 2);
  writer.set_uint32("general.file_type", static_cast<uint32_t>(options.type));
  for (size_t i = 0; i < result.plan.size(); ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    const TensorPlan& p = result.plan[i];
    result.bytes_in += t.bytes;
    std::vector<uint8_t> data;
    if (p.converted) {
      data = convert(in, t, p, threads);
    } else {
      const auto* begin = static_cast<const uint8_t*>(t.data());
      data.assign(begin, begin + t.bytes);
    }
    result.bytes_out += data.size();
    writer.add_tensor(p.name, p.converted ? static_cast<uint32_t>(p.to) : t.type_code, t.shape,
                      std::move(data));
    if (options.on_tensor) options.on_tensor(p);
  }
  writer.write(path);
}

}  // namespace

QuantizeResult quantize_model(const GgufFile& in, const std::filesystem::path& out,
                              const QuantizeOptions& options) {
  QuantizeResult result;
  result.plan = plan_quantization(in, options.type);
  for (size_t i = 0; i < result.plan.size(); ++i) {
    if (result.plan[i].converted) check_convertible(in, in.tensors()[i], result.plan[i], options);
  }
  const int threads = options.threads > 0 ? options.threads : default_threads();
  std::filesystem::path partial = out;
  partial += ".partial";
  // Fail before the conversion (minutes for a large model), not after it.
  if (!std::ofstream(partial, std::ios::binary | std::ios::trunc)) {
    throw Error(ErrorKind::kModelFile, "cannot write model file '" + out.string() +
                                           "' (creating '" + partial.string() +
                                           "' beside it failed: " + std::strerror(errno) + ")");
  }

  std::error_code ec;
  try {
    write_converted(in, options, threads, partial, result);
  } catch (...) {
    std::filesystem::remove(partial, ec);
    throw;
  }
  std::filesystem::rename(partial, out, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    throw Error(ErrorKind::kModelFile,
                "cannot write model file '" + out.string() + "': " + ec.message());
  }
  return result;
}

}  // namespace duet
