#include "models/decoder_model.h"

#include <cmath>
#include <optional>

#include "duet/error.h"
#include "plugins/layer_attention.h"

namespace duet {
namespace {

// A device allocation viewed as one tensor.
struct DeviceTensor {
  std::unique_ptr<Buffer> buffer;
  TensorView view;
};

DeviceTensor allocate(Device& device, DType dtype, Shape shape) {
  DeviceTensor t;
  t.view.dtype = dtype;
  t.view.shape = shape;
  t.buffer = device.allocate(t.view.bytes());
  t.view.data = t.buffer->data();
  return t;
}

// Rows [first, first + n) of a rank-2 f32 tensor, as a tensor of its own.
TensorView rows(const TensorView& t, int64_t first, int64_t n) {
  TensorView r = t;
  r.data = static_cast<uint8_t*>(t.data) + first * t.shape[1] * static_cast<int64_t>(sizeof(float));
  r.shape = Shape{n, t.shape[1]};
  return r;
}

// The same memory seen with another shape of as many elements.
TensorView reshaped(const TensorView& t, Shape shape) {
  TensorView r = t;
  r.shape = shape;
  return r;
}

// The weight types core reads, as "f32, f16, q4_0, ...".
std::string weight_type_list() {
  std::string list;
  for (uint32_t code = 0; code < 64; ++code) {
    const std::optional<DType> t = dtype_from_code(code);
    if (!t || *t == DType::kI32 || *t == DType::kQ8_K) continue;
    list += (list.empty() ? "" : ", ") + std::string(dtype_name(*t));
  }
  return list;
}

}  // namespace

// Activations for one step, grown to the largest step seen so far.
struct DecoderModel::Scratch {
  int32_t n_rows = 0, n_logit_rows = 0;
  DeviceTensor ids, positions, x, h, q, k, v, attn, proj, gate, up, final_h;
  DeviceTensor logits;  // on devices outside host memory only (forward)
};

DecoderModel::DecoderModel(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams,
                           const DecoderLayout& layout, Backend& backend, uint32_t abi_minor)
    : file_(std::move(file)),
      hparams_(hparams),
      layout_(layout),
      backend_(backend),
      ops_(backend, abi_minor) {
  require_layout_ops();
  const ModelHParams& h = hparams_;
  const int64_t q_dim = int64_t{h.n_heads} * h.head_dim;
  const int64_t kv_dim = int64_t{h.n_kv_heads} * h.head_dim;
  using R = TensorRole;
  token_embd_ = bind(R::kTokenEmbd, 0, {h.n_vocab, h.n_embd});
  output_norm_ = bind(R::kOutputNorm, 0, {h.n_embd});
  if (layout_.rope_freqs && file_->find_tensor(tensor_name(R::kRopeFreqs))) {
    rope_freqs_ = bind(R::kRopeFreqs, 0, {h.head_dim / 2});
  }
  output_ = file_->find_tensor(tensor_name(R::kOutput)) ? bind(R::kOutput, 0, {h.n_vocab, h.n_embd})
                                                        : token_embd_;
  for (int32_t l = 0; l < h.n_layers; ++l) {
    Layer w;
    w.attn_norm = bind(R::kAttnNorm, l, {h.n_embd});
    w.wq = bind(R::kAttnQ, l, {q_dim, h.n_embd});
    w.wk = bind(R::kAttnK, l, {kv_dim, h.n_embd});
    w.wv = bind(R::kAttnV, l, {kv_dim, h.n_embd});
    if (layout_.qkv_bias) {
      w.q_bias = bind(R::kAttnQBias, l, {q_dim});
      w.k_bias = bind(R::kAttnKBias, l, {kv_dim});
      w.v_bias = bind(R::kAttnVBias, l, {kv_dim});
    }
    if (layout_.qk_norm) {
      w.q_norm = bind(R::kAttnQNorm, l, {h.head_dim});
      w.k_norm = bind(R::kAttnKNorm, l, {h.head_dim});
    }
    w.wo = bind(R::kAttnOutput, l, {h.n_embd, q_dim});
    if (layout_.post_norms) w.attn_post_norm = bind(R::kAttnPostNorm, l, {h.n_embd});
    w.ffn_norm = bind(R::kFfnNorm, l, {h.n_embd});
    w.w_gate = bind(R::kFfnGate, l, {h.n_ff, h.n_embd});
    w.w_up = bind(R::kFfnUp, l, {h.n_ff, h.n_embd});
    w.w_down = bind(R::kFfnDown, l, {h.n_embd, h.n_ff});
    if (layout_.post_norms) w.ffn_post_norm = bind(R::kFfnPostNorm, l, {h.n_embd});
    layers_.push_back(w);
  }
  refuse_unbound_tensors();
}

DecoderModel::~DecoderModel() = default;

void DecoderModel::require_layout_ops() const {
  std::vector<OpKind> needed;
  if (layout_.qkv_bias) needed.push_back(OpKind::kAddBias);
  if (layout_.ffn == DecoderLayout::Ffn::kGeGLU) needed.push_back(OpKind::kGeGLU);
  if (layout_.embed_scale) needed.push_back(OpKind::kScale);
  for (OpKind kind : needed) {
    const Support s = ops_.supports(OpDesc{kind});
    if (s.ok()) continue;
    throw Error(ErrorKind::kPlugin, file_->path().string() + ": the " + hparams_.architecture +
                                        " model needs the " + op_kind_name(kind) +
                                        " op: " + s.reasons.front());
  }
}

void DecoderModel::refuse_unbound_tensors() const {
  for (const GgufTensorInfo& t : file_->tensors()) {
    if (bound_.count(t.name) != 0) continue;
    throw Error(ErrorKind::kModelFile,
                file_->path().string() + ": tensor '" + std::string(t.name) +
                    "' is not part of Duet's " + hparams_.architecture +
                    " model, so the model would run without it; the file is refused "
                    "(docs/architecture.md lists what each architecture supports)");
  }
}

TensorView DecoderModel::bind(TensorRole role, int32_t layer, Shape expected) {
  const std::string name = tensor_name(role, layer);
  const std::string where = file_->path().string() + ": tensor '" + name + "'";
  const GgufTensorInfo* info = file_->find_tensor(name);
  if (info == nullptr) throw Error(ErrorKind::kModelFile, where + " is missing");
  bound_.insert(name);
  if (!(info->shape == expected)) {
    throw Error(ErrorKind::kModelFile, where + " has shape " + info->shape.str() +
                                           "; this model's hyperparameters need " + expected.str());
  }
  if (!info->supported()) {
    throw Error(ErrorKind::kModelFile,
                where + " has type " + info->type_name() +
                    ", which Duet cannot compute with; supported: " + weight_type_list());
  }
  const DType dtype = *info->dtype;
  const bool is_matrix = expected.rank == 2;
  if (!is_matrix && dtype != DType::kF32) {
    throw Error(ErrorKind::kModelFile, where + " is " + std::string(dtype_name(dtype)) +
                                           "; vectors (norms, biases, RoPE factors) must be f32");
  }
  Support s = ops_.supports(OpDesc{OpKind::kMatmul, dtype});
  if (is_matrix && !s.ok()) {
    throw Error(ErrorKind::kModelFile, where + " has type " + std::string(dtype_name(dtype)) +
                                           ", which backend '" + backend_.name() +
                                           "' cannot multiply: " + s.reasons.front());
  }
  TensorView view{nullptr, dtype, expected};
  Device& device = backend_.device();
  if (device.host_accessible()) {
    // Weights are only ever read; the mapping is read-only and stays alive
    // with file_, so the backend can use it in place.
    view.data = const_cast<void*>(info->data());
  } else {
    auto buffer = device.allocate(view.bytes());
    device.copy_from_host(buffer->data(), info->data(), view.bytes());
    view.data = buffer->data();
    weight_buffers_.push_back(std::move(buffer));
  }
  return view;
}

void DecoderModel::ensure_scratch(int32_t n_rows, int32_t n_logit_rows) {
  if (scratch_ && scratch_->n_rows >= n_rows && scratch_->n_logit_rows >= n_logit_rows) return;
  const ModelHParams& h = hparams_;
  const int32_t n = std::max(n_rows, scratch_ ? scratch_->n_rows : 0);
  const int32_t m = std::max(n_logit_rows, scratch_ ? scratch_->n_logit_rows : 0);
  const int64_t q_dim = int64_t{h.n_heads} * h.head_dim;
  const int64_t kv_dim = int64_t{h.n_kv_heads} * h.head_dim;
  Device& d = backend_.device();
  auto s = std::make_unique<Scratch>();
  s->n_rows = n;
  s->n_logit_rows = m;
  s->ids = allocate(d, DType::kI32, {n});
  s->positions = allocate(d, DType::kI32, {n});
  s->x = allocate(d, DType::kF32, {n, h.n_embd});
  s->h = allocate(d, DType::kF32, {n, h.n_embd});
  s->q = allocate(d, DType::kF32, {n, q_dim});
  s->k = allocate(d, DType::kF32, {n, kv_dim});
  s->v = allocate(d, DType::kF32, {n, kv_dim});
  s->attn = allocate(d, DType::kF32, {n, q_dim});
  s->proj = allocate(d, DType::kF32, {n, h.n_embd});
  s->gate = allocate(d, DType::kF32, {n, h.n_ff});
  s->up = allocate(d, DType::kF32, {n, h.n_ff});
  s->final_h = allocate(d, DType::kF32, {m, h.n_embd});
  // Host-memory devices write the caller's logits in place (forward).
  if (!d.host_accessible()) s->logits = allocate(d, DType::kF32, {m, h.n_vocab});
  scratch_ = std::move(s);
}

void DecoderModel::forward(std::span<const int32_t> tokens, const StepBatch& step, KVCache& kv,
                           Attention& attention, std::span<const int32_t> logit_rows,
                           std::vector<float>& logits) {
  const ModelHParams& h = hparams_;
  const auto n = static_cast<int32_t>(tokens.size());
  const auto m = static_cast<int32_t>(logit_rows.size());
  ensure_scratch(n, m);
  Scratch& s = *scratch_;
  Device& device = backend_.device();
  TensorView ids = reshaped(s.ids.view, {n});
  TensorView positions = reshaped(s.positions.view, {n});
  device.copy_from_host(ids.data, tokens.data(), sizeof(int32_t) * static_cast<size_t>(n));
  device.copy_from_host(positions.data, step.positions.data(),
                        sizeof(int32_t) * static_cast<size_t>(n));
  TensorView x = rows(s.x.view, 0, n), hn = rows(s.h.view, 0, n), q = rows(s.q.view, 0, n),
             k = rows(s.k.view, 0, n), v = rows(s.v.view, 0, n), attn = rows(s.attn.view, 0, n),
             proj = rows(s.proj.view, 0, n), gate = rows(s.gate.view, 0, n),
             up = rows(s.up.view, 0, n);
  const RopeParams global_rope{h.rope_freq_base, layout_.rope_pairs, rope_freqs_};
  const RopeParams local_rope{layout_.local_rope_base, layout_.rope_pairs, rope_freqs_};

  backend_.begin_forward(step);
  begin_attention_step(attention, step);
  ops_.embedding(token_embd_, ids, x);
  if (layout_.embed_scale) ops_.scale(x, std::sqrt(static_cast<float>(h.n_embd)), x);
  for (int32_t l = 0; l < h.n_layers; ++l) {
    const Layer& w = layers_[static_cast<size_t>(l)];
    const RopeParams& rope = is_local_layer(layout_, l) ? local_rope : global_rope;
    ops_.rmsnorm(x, w.attn_norm, h.rms_eps, hn);
    const TensorView qkv_w[] = {w.wq, w.wk, w.wv};
    const TensorView qkv[] = {q, k, v};
    ops_.matmuls(hn, qkv_w, qkv);
    if (layout_.qkv_bias) {
      ops_.add_bias(q, w.q_bias, q);
      ops_.add_bias(k, w.k_bias, k);
      ops_.add_bias(v, w.v_bias, v);
    }
    TensorView q_heads = reshaped(q, {n, h.n_heads, h.head_dim});
    TensorView k_heads = reshaped(k, {n, h.n_kv_heads, h.head_dim});
    if (layout_.qk_norm) {
      TensorView q_rows = reshaped(q, {int64_t{n} * h.n_heads, h.head_dim});
      TensorView k_rows = reshaped(k, {int64_t{n} * h.n_kv_heads, h.head_dim});
      ops_.rmsnorm(q_rows, w.q_norm, h.rms_eps, q_rows);
      ops_.rmsnorm(k_rows, w.k_norm, h.rms_eps, k_rows);
    }
    ops_.rope(q_heads, positions, rope);
    ops_.rope(k_heads, positions, rope);
    attention.forward(l, step, q_heads, k_heads, reshaped(v, {n, h.n_kv_heads, h.head_dim}), kv,
                      reshaped(attn, {n, h.n_heads, h.head_dim}));
    ops_.matmul(attn, w.wo, proj);
    if (layout_.post_norms) ops_.rmsnorm(proj, w.attn_post_norm, h.rms_eps, proj);
    ops_.add(x, proj, x);
    ops_.rmsnorm(x, w.ffn_norm, h.rms_eps, hn);
    const TensorView gate_up_w[] = {w.w_gate, w.w_up};
    const TensorView gate_up[] = {gate, up};
    ops_.matmuls(hn, gate_up_w, gate_up);
    if (layout_.ffn == DecoderLayout::Ffn::kGeGLU) {
      ops_.geglu(gate, up, gate);
    } else {
      ops_.swiglu(gate, up, gate);
    }
    ops_.matmul(gate, w.w_down, proj);
    if (layout_.post_norms) ops_.rmsnorm(proj, w.ffn_post_norm, h.rms_eps, proj);
    ops_.add(x, proj, x);
  }

  TensorView final_h = rows(s.final_h.view, 0, m);
  for (int32_t j = 0; j < m; ++j) {
    ops_.rmsnorm(rows(x, logit_rows[static_cast<size_t>(j)], 1), output_norm_, h.rms_eps,
                 rows(final_h, j, 1));
  }
  logits.resize(static_cast<size_t>(m) * static_cast<size_t>(h.n_vocab));
  // A device that works in host memory writes the logits where the caller
  // reads them (16 sequences' rows are 3 MiB to copy on the calling thread
  // while the backend's others wait); any other device writes its scratch,
  // copied back below.
  const bool in_place = device.host_accessible();
  TensorView out =
      TensorView{in_place ? logits.data() : s.logits.view.data, DType::kF32, Shape{m, h.n_vocab}};
  // A step of prompt chunks that all go on in the next step wants no logits.
  if (m > 0) ops_.matmul(final_h, output_, out);
  backend_.end_forward();
  // (With no logits row, logits.data() may be null: no copy, not a 0-byte one.)
  if (m > 0 && !in_place) device.copy_to_host(logits.data(), out.data, out.bytes());
  device.synchronize();
}

std::unique_ptr<Model> make_model(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams,
                                  Backend& backend, uint32_t backend_abi_minor) {
  const Architecture* arch = find_architecture(hparams.architecture);
  if (arch == nullptr) {
    throw Error(ErrorKind::kModelFile, file->path().string() + ": general.architecture '" +
                                           hparams.architecture + "' is not supported");
  }
  return std::make_unique<DecoderModel>(std::move(file), hparams, arch->layout, backend,
                                        backend_abi_minor);
}

}  // namespace duet
