#include <string>

#include "duet/ops.h"

namespace duet {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbedding:
      return "embedding";
    case OpKind::kMatmul:
      return "matmul";
    case OpKind::kRmsNorm:
      return "rmsnorm";
    case OpKind::kRope:
      return "rope";
    case OpKind::kSwiGLU:
      return "swiglu";
    case OpKind::kAdd:
      return "add";
  }
  return "unknown op";
}

Support weight_op_support(std::string_view backend, const OpDesc& desc,
                          std::span<const DType> weight_types) {
  const std::string type = ggml_type_name(static_cast<uint32_t>(desc.weight_dtype));
  if (desc.kind != OpKind::kEmbedding && desc.kind != OpKind::kMatmul) {
    if (desc.weight_dtype == DType::kF32) return Support::yes();
    return Support::no("the " + std::string(backend) + " backend runs " + op_kind_name(desc.kind) +
                       " on f32 only, not " + type);
  }
  std::string list;
  for (size_t i = 0; i < weight_types.size(); ++i) {
    if (weight_types[i] == desc.weight_dtype) return Support::yes();
    list += (i == 0 ? "" : i + 1 == weight_types.size() ? " and " : ", ");
    list += dtype_name(weight_types[i]);
  }
  return Support::no("the " + std::string(backend) + " backend has no " + op_kind_name(desc.kind) +
                     " for weight dtype " + type + "; it supports " + list);
}

}  // namespace duet
