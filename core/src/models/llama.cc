#include "models/llama.h"

#include "duet/error.h"

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

}  // namespace

// Activations for one step, grown to the largest step seen so far.
struct LlamaModel::Scratch {
  int32_t n_rows = 0, n_logit_rows = 0;
  DeviceTensor ids, positions, x, h, q, k, v, attn, proj, gate, up, final_h, logits;
};

LlamaModel::LlamaModel(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams,
                       Backend& backend)
    : file_(std::move(file)), hparams_(hparams), backend_(backend), ops_(backend) {
  const ModelHParams& h = hparams_;
  const int64_t kv_dim = int64_t{h.n_kv_heads} * h.head_dim;
  token_embd_ = bind("token_embd.weight", {h.n_vocab, h.n_embd});
  output_norm_ = bind("output_norm.weight", {h.n_embd});
  output_ = file_->find_tensor("output.weight") ? bind("output.weight", {h.n_vocab, h.n_embd})
                                                : token_embd_;
  for (int32_t l = 0; l < h.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    layers_.push_back(Layer{
        bind(b + "attn_norm.weight", {h.n_embd}), bind(b + "attn_q.weight", {h.n_embd, h.n_embd}),
        bind(b + "attn_k.weight", {kv_dim, h.n_embd}),
        bind(b + "attn_v.weight", {kv_dim, h.n_embd}),
        bind(b + "attn_output.weight", {h.n_embd, h.n_embd}),
        bind(b + "ffn_norm.weight", {h.n_embd}), bind(b + "ffn_gate.weight", {h.n_ff, h.n_embd}),
        bind(b + "ffn_up.weight", {h.n_ff, h.n_embd}),
        bind(b + "ffn_down.weight", {h.n_embd, h.n_ff})});
  }
}

LlamaModel::~LlamaModel() = default;

TensorView LlamaModel::bind(const std::string& name, Shape expected) {
  const std::string where = file_->path().string() + ": tensor '" + name + "'";
  const GgufTensorInfo* info = file_->find_tensor(name);
  if (info == nullptr) throw Error(ErrorKind::kModelFile, where + " is missing");
  if (!(info->shape == expected)) {
    throw Error(ErrorKind::kModelFile, where + " has shape " + info->shape.str() +
                                           "; this model's hyperparameters need " + expected.str());
  }
  if (!info->supported()) {
    throw Error(
        ErrorKind::kModelFile,
        where + " has type " + info->type_name() +
            ", which Duet cannot compute with; supported: f32, f16, bf16, q4_0, q4_1, q8_0");
  }
  const DType dtype = *info->dtype;
  const bool is_matrix = expected.rank == 2;
  if (!is_matrix && dtype != DType::kF32) {
    throw Error(ErrorKind::kModelFile,
                where + " is " + std::string(dtype_name(dtype)) + "; norm weights must be f32");
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

void LlamaModel::ensure_scratch(int32_t n_rows, int32_t n_logit_rows) {
  if (scratch_ && scratch_->n_rows >= n_rows && scratch_->n_logit_rows >= n_logit_rows) return;
  const ModelHParams& h = hparams_;
  const int32_t n = std::max(n_rows, scratch_ ? scratch_->n_rows : 0);
  const int32_t m = std::max(n_logit_rows, scratch_ ? scratch_->n_logit_rows : 0);
  const int64_t kv_dim = int64_t{h.n_kv_heads} * h.head_dim;
  Device& d = backend_.device();
  auto s = std::make_unique<Scratch>();
  s->n_rows = n;
  s->n_logit_rows = m;
  s->ids = allocate(d, DType::kI32, {n});
  s->positions = allocate(d, DType::kI32, {n});
  s->x = allocate(d, DType::kF32, {n, h.n_embd});
  s->h = allocate(d, DType::kF32, {n, h.n_embd});
  s->q = allocate(d, DType::kF32, {n, h.n_embd});
  s->k = allocate(d, DType::kF32, {n, kv_dim});
  s->v = allocate(d, DType::kF32, {n, kv_dim});
  s->attn = allocate(d, DType::kF32, {n, h.n_embd});
  s->proj = allocate(d, DType::kF32, {n, h.n_embd});
  s->gate = allocate(d, DType::kF32, {n, h.n_ff});
  s->up = allocate(d, DType::kF32, {n, h.n_ff});
  s->final_h = allocate(d, DType::kF32, {m, h.n_embd});
  s->logits = allocate(d, DType::kF32, {m, h.n_vocab});
  scratch_ = std::move(s);
}

void LlamaModel::forward(std::span<const int32_t> tokens, const StepBatch& step, KVCache& kv,
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
  const RopeParams rope{h.rope_freq_base, RopeParams::Pairs::kAdjacent};

  backend_.begin_forward(step);
  ops_.embedding(token_embd_, ids, x);
  for (int32_t l = 0; l < h.n_layers; ++l) {
    const Layer& w = layers_[static_cast<size_t>(l)];
    ops_.rmsnorm(x, w.attn_norm, h.rms_eps, hn);
    ops_.matmul(hn, w.wq, q);
    ops_.matmul(hn, w.wk, k);
    ops_.matmul(hn, w.wv, v);
    TensorView q_heads = reshaped(q, {n, h.n_heads, h.head_dim});
    TensorView k_heads = reshaped(k, {n, h.n_kv_heads, h.head_dim});
    ops_.rope(q_heads, positions, rope);
    ops_.rope(k_heads, positions, rope);
    attention.forward(l, step, q_heads, k_heads, reshaped(v, {n, h.n_kv_heads, h.head_dim}), kv,
                      reshaped(attn, {n, h.n_heads, h.head_dim}));
    ops_.matmul(attn, w.wo, proj);
    ops_.add(x, proj, x);
    ops_.rmsnorm(x, w.ffn_norm, h.rms_eps, hn);
    ops_.matmul(hn, w.w_gate, gate);
    ops_.matmul(hn, w.w_up, up);
    ops_.swiglu(gate, up, gate);
    ops_.matmul(gate, w.w_down, proj);
    ops_.add(x, proj, x);
  }

  TensorView final_h = rows(s.final_h.view, 0, m);
  for (int32_t j = 0; j < m; ++j) {
    ops_.rmsnorm(rows(x, logit_rows[static_cast<size_t>(j)], 1), output_norm_, h.rms_eps,
                 rows(final_h, j, 1));
  }
  TensorView out = TensorView{s.logits.view.data, DType::kF32, Shape{m, h.n_vocab}};
  // A step of prompt chunks that all go on in the next step wants no logits.
  if (m > 0) ops_.matmul(final_h, output_, out);
  backend_.end_forward();
  logits.resize(static_cast<size_t>(m) * static_cast<size_t>(h.n_vocab));
  device.copy_to_host(logits.data(), out.data, out.bytes());
  device.synchronize();
}

}  // namespace duet

namespace duet {

std::unique_ptr<Model> make_model(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams,
                                  Backend& backend) {
  // Every architecture core supports (supported_architectures()) is Llama's
  // layer layout.
  return std::make_unique<LlamaModel>(std::move(file), hparams, backend);
}

}  // namespace duet
