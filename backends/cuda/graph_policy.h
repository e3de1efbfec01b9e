// graph_policy.h — when a forward pass is captured into a CUDA graph, when
// the graph is replayed, and when the pass runs kernel by kernel.
//
// A graph replays kernels with the arguments they were captured with, so it
// is only valid for a pass whose commands are identical (commands.h): same
// ops, same device pointers, same shapes. Core's decode passes (every row
// the single new token of its sequence, one sequence or a batch of them)
// are: its scratch buffers keep their addresses from step to step and what
// does change (token ids, positions, slots, context lengths, block tables)
// is read by the kernels from device memory the backend refreshes before
// each pass. The rules:
//   - a pass that is not eligible (any prompt row, graphs off, or split by a
//     device transfer in the middle) runs eagerly and leaves the graph
//     alone;
//   - an eligible pass whose commands equal the graph's replays it;
//   - the first eligible pass is captured;
//   - an eligible pass that differs from the graph (a new session grew the
//     scratch buffers, a new cache) runs eagerly the first time and is
//     captured, replacing the graph, if the next eligible pass is the same
//     again. So the first step of a new shape costs one eager pass, and
//     passes that keep changing never pay for a capture they cannot reuse.
// Pure host code; not thread-safe.
#pragma once

#include <optional>
#include <vector>

#include "commands.h"
#include "duet/step_batch.h"

namespace duet::cuda {

enum class PassAction { kEager, kCapture, kReplay };

// Whether `step` is a decode step, the passes a graph is kept for: at least
// one row and every row a sequence's single new token. (A batch of another
// size has other commands, so it replaces the graph as any new pass does.)
bool is_decode_step(const StepBatch& step);

// Whether a pass of these commands may be captured: not when one goes
// through cuBLAS (a decode step of matmul_min_rows sequences or more), whose
// handle and scratch buffers are made and grown as it runs — an allocation
// that a capture refuses, or a replay would write through once freed.
bool capturable(const std::vector<Command>& commands);

class GraphPolicy {
 public:
  explicit GraphPolicy(bool enabled) : enabled_(enabled) {}

  // What to do with a finished pass; updates the policy's state as if the
  // action succeeded.
  PassAction next(bool eligible, const std::vector<Command>& commands);

  // Drops the graph's commands (the capture failed or the graph was freed).
  void forget();

 private:
  bool enabled_;
  std::optional<std::vector<Command>> graph_;      // what the graph holds
  std::optional<std::vector<Command>> candidate_;  // the last eligible pass run eagerly
};

}  // namespace duet::cuda
