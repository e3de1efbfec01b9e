// duet/app/quantize.h — writing a GGUF model again with its weights stored in
// another format (`duet quantize`).
//
// A file type names a recipe, not one tensor type: as llama.cpp's
// llama-quantize does for the same file type (without an importance matrix),
// each weight gets the type the recipe gives its role and layer, and falls
// back to a 32-element format where its rows are not whole 256-element
// super-blocks. For q4_k_m, for example: attn_v and ffn_down of the first
// and last eighth of the layers, and of every third layer between, get q6_k;
// the output matrix (or, where the model ties it to the embeddings,
// token_embd) gets q6_k; every other weight q4_k; a q4_k or q6_k tensor whose
// rows are not a multiple of 256 becomes q5_0 or q8_0. The 2- and 3-bit
// recipes (q2_k, q3_k_s/m/l) give attn_v, attn_output and ffn_down more bits
// (q2_k's attn_v depends on how many query heads share a KV head), and their
// q2_k / q3_k rows that are not whole super-blocks become q4_0. iq4_nl gives
// attn_v q5_k where four or more query heads share a KV head, and ffn_down
// of the first eighth q5_k. attn_qkv and
// attn_kv_b follow attn_v's rule, and a 70B-type model (80 layers of llama
// with grouped KV heads, of qwen2, ...) gets q5_k where attn_v would get
// q3_k or q4_k. Norms, other 1-D tensors and biases are copied as stored.
// The rules reproduced are llama-quantize's for dense models as of the
// llama.cpp that llama-cpp-python 0.3.36 builds (b4747 differed in q2_k/q3_k's
// fallback, iq4_nl, and in attn_qkv's rule); its mixture-of-experts and Falcon
// special cases are not reproduced (Duet runs neither).
//
// Dequantizing is exact, so a file may be turned into f32 from any weight type
// Duet reads; quantizing weights that are already quantized loses precision
// twice and needs QuantizeOptions::allow_requantize, as llama-quantize needs
// --allow-requantize.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/dtype.h"
#include "duet/export.h"
#include "duet/tensor.h"

namespace duet {

// llama.cpp's file types, numbered as its general.file_type values.
enum class FileType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ4_NL = 25,
  kBF16 = 32,
};

// Every file type, in the order `duet quantize --help` lists them.
DUET_API const std::vector<FileType>& file_types();
// The type llama-quantize stores a tensor of `type` with rows of `row`
// elements in: `type` when the rows are whole blocks of it, else its
// fallback (q2_k and q3_k → q4_0, q4_k → q5_0, q5_k → q5_1, q6_k → q8_0; a
// 32-element type is its own), or f16 where the fallback's blocks do not fit
// either; nullopt for a larger block type with no fallback (q8_k).
DUET_API std::optional<DType> type_for_rows(DType type, int64_t row);
// "q4_k_m", "f32", ... (llama-quantize's names, lower case).
DUET_API std::string file_type_name(FileType type);
// Case-insensitive ("Q4_K_M" and "q4_k_m"); nullopt for any other name.
DUET_API std::optional<FileType> file_type_from_name(std::string_view name);

// What happens to one tensor of the input.
struct DUET_API TensorPlan {
  std::string name;
  Shape shape;             // outermost first
  uint32_t from_code = 0;  // its ggml type code in the input
  DType to = DType::kF32;  // the type written (the input's when !converted)
  bool converted = false;  // false: copied byte for byte
  bool fallback = false;   // the recipe's type did not fit the rows (see above)
};

// Each tensor's fate, in the input's order. A weight whose rows fit neither
// the recipe's type nor its fallback becomes f16 (rows not a multiple of
// 32), as in llama-quantize.
DUET_API std::vector<TensorPlan> plan_quantization(const GgufFile& in, FileType type);

struct DUET_API QuantizeOptions {
  FileType type = FileType::kQ8_0;
  bool allow_requantize = false;  // see the header comment
  int threads = 0;                // 0: every CPU the process may run on
  // Called after each tensor is converted or copied, with its plan entry.
  std::function<void(const TensorPlan&)> on_tensor;
};

struct DUET_API QuantizeResult {
  std::vector<TensorPlan> plan;
  uint64_t bytes_in = 0;   // tensor data read
  uint64_t bytes_out = 0;  // tensor data written
};

// Writes `in` to `out` as `options.type`: every metadata entry copied (in
// order), general.file_type and general.quantization_version set as
// llama-quantize sets them, tensors in the input's order. Throws
// Error(kModelFile) naming the tensor for weights Duet cannot read, for
// non-finite weights, and for already-quantized weights without
// allow_requantize (unless the target is f32); Error(kModelFile) when `out`
// cannot be written. `out` is replaced only once it is complete.
DUET_API QuantizeResult quantize_model(const GgufFile& in, const std::filesystem::path& out,
                                       const QuantizeOptions& options);

}  // namespace duet
