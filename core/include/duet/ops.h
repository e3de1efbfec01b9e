// duet/ops.h — the tensor operations a Llama-family decoder needs, as a
// backend implements them.
//
// Core validates every shape and dtype before it calls an op (see
// core/src/models/checked_ops.h), so an implementation may assume its preconditions
// hold and only computes. All tensors live on the backend's own device.
// Activations are f32; weights may be any dtype the backend supports(). Ops
// may run asynchronously on the device; Device::synchronize() waits.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "duet/export.h"
#include "duet/support.h"
#include "duet/tensor.h"

namespace duet {

enum class OpKind {
  kEmbedding,  // gather rows of a (possibly quantized) table
  kMatmul,     // activations times the transpose of a weight matrix
  kRmsNorm,
  kRope,
  kSwiGLU,
  kAdd,
  // ABI 1.2
  kAddBias,  // one row added to every row (Q/K/V biases)
  kGeGLU,    // gelu(gate) * up (Gemma's FFN)
  kScale,    // times a constant (Gemma's embedding scale)
};

DUET_API const char* op_kind_name(OpKind kind);

// What supports() is asked: an op and the dtype of its weight operand (the
// table for kEmbedding, the matrix for kMatmul, f32 otherwise).
struct DUET_API OpDesc {
  OpKind kind;
  DType weight_dtype = DType::kF32;
};

// Ops::supports() of a backend whose embedding and matmul read the weight
// types in `weight_types` and whose other ops read f32, so that a backend's
// list and its refusals come from one table. A refusal names the backend,
// the op, the dtype and the list: "the cuda backend has no matmul for
// weight dtype q2_k; it supports f32, f16, bf16, q4_0, q4_1 and q8_0".
DUET_API Support weight_op_support(std::string_view backend, const OpDesc& desc,
                                   std::span<const DType> weight_types);

// Rotary position embedding parameters. `pairs` says which elements rotate
// together: kAdjacent rotates (x[2i], x[2i+1]) — the layout GGUF Llama files
// store Q and K weights for; kHalves rotates (x[i], x[i + d/2]) — the NeoX
// layout.
struct DUET_API RopeParams {
  enum class Pairs { kAdjacent, kHalves };
  float theta_base = 10000.0f;
  Pairs pairs = Pairs::kAdjacent;
  // ABI 1.2: per-pair frequency factors (Llama 3.1+'s rope_freqs.weight),
  // f32 [head_dim / 2] on the device, pair j's angle divided by
  // freq_factors[j]; data null: none. Core passes factors only to backends
  // of plugins built against ABI 1.2 or later.
  TensorView freq_factors{};
};

class DUET_API Ops {
 public:
  virtual ~Ops() = default;

  // Whether this backend implements `desc`; reasons name what is missing.
  virtual Support supports(const OpDesc& desc) const = 0;

  // out[i, :] = dequantize(table[ids[i], :]).
  // table: [vocab, dim] any supported dtype; ids: i32 [n], every id in
  // [0, vocab); out: f32 [n, dim].
  virtual void embedding(const TensorView& table, const TensorView& ids, TensorView out) = 0;

  // out[n, m] = x[n, k] · w[m, k]ᵀ.  x, out: f32; w: any supported dtype.
  virtual void matmul(const TensorView& x, const TensorView& w, TensorView out) = 0;

  // out[i, :] = x[i, :] / sqrt(mean(x[i, :]²) + eps) * weight[:].
  // x, out: f32 [n, d]; weight: f32 [d]. out may alias x.
  virtual void rmsnorm(const TensorView& x, const TensorView& weight, float eps,
                       TensorView out) = 0;

  // Rotates x in place. x: f32 [n, heads, head_dim] (head_dim even);
  // positions: i32 [n], the absolute position of each row. Pair j of a head
  // is rotated by angle position * theta_base^(-2j / head_dim), divided by
  // params.freq_factors[j] when given.
  virtual void rope(TensorView x, const TensorView& positions, const RopeParams& params) = 0;

  // out = silu(gate) * up, elementwise; silu(g) = g / (1 + exp(-g)).
  // All f32 of one shape. out may alias gate or up.
  virtual void swiglu(const TensorView& gate, const TensorView& up, TensorView out) = 0;

  // out = a + b, elementwise, all f32 of one shape. out may alias a or b.
  virtual void add(const TensorView& a, const TensorView& b, TensorView out) = 0;

  // ABI 1.2: ops appended for architectures beyond Llama. Core calls them
  // only on backends whose plugin was built against ABI 1.2 or later (it
  // refuses a model that needs them on an older one). The defaults throw
  // duet::Error(kPlugin) naming the op, for a backend that does not
  // implement them; its supports() should then say no for the op's kind.

  // out[i, :] = x[i, :] + bias[:]. x, out: f32 [n, d]; bias: f32 [d].
  // out may alias x.
  virtual void add_bias(const TensorView& x, const TensorView& bias, TensorView out);

  // out = gelu(gate) * up, elementwise, with the tanh form of GELU:
  // gelu(g) = g/2 · (1 + tanh(√(2/π) · (g + 0.044715 g³))). All f32 of one
  // shape. out may alias gate or up.
  virtual void geglu(const TensorView& gate, const TensorView& up, TensorView out);

  // out = x · factor, elementwise, f32 of one shape. out may alias x.
  virtual void scale(const TensorView& x, float factor, TensorView out);

  // ABI 1.8: out[i] = x · w[i]ᵀ for every i, each with exactly the values
  // matmul(x, w[i], out[i]) gives (bit for bit): the products of one set of
  // activation rows (a layer's q, k and v; its gate and up) handed over
  // together, so that a backend can share what changes no result, such as
  // quantizing x once or running all of them in one parallel loop. w and
  // out have the same length; each out[i] is disjoint from x, from every
  // w[j] and from every other out[j]. The default calls matmul() for each
  // in order. Core calls it only on backends built against ABI 1.8 or
  // later, and matmul() for each on older ones.
  virtual void matmuls(const TensorView& x, std::span<const TensorView> w,
                       std::span<const TensorView> out);
};

}  // namespace duet
