// checked_ops.h — the one place where op operands are validated (internal to
// core).
//
// Model code calls ops through CheckedOps, never through a backend's Ops
// directly: every call first checks ranks, shapes, dtypes and aliasing
// against the contracts in duet/ops.h and asks the backend whether it
// supports() the weight dtype, then dispatches. Backends therefore only
// compute ("checks in core, arithmetic in backend").
//
// Failures throw duet::Error:
//   kInternal — an operand breaks an op contract (a bug in the model code
//               that called it); the message names the op, the operand and
//               the shapes involved, e.g. "matmul: w has 512 columns but x
//               has 576; shapes x [3, 576], w [49152, 512]";
//   kPlugin   — the backend does not support the weight dtype; the message
//               names the backend and repeats its reasons.
// Aliasing: two operands "alias" when their byte ranges overlap. Only the
// aliases ops.h allows are accepted, and only as exactly the same tensor
// (same pointer and shape); any other overlap is rejected.
// Thread-safety: as the wrapped backend (none).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "duet/backend.h"
#include "duet/ops.h"
#include "duet/plugin.h"

namespace duet {

class CheckedOps {
 public:
  // Wraps `backend`'s ops. The backend must outlive this object. Embedding
  // ids are range-checked where the device's memory is host-accessible;
  // on other devices reading them back would stall every forward pass, and
  // the Session guarantees their range instead. `abi_minor`: the
  // DUET_ABI_MINOR the backend's plugin was built with
  // (PluginHost::backend_abi_minor); the ops a newer ABI appended are
  // unsupported below it, and never called.
  explicit CheckedOps(Backend& backend, uint32_t abi_minor = DUET_ABI_MINOR);

  Support supports(const OpDesc& desc) const;

  void embedding(const TensorView& table, const TensorView& ids, TensorView out);
  void matmul(const TensorView& x, const TensorView& w, TensorView out);
  // Ops::matmuls, checked as matmul() for each pair, every output apart
  // from every other operand; on a backend built before ABI 1.8, matmul()
  // for each pair.
  void matmuls(const TensorView& x, std::span<const TensorView> w, std::span<const TensorView> out);
  void rmsnorm(const TensorView& x, const TensorView& weight, float eps, TensorView out);
  void rope(TensorView x, const TensorView& positions, const RopeParams& params);
  void swiglu(const TensorView& gate, const TensorView& up, TensorView out);
  void add(const TensorView& a, const TensorView& b, TensorView out);
  void add_bias(const TensorView& x, const TensorView& bias, TensorView out);
  void geglu(const TensorView& gate, const TensorView& up, TensorView out);
  void scale(const TensorView& x, float factor, TensorView out);

 private:
  // Throws kPlugin unless the backend supports `desc`.
  void require_support(const OpDesc& desc) const;
  // matmul's checks, naming the operands w and out as given.
  void check_matmul(const TensorView& x, const TensorView& w, const TensorView& out,
                    const char* w_name, const char* out_name) const;
  // The checks of a gated activation (swiglu, geglu): three f32 tensors of
  // one shape, out the same as or disjoint from each input.
  void check_gated(OpKind op, const TensorView& gate, const TensorView& up,
                   const TensorView& out) const;
  // Throws kInternal unless every id in `ids` lies in [0, vocab).
  void check_ids(const TensorView& ids, int64_t vocab) const;

  Backend& backend_;
  Ops& ops_;
  uint32_t abi_minor_;
  // matmuls' operand names, "w[i]" and "out[i]" at index i: made once per
  // index, not on every call of the forward pass.
  std::vector<std::string> w_names_, out_names_;
};

}  // namespace duet
