// The tensor type choices of duet/app/quantize.h: llama-quantize's recipe for
// each file type (llama.cpp's src/llama-quant.cpp as llama-cpp-python 0.3.36
// builds it, dense models without an importance matrix), restated for the
// file types Duet writes.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <utility>

#include "duet/app/quantize.h"
#include "duet/error.h"

namespace duet {
namespace {

struct FileTypeInfo {
  FileType type;
  const char* name;
  DType base;  // the recipe's type for a weight no rule singles out
};

constexpr FileTypeInfo kFileTypes[] = {
    {FileType::kF32, "f32", DType::kF32},        {FileType::kF16, "f16", DType::kF16},
    {FileType::kBF16, "bf16", DType::kBF16},     {FileType::kQ8_0, "q8_0", DType::kQ8_0},
    {FileType::kQ6_K, "q6_k", DType::kQ6_K},     {FileType::kQ5_K_M, "q5_k_m", DType::kQ5_K},
    {FileType::kQ5_K_S, "q5_k_s", DType::kQ5_K}, {FileType::kQ5_1, "q5_1", DType::kQ5_1},
    {FileType::kQ5_0, "q5_0", DType::kQ5_0},     {FileType::kQ4_K_M, "q4_k_m", DType::kQ4_K},
    {FileType::kQ4_K_S, "q4_k_s", DType::kQ4_K}, {FileType::kQ4_1, "q4_1", DType::kQ4_1},
    {FileType::kQ4_0, "q4_0", DType::kQ4_0},     {FileType::kIQ4_NL, "iq4_nl", DType::kIQ4_NL},
    {FileType::kQ3_K_L, "q3_k_l", DType::kQ3_K}, {FileType::kQ3_K_M, "q3_k_m", DType::kQ3_K},
    {FileType::kQ3_K_S, "q3_k_s", DType::kQ3_K}, {FileType::kQ2_K, "q2_k", DType::kQ2_K},
};

const FileTypeInfo& info(FileType type) {
  for (const FileTypeInfo& i : kFileTypes) {
    if (i.type == type) return i;
  }
  throw Error(ErrorKind::kInternal,
              "FileType " + std::to_string(static_cast<uint32_t>(type)) + " has no recipe");
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

// ggml's count of dimensions: trailing (outermost) dimensions of 1 do not count.
int ggml_dims(const Shape& shape) {
  int outer = 0;
  while (outer < shape.rank - 1 && shape[outer] == 1) ++outer;
  return shape.rank - outer;
}

// Whether llama-quantize converts the tensor at all: 2-D (or more) weights
// other than norms, MoE routers and a few architectures' small matrices.
bool is_quantizable(std::string_view name, const Shape& shape) {
  if (name.size() < 6 || name.substr(name.size() - 6) != "weight") return false;
  if (ggml_dims(shape) < 2) return false;
  for (std::string_view skip :
       {"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d.weight", "time_mix_first.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight"}) {
    if (contains(name, skip)) return false;
  }
  return name != "position_embd.weight" && name != "token_types.weight";
}

// "blk.N." → N; -1 for tensors outside the layers.
int layer_of(std::string_view name) {
  int layer = -1;
  if (std::sscanf(std::string(name).c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

// llama-quantize's "more bits" layers: the first and last eighth, and every
// third layer between.
bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int64_t block_of(DType t) { return dtype_traits(t).block_size; }

// A head count of layer 0: the value, or the first element of a per-layer
// array; nullopt when absent or not a count.
std::optional<uint64_t> layer0_count(const GgufFile& in, const std::string& key) {
  const GgufValue* v = in.find(key);
  if (!v) return std::nullopt;
  if (const GgufArray* a = v->as_array()) {
    if (a->size() == 0) return std::nullopt;
    return a->elements().front().as_uint();
  }
  return v->as_uint();
}

// llama.cpp's model type 70B, which the attn_v rule asks for: 80 layers of
// llama with grouped KV heads, of qwen2, deci or olmo; 68 of jais2.
bool seventy_b(const GgufFile& in, std::string_view arch, int n_layer) {
  if (arch == "llama") {
    const std::string prefix = "llama.attention.";
    const std::optional<uint64_t> heads = layer0_count(in, prefix + "head_count");
    const std::optional<uint64_t> kv = layer0_count(in, prefix + "head_count_kv");
    return n_layer == 80 && heads && kv.value_or(*heads) != *heads;
  }
  if (arch == "qwen2" || arch == "deci" || arch == "olmo") return n_layer == 80;
  return arch == "jais2" && n_layer == 68;
}

// llama.cpp's n_gqa() of layer 0: head_count / head_count_kv (the KV count
// defaults to the head count), 0 when either is unknown or zero.
int query_heads_per_kv_head(const GgufFile& in, std::string_view arch) {
  const std::string prefix = std::string(arch) + ".attention.";
  const std::optional<uint64_t> heads = layer0_count(in, prefix + "head_count");
  if (!heads) return 0;
  const uint64_t kv = layer0_count(in, prefix + "head_count_kv").value_or(*heads);
  return kv == 0 ? 0 : static_cast<int>(*heads / kv);
}

// Counters llama-quantize keeps while it walks the tensors in its order.
struct RecipeState {
  bool has_output = false;
  int n_attn_v = 0;  // attn_v / attn_qkv / attn_kv_b weights in the file
  int n_layer = 0;
  int n_gqa = 0;        // query heads per KV head (of layer 0); 0 when unknown
  bool is_70b = false;  // llama.cpp's LLM_TYPE_70B (see seventy_b)
  int i_attn_v = 0;
  int i_ffn_down = 0;
};

// The recipe's type for one quantizable tensor, before the row-fit fallback.
DType recipe_type(FileType ft, std::string_view name, int64_t row, RecipeState& st) {
  DType t = info(ft).base;
  const bool k_m = ft == FileType::kQ4_K_M || ft == FileType::kQ5_K_M;
  if (name == "output.weight" || (!st.has_output && name == "token_embd.weight")) {
    // The output matrix (also the embeddings where they are tied) gets 6 bits.
    if (row % block_of(t) != 0) return DType::kQ8_0;
    return t == DType::kQ8_0 ? t : DType::kQ6_K;
  }
  if (name == "token_embd.weight") return t;
  // attn_v, and the fused projections that hold it, share one rule and one
  // counter.
  if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight") ||
      contains(name, "attn_kv_b.weight")) {
    if (ft == FileType::kQ2_K)
      t = st.n_gqa >= 4 ? DType::kQ4_K : DType::kQ3_K;
    else if (ft == FileType::kQ3_K_M)
      t = st.i_attn_v < 2 ? DType::kQ5_K : DType::kQ4_K;
    else if (ft == FileType::kQ3_K_L || (ft == FileType::kIQ4_NL && st.n_gqa >= 4))
      t = DType::kQ5_K;
    else if (k_m && more_bits(st.i_attn_v, st.n_attn_v))
      t = DType::kQ6_K;
    else if (ft == FileType::kQ4_K_S && st.i_attn_v < 4)
      t = DType::kQ5_K;
    // Eight query heads share each KV head there: more bits cost little.
    if (st.is_70b && (t == DType::kQ3_K || t == DType::kQ4_K)) t = DType::kQ5_K;
    ++st.i_attn_v;
    return t;
  }
  if (contains(name, "ffn_down")) {
    const int i = st.i_ffn_down++;
    if (ft == FileType::kQ2_K) return DType::kQ3_K;
    if (ft == FileType::kQ3_K_M) return i < st.n_layer / 16 ? DType::kQ5_K : DType::kQ4_K;
    if (ft == FileType::kQ3_K_L) return DType::kQ5_K;
    if (k_m && more_bits(i, st.n_layer)) return DType::kQ6_K;
    if (ft == FileType::kIQ4_NL && i < st.n_layer / 8) return DType::kQ5_K;
    if (ft == FileType::kQ4_K_S && i < st.n_layer / 8) return DType::kQ5_K;
    return t;
  }
  if (contains(name, "attn_output.weight")) {
    if (ft == FileType::kQ2_K) return DType::kQ3_K;
    if (ft == FileType::kQ3_K_M) return DType::kQ4_K;
    if (ft == FileType::kQ3_K_L) return DType::kQ5_K;
  }
  return t;
}

}  // namespace

std::optional<DType> type_for_rows(DType type, int64_t row) {
  if (row % block_of(type) == 0) return type;
  std::optional<DType> alt;
  switch (type) {
    case DType::kQ4_K:
      alt = DType::kQ5_0;
      break;
    case DType::kQ5_K:
      alt = DType::kQ5_1;
      break;
    case DType::kQ6_K:
      alt = DType::kQ8_0;
      break;
    case DType::kQ2_K:
    case DType::kQ3_K:
      alt = DType::kQ4_0;
      break;
    default:
      if (block_of(type) > 32) return std::nullopt;
      alt = type;  // a 32-element type has no smaller block: f16 below
  }
  return row % block_of(*alt) == 0 ? *alt : DType::kF16;
}

const std::vector<FileType>& file_types() {
  static const std::vector<FileType> all = [] {
    std::vector<FileType> v;
    for (const FileTypeInfo& i : kFileTypes) v.push_back(i.type);
    return v;
  }();
  return all;
}

std::string file_type_name(FileType type) { return info(type).name; }

std::optional<FileType> file_type_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const FileTypeInfo& i : kFileTypes) {
    if (lower == i.name) return i.type;
  }
  return std::nullopt;
}

std::vector<TensorPlan> plan_quantization(const GgufFile& in, FileType type) {
  const DType base = info(type).base;
  const bool recipe = is_block_quantized(base);
  RecipeState st;
  int n_ffn_down = 0;
  for (const GgufTensorInfo& t : in.tensors()) {
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight") ||
        contains(t.name, "attn_kv_b.weight")) {
      ++st.n_attn_v;
    }
    if (contains(t.name, "ffn_down")) ++n_ffn_down;
    if (t.name == "output.weight") st.has_output = true;
  }
  // llama.cpp takes the layer count from the architecture's block_count.
  const std::optional<std::string_view> arch = in.find_string("general.architecture");
  const std::optional<uint64_t> blocks =
      arch ? in.find_uint(std::string(*arch) + ".block_count") : std::nullopt;
  st.n_layer = blocks ? static_cast<int>(*blocks) : n_ffn_down;
  st.n_gqa = arch ? query_heads_per_kv_head(in, *arch) : 0;
  st.is_70b = arch && seventy_b(in, *arch, st.n_layer);

