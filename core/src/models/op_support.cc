#include <string>

#include "duet/error.h"
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
    case OpKind::kAddBias:
      return "add_bias";
    case OpKind::kGeGLU:
      return "geglu";
    case OpKind::kScale:
      return "scale";
  }
  return "unknown op";
}

namespace {

[[noreturn]] void not_implemented(OpKind kind) {
  throw Error(ErrorKind::kPlugin, std::string("this backend does not implement the ") +
                                      op_kind_name(kind) +
                                      " op (ABI 1.2); its supports() should have said so");
}

}  // namespace

void Ops::add_bias(const TensorView&, const TensorView&, TensorView) {
  not_implemented(OpKind::kAddBias);
}

void Ops::geglu(const TensorView&, const TensorView&, TensorView) {
  not_implemented(OpKind::kGeGLU);
}

void Ops::scale(const TensorView&, float, TensorView) { not_implemented(OpKind::kScale); }

void Ops::matmuls(const TensorView& x, std::span<const TensorView> w,
                  std::span<const TensorView> out) {
  for (size_t i = 0; i < w.size(); ++i) matmul(x, w[i], out[i]);
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
