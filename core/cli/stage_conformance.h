// stage_conformance.h — `duet conformance`'s cases for a decode-loop stage.
//
// The stage runs after core's prefill on a small Llama with random weights
// (core/random_model, written to a temporary folder) on the reference
// backend, and must give the tokens core's `decode` stage gives — a
// decode-loop stage may change how many forward passes it takes (drafts,
// verified), not what it generates:
//   greedy        4 prompts one at a time (`duet run`'s path: one request
//                 of the pipeline's engine), each ending where core's
//                 decode ends for as many tokens;
//   sampled       the same under top_k 40 and temperature 4 (tokens far from
//                 greedy ones), seeded;
//   batched       the 4 prompts at once through one scheduler (`duet
//                 serve`'s path), greedy and sampled, equal to the above;
//   small cache   a 64-token cache: the stage stops for want of room with
//                 finish `length` (no error) where core's decode does.
// The prompts repeat runs of what the model will generate, so a drafting
// stage finds drafts to verify.
#pragma once

#include <vector>

#include "conformance_cases.h"

namespace duet::cli {

// Stage `info` made with `options`. A duet::Error(kConfig) from its factory
// (a required option missing) is thrown, not a failed case.
std::vector<ConformanceCase> stage_conformance(const PluginHost& host, const ComponentInfo& info,
                                               const Options& options);

}  // namespace duet::cli
