#include "graph_policy.h"

namespace duet::cuda {

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
