// session_impl.h — what a Session is made of (internal to core).
#pragma once

#include "duet/attention.h"
#include "duet/kv_cache.h"
#include "duet/session.h"
#include "kv/kv_allocator.h"
#include "kv/kv_residency.h"
#include "models/model.h"
#include "sampling/sampler_chain.h"

namespace duet {

// Throws duet::Error(kInputRejected) naming the first id of `prompt` outside
// [0, n_vocab): what a session and a request both refuse.
void check_prompt_ids(std::span<const int32_t> prompt, int32_t n_vocab);

class DUET_LOCAL Session::Impl {
 public:
  // `sequence`: the sequence's id in `allocator`, which no other open
  // session or scheduled request uses.
  Impl(Model& model, KVCache& kv, KVAllocator& allocator, int32_t sequence, Attention& attention,
       std::unique_ptr<SamplerChain> chain, std::span<const int32_t> prompt);
  ~Impl();  // returns the sequence's cache blocks

  // Where forward passes run: a placement of the pipeline
  // (Pipeline::move_to_stage moves the session, its cache handed over).
  Model* model;
  KVCache* kv;
  Attention* attention;
  size_t placement = 0;              // the index of that backend in PipelineCheck::placements
  KVResidency* residency = nullptr;  // the pipeline's; null with one placement
  KVAllocator& allocator;
  const int32_t sequence;
  std::unique_ptr<SamplerChain> chain;
  std::vector<int32_t> tokens;
  const int32_t prompt_tokens;
  std::vector<float> logits;
  int32_t logit_rows = 0;
};

}  // namespace duet
