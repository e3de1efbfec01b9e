// sampler_chain.h — the ordered links of a pipeline's sampler chain and the
// final draw (internal to core).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "duet/sampler.h"

namespace duet {

// The RNG stream (SamplingContext::sequence) every request draws from: a
// request's random numbers depend on its seed and its token index only, so
// the same request gives the same tokens alone, in a batch, or preempted
// and resumed.
constexpr uint32_t kRequestStream = 0;

class SamplerChain {
 public:
  // `labels[i]` names link i in errors, e.g. "sampler 'top_k' (plugin
  // 'samplers', components.sampler.chain[2])"; missing ones fall back to
  // "sampler 'NAME'".
  SamplerChain(uint64_t seed, std::vector<std::shared_ptr<Sampler>> links,
               std::vector<std::string> labels = {});

  // Picks the next token of sequence `sequence` from one row of logits.
  // Every link applies in order; if none selects, a token is drawn from the
  // softmax of what remains with counter_uniform(seed, sequence, step, 0),
  // walking candidates in id order (as the `dist` link does).
  // Throws duet::Error(kPlugin) if a link breaks the Candidates contract or
  // throws something other than a duet::Error (std::bad_alloc passes as
  // it is); a link's duet::Error keeps its kind. Every message starts with
  // the link's label.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, uint32_t sequence,
                 uint64_t step);

 private:
  uint64_t seed_;
  std::vector<std::shared_ptr<Sampler>> links_;
  std::vector<std::string> labels_;
  Candidates scratch_;
};

}  // namespace duet
