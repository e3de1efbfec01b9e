// session_impl.h — what a Session is made of (internal to core).
#pragma once

#include <chrono>

#include "duet/attention.h"
#include "duet/kv_cache.h"
#include "duet/session.h"
#include "duet/tokenizer.h"
#include "kv/kv_allocator.h"
#include "kv/kv_residency.h"
#include "models/model.h"
#include "sampling/sampler_chain.h"

namespace duet {

// Throws duet::Error(kInputRejected) naming the first id of `prompt` outside
// [0, n_vocab): what a new session and a continued one both refuse.
void check_prompt_ids(std::span<const int32_t> prompt, int32_t n_vocab);

class DUET_LOCAL Session::Impl {
 public:
  // `sequence`: the sequence's id in `allocator`, which no other open
  // session or scheduled request uses.
  Impl(Model& model, KVCache& kv, KVAllocator& allocator, int32_t sequence, Attention& attention,
       std::unique_ptr<SamplerChain> chain, const Tokenizer& tokenizer, TextSink& sink,
       std::span<const int32_t> prompt);
  ~Impl();  // returns the sequence's cache blocks

  // Where forward passes run: the backend of the stage now running. A stage
  // on another backend moves the session there (Pipeline::run_stages), its
  // cache handed over (kv_handover.h).
  Model* model;
  KVCache* kv;
  Attention* attention;
  size_t placement = 0;              // the index of that backend in PipelineCheck::placements
  KVResidency* residency = nullptr;  // the pipeline's; null with one placement
  KVAllocator& allocator;
  const int32_t sequence;
  std::unique_ptr<SamplerChain> chain;  // the session's own: links may keep state
  const Tokenizer& tokenizer;
  TextSink& sink;

  std::vector<int32_t> tokens;
  int32_t prompt_tokens;
  std::vector<float> logits;
  std::vector<float> kept_logits;
  int32_t logit_rows = 0;
  int32_t logits_position = 0;  // position of the token whose logits are row 0

  // Row `row` of `logits`. REQUIRES: 0 <= row < logit_rows.
  std::span<const float> logits_row(int32_t row) const {
    const auto vocab = static_cast<size_t>(model->hparams().n_vocab);
    return std::span<const float>(logits).subspan(static_cast<size_t>(row) * vocab, vocab);
  }
  FinishReason finish = FinishReason::kNone;
  SessionStats stats;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

}  // namespace duet