  // llama-quantize walks the tensors by layer (then name), and its
  // counters follow that order; the plan keeps the file's.
  std::vector<size_t> order(in.tensors().size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const std::string_view na = in.tensors()[a].name, nb = in.tensors()[b].name;
    const int la = layer_of(na), lb = layer_of(nb);
    return la != lb ? la < lb : na < nb;
  });
  std::vector<TensorPlan> plan(in.tensors().size());
  for (size_t i : order) {
    const GgufTensorInfo& t = in.tensors()[i];
    TensorPlan& p = plan[i];
    p.name = std::string(t.name);
    p.shape = t.shape;
    p.from_code = t.type_code;
    p.converted = false;
    if (!is_quantizable(t.name, t.shape)) {
      if (t.dtype) p.to = *t.dtype;
      continue;
    }
    const int64_t row = t.shape.innermost();
    DType to = recipe ? recipe_type(type, t.name, row, st) : base;
    if (row % block_of(to) != 0) {
      // Every recipe type has a fallback (type_for_rows).
      const std::optional<DType> alt = type_for_rows(to, row);
      if (!alt) {
        throw Error(ErrorKind::kInternal, "quantize plan: " + std::string(dtype_name(to)) +
                                              " has no fallback for rows of " +
                                              std::to_string(row));
      }
      to = *alt;
      p.fallback = true;
    }
    p.to = to;
    p.converted = !t.dtype || *t.dtype != to;
  }
  return plan;
}

}  // namespace duet
