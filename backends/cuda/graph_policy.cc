#include "graph_policy.h"

namespace duet::cuda {

bool is_decode_step(const StepBatch& step) {
  if (step.n_tokens == 0 || step.n_prefill_tokens != 0) return false;
  for (const SequenceStep& s : step.sequences) {
    if (s.n_tokens != 1) return false;
  }
  return true;
}

bool capturable(const std::vector<Command>& commands) {
  for (const Command& c : commands) {
    if (std::holds_alternative<GemmCall>(c)) return false;
  }
  return true;
}

PassAction GraphPolicy::next(bool eligible, const std::vector<Command>& commands) {
  if (!enabled_ || !eligible) return PassAction::kEager;
  if (graph_ && *graph_ == commands) {
    candidate_.reset();  // the candidate was not followed by itself
    return PassAction::kReplay;
  }
  if (!graph_ || (candidate_ && *candidate_ == commands)) {
    graph_ = commands;
    candidate_.reset();
    return PassAction::kCapture;
  }
  candidate_ = commands;
  return PassAction::kEager;
}

void GraphPolicy::forget() {
  graph_.reset();
  candidate_.reset();
}

}  // namespace duet::cuda
