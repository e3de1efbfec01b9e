#include "models/checked_ops.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "duet/error.h"

namespace duet {

namespace {

// Named by its ggml code so that even a dtype Duet cannot handle prints.
std::string type_name(DType t) { return ggml_type_name(static_cast<uint32_t>(t)); }

// Shortest text that reads back as `v`.
std::string float_str(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// One operand as the checks see it: the op it belongs to, its name in ops.h
// and its view.
struct Operand {
  OpKind op;
  const char* name;
  const TensorView& t;
};

[[noreturn]] void fail(OpKind op, const std::string& what) {
  throw Error(ErrorKind::kInternal, std::string(op_kind_name(op)) + ": " + what);
}

// "shapes x [3, 576], w [49152, 512]"
std::string shapes(std::initializer_list<Operand> ops) {
  std::string s = "shapes";
  const char* sep = " ";
  for (const Operand& o : ops) {
    s += sep + std::string(o.name) + " " + o.t.shape.str();
    sep = ", ";
  }
  return s;
}

void expect_dtype(const Operand& o, DType want) {
  if (o.t.dtype != want) {
    fail(o.op, std::string(o.name) + " must be " + type_name(want) + " but is " +
                   type_name(o.t.dtype) + "; shape " + o.t.shape.str());
  }
}

// Checks that no dimension is negative and that a non-empty tensor has data.
void expect_valid(const Operand& o) {
  const Shape& s = o.t.shape;
  for (int i = 0; i < s.rank; ++i) {
    if (s[i] < 0) fail(o.op, std::string(o.name) + " has a negative dimension: " + s.str());
  }
  if (o.t.data == nullptr && s.elements() != 0) {
    fail(o.op, std::string(o.name) + " " + s.str() + " has no data (null pointer)");
  }
}

// Checks the rank, then expect_valid(). `layout` spells the expected
// dimensions, e.g. "[n, k]".
void expect_rank(const Operand& o, int rank, const char* layout) {
  if (o.t.shape.rank != rank) {
    fail(o.op, std::string(o.name) + " must have rank " + std::to_string(rank) + " " + layout +
                   " but has shape " + o.t.shape.str());
  }
  expect_valid(o);
}

// Requires a.shape[ai] == b.shape[bi]; `a_what` and `b_what` name the
// dimensions ("columns"). Shapes are listed b first; callers pass as b the
// operand that comes first in the op's signature.
void expect_dim(const Operand& a, int ai, const char* a_what, const Operand& b, int bi,
                const char* b_what) {
  if (a.t.shape[ai] != b.t.shape[bi]) {
    const std::string b_unit = std::strcmp(a_what, b_what) == 0 ? "" : std::string(" ") + b_what;
    fail(a.op, std::string(a.name) + " has " + std::to_string(a.t.shape[ai]) + " " + a_what +
                   " but " + b.name + " has " + std::to_string(b.t.shape[bi]) + b_unit + "; " +
                   shapes({b, a}));
  }
}

void expect_same_shape(const Operand& a, const Operand& b) {
  if (!(a.t.shape == b.t.shape)) {
    fail(a.op,
         std::string(a.name) + " and " + b.name + " must have the same shape; " + shapes({a, b}));
  }
}

bool overlap(const TensorView& a, const TensorView& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<uintptr_t>(b.data);
  const uint64_t an = a.bytes();
  const uint64_t bn = b.bytes();
  if (an == 0 || bn == 0) return false;
  return a0 < b0 + bn && b0 < a0 + an;
}

void expect_disjoint(const Operand& out, const Operand& in) {
  if (overlap(out.t, in.t)) {
    fail(out.op, std::string(out.name) + " overlaps " + in.name +
                     ", which this op does not allow; " + shapes({out, in}));
  }
}

// For ops that may run in place: `out` is either exactly `in` or apart from it.
void expect_same_or_disjoint(const Operand& out, const Operand& in) {
  if (out.t.data != in.t.data && overlap(out.t, in.t)) {
    fail(out.op, std::string(out.name) + " partly overlaps " + in.name +
                     "; it may only be the very same tensor or lie apart; " + shapes({out, in}));
  }
}

// A weight's rows must be whole blocks of its dtype.
void expect_whole_blocks(const Operand& w) {
  const int64_t block = dtype_traits(w.t.dtype).block_size;
  if (w.t.shape.innermost() % block != 0) {
    fail(w.op, std::string(w.name) + " has " + std::to_string(w.t.shape.innermost()) +
                   " columns, not a multiple of " + type_name(w.t.dtype) + "'s block size " +
                   std::to_string(block) + "; shape " + w.t.shape.str());
  }
}

}  // namespace

CheckedOps::CheckedOps(Backend& backend, uint32_t abi_minor)
    : backend_(backend), ops_(backend.ops()), abi_minor_(abi_minor) {}

Support CheckedOps::supports(const OpDesc& desc) const {
  const bool abi_1_2 =
      desc.kind == OpKind::kAddBias || desc.kind == OpKind::kGeGLU || desc.kind == OpKind::kScale;
  if (abi_1_2 && abi_minor_ < 2) {
    // The plugin's Ops has no such virtual function: never ask it.
    return Support::no("backend '" + backend_.name() + "' was built against Duet ABI 1." +
                       std::to_string(abi_minor_) + ", which has no " + op_kind_name(desc.kind) +
                       " op; rebuild the plugin against this SDK (ABI 1.2)");
  }
  return ops_.supports(desc);
}

void CheckedOps::require_support(const OpDesc& desc) const {
  const Support s = supports(desc);
  if (s.ok()) return;
  std::string msg = "backend '" + backend_.name() + "' cannot run " + op_kind_name(desc.kind) +
                    " with weight dtype " + type_name(desc.weight_dtype) + ": ";
  for (size_t i = 0; i < s.reasons.size(); ++i) msg += (i ? "; " : "") + s.reasons[i];
  throw Error(ErrorKind::kPlugin, msg);
}

void CheckedOps::check_ids(const TensorView& ids, int64_t vocab) const {
  // Reading ids back from a GPU would stall its queue in every forward pass;
  // there the range is the Session's to guarantee (it checks prompt ids and
  // every sampled token before they reach the model).
  Device& device = backend_.device();
  if (!device.host_accessible()) return;
  const auto n = static_cast<size_t>(ids.elements());
  const auto* host = static_cast<const int32_t*>(ids.data);
  device.synchronize();  // the backend may still be writing them
  for (size_t i = 0; i < n; ++i) {
    if (host[i] < 0 || host[i] >= vocab) {
      fail(OpKind::kEmbedding, "ids[" + std::to_string(i) + "] is " + std::to_string(host[i]) +
                                   ", outside the table's rows [0, " + std::to_string(vocab) + ")");
    }
  }
}

void CheckedOps::embedding(const TensorView& table, const TensorView& ids, TensorView out) {
  const OpKind op = OpKind::kEmbedding;
  const Operand t{op, "table", table}, i{op, "ids", ids}, o{op, "out", out};
  expect_rank(t, 2, "[vocab, dim]");
  expect_rank(i, 1, "[n]");
  expect_rank(o, 2, "[n, dim]");
  expect_dtype(i, DType::kI32);
  expect_dtype(o, DType::kF32);
  require_support({op, table.dtype});
  expect_whole_blocks(t);
  expect_dim(o, 0, "rows", i, 0, "elements");
  expect_dim(o, 1, "columns", t, 1, "columns");
  expect_disjoint(o, t);
  expect_disjoint(o, i);
  check_ids(ids, table.shape[0]);
  ops_.embedding(table, ids, out);
}

void CheckedOps::check_matmul(const TensorView& x, const TensorView& w, const TensorView& out,
                              const char* w_name, const char* out_name) const {
  const OpKind op = OpKind::kMatmul;
  const Operand xo{op, "x", x}, wo{op, w_name, w}, o{op, out_name, out};
  expect_rank(xo, 2, "[n, k]");
  expect_rank(wo, 2, "[m, k]");
  expect_rank(o, 2, "[n, m]");
  expect_dtype(xo, DType::kF32);
  expect_dtype(o, DType::kF32);
  require_support({op, w.dtype});
  expect_whole_blocks(wo);
  expect_dim(wo, 1, "columns", xo, 1, "columns");
  expect_dim(o, 0, "rows", xo, 0, "rows");
  expect_dim(o, 1, "columns", wo, 0, "rows");
  expect_disjoint(o, xo);
  expect_disjoint(o, wo);
}

void CheckedOps::matmul(const TensorView& x, const TensorView& w, TensorView out) {
  check_matmul(x, w, out, "w", "out");
  ops_.matmul(x, w, out);
}

void CheckedOps::matmuls(const TensorView& x, std::span<const TensorView> w,
                         std::span<const TensorView> out) {
  const OpKind op = OpKind::kMatmul;
  if (w.size() != out.size()) {
    fail(op, std::to_string(w.size()) + " weight matrices but " + std::to_string(out.size()) +
                 " outputs; expected one output per matrix");
  }
  for (size_t i = w_names_.size(); i < w.size(); ++i) {
    w_names_.push_back("w[" + std::to_string(i) + "]");
    out_names_.push_back("out[" + std::to_string(i) + "]");
  }
  for (size_t i = 0; i < w.size(); ++i) {
    check_matmul(x, w[i], out[i], w_names_[i].c_str(), out_names_[i].c_str());
    const Operand o{op, out_names_[i].c_str(), out[i]};
    for (size_t j = 0; j < w.size(); ++j) {
      expect_disjoint(o, Operand{op, w_names_[j].c_str(), w[j]});
      if (j < i) expect_disjoint(o, Operand{op, out_names_[j].c_str(), out[j]});
    }
  }
  if (abi_minor_ < 8) {  // no Ops::matmuls in the plugin's vtable
    for (size_t i = 0; i < w.size(); ++i) ops_.matmul(x, w[i], out[i]);
    return;
  }
  ops_.matmuls(x, w, out);
}

void CheckedOps::rmsnorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) {
  const OpKind op = OpKind::kRmsNorm;
  const Operand xo{op, "x", x}, wo{op, "weight", weight}, o{op, "out", out};
  expect_rank(xo, 2, "[n, d]");
  expect_rank(wo, 1, "[d]");
  expect_dtype(xo, DType::kF32);
  expect_dtype(wo, DType::kF32);
  expect_dtype(o, DType::kF32);
  require_support({op, DType::kF32});
  expect_rank(o, 2, "[n, d]");
  expect_dim(wo, 0, "elements", xo, 1, "columns");
  expect_same_shape(o, xo);
  if (!std::isfinite(eps) || eps < 0.0f) {
    fail(op, "eps is " + float_str(eps) + "; expected a finite value >= 0");
  }
  expect_same_or_disjoint(o, xo);
  expect_disjoint(o, wo);
  ops_.rmsnorm(x, weight, eps, out);
}

void CheckedOps::rope(TensorView x, const TensorView& positions, const RopeParams& params) {
  const OpKind op = OpKind::kRope;
  const Operand xo{op, "x", x}, p{op, "positions", positions};
  expect_rank(xo, 3, "[n, heads, head_dim]");
  expect_rank(p, 1, "[n]");
  expect_dtype(xo, DType::kF32);
  expect_dtype(p, DType::kI32);
  require_support({op, DType::kF32});
  if (x.shape[2] % 2 != 0) {
    fail(op, "x has head_dim " + std::to_string(x.shape[2]) + ", which must be even; shape " +
                 x.shape.str());
  }
  expect_dim(p, 0, "elements", xo, 0, "rows");
  if (!std::isfinite(params.theta_base) || params.theta_base <= 0.0f) {
    fail(op, "theta_base is " + float_str(params.theta_base) + "; expected a finite value > 0");
  }
  expect_disjoint(xo, p);
  if (params.freq_factors.data != nullptr) {
    if (abi_minor_ < 2) {
      throw Error(ErrorKind::kPlugin, "backend '" + backend_.name() +
                                          "' was built against Duet ABI 1." +
                                          std::to_string(abi_minor_) +
                                          ", whose rope has no frequency factors; rebuild the "
                                          "plugin against this SDK (ABI 1.2)");
    }
    const Operand f{op, "freq_factors", params.freq_factors};
    expect_rank(f, 1, "[head_dim / 2]");
    expect_dtype(f, DType::kF32);
    if (params.freq_factors.shape[0] * 2 != x.shape[2]) {
      fail(op, "freq_factors has " + std::to_string(params.freq_factors.shape[0]) +
                   " elements but x has head_dim " + std::to_string(x.shape[2]) +
                   "; expected head_dim / 2");
    }
    expect_disjoint(xo, f);
  }
  ops_.rope(x, positions, params);
}

void CheckedOps::check_gated(OpKind op, const TensorView& gate, const TensorView& up,
                             const TensorView& out) const {
  const Operand g{op, "gate", gate}, u{op, "up", up}, o{op, "out", out};
  for (const Operand& t : {g, u, o}) {
    expect_valid(t);
    expect_dtype(t, DType::kF32);
  }
  require_support({op, DType::kF32});
  expect_same_shape(u, g);
  expect_same_shape(o, g);
  expect_same_or_disjoint(o, g);
  expect_same_or_disjoint(o, u);
}

void CheckedOps::swiglu(const TensorView& gate, const TensorView& up, TensorView out) {
  check_gated(OpKind::kSwiGLU, gate, up, out);
  ops_.swiglu(gate, up, out);
}

void CheckedOps::add_bias(const TensorView& x, const TensorView& bias, TensorView out) {
  const OpKind op = OpKind::kAddBias;
  const Operand xo{op, "x", x}, bo{op, "bias", bias}, o{op, "out", out};
  expect_rank(xo, 2, "[n, d]");
  expect_rank(bo, 1, "[d]");
  expect_rank(o, 2, "[n, d]");
  for (const Operand& t : {xo, bo, o}) {
    expect_valid(t);
    expect_dtype(t, DType::kF32);
  }
  require_support({op, DType::kF32});
  expect_dim(bo, 0, "elements", xo, 1, "columns");
  expect_same_shape(o, xo);
  expect_same_or_disjoint(o, xo);
  expect_disjoint(o, bo);
  ops_.add_bias(x, bias, out);
}

void CheckedOps::geglu(const TensorView& gate, const TensorView& up, TensorView out) {
  check_gated(OpKind::kGeGLU, gate, up, out);
  ops_.geglu(gate, up, out);
}

void CheckedOps::scale(const TensorView& x, float factor, TensorView out) {
  const OpKind op = OpKind::kScale;
  const Operand xo{op, "x", x}, o{op, "out", out};
  for (const Operand& t : {xo, o}) {
    expect_valid(t);
    expect_dtype(t, DType::kF32);
  }
  require_support({op, DType::kF32});
  expect_same_shape(o, xo);
  if (!std::isfinite(factor)) fail(op, "factor is " + float_str(factor) + "; expected finite");
  expect_same_or_disjoint(o, xo);
  ops_.scale(x, factor, out);
}

void CheckedOps::add(const TensorView& a, const TensorView& b, TensorView out) {
  const OpKind op = OpKind::kAdd;
  const Operand ao{op, "a", a}, bo{op, "b", b}, o{op, "out", out};
  for (const Operand& t : {ao, bo, o}) {
    expect_valid(t);
    expect_dtype(t, DType::kF32);
  }
  require_support({op, DType::kF32});
  expect_same_shape(bo, ao);
  expect_same_shape(o, ao);
  expect_same_or_disjoint(o, ao);
  expect_same_or_disjoint(o, bo);
  ops_.add(a, b, out);
}

}  // namespace duet
