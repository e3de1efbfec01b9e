// forward_pass.h — what happens between Backend::begin_forward and
// end_forward: commands are queued, then launched kernel by kernel,
// captured into a CUDA graph or replayed from it.
//
// begin(step) copies the step's metadata (positions, slots, block tables;
// step_metadata.h) to device memory at fixed addresses, queued on the
// stream ahead of the pass. Ops and attention calls then only queue their
// commands. end() fuses them (command_fusion.h) and, as GraphPolicy
// decides, launches them one by one, captures them into a graph and
// launches it, or launches the graph captured earlier. A one-sequence
// decode pass of SmolLM2 is about 270 launches after fusion; replaying them
// as one graph removes the CPU launch cost of each and most of the gaps
// between them.
//
// Why queue rather than launch as the calls come: CheckedOps reads the
// token ids back (a device-to-host copy and a synchronisation) after
// begin_forward, and a stream being captured allows neither. Queuing lets
// those transfers run normally and the capture happen at end(), around
// launches only. A transfer in the middle of a pass (Device calls flush())
// launches what is queued first, so it never overtakes earlier work; that
// pass then runs eagerly, since it is no longer one unit.
//
// Outside a pass every command is launched at once.
// Thread-safety: none; the backend's one thread drives it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "commands.h"
#include "cuda_device.h"
#include "duet/attention.h"
#include "graph_policy.h"
#include "launcher.h"
#include "step_metadata.h"

namespace duet::cuda {

// Device pointers to a step's metadata (see step_metadata.h).
struct StepMetadataView {
  const int32_t* row_position = nullptr;
  const int32_t* row_slot = nullptr;
  const int32_t* row_table = nullptr;
  const int32_t* block_tables = nullptr;
};

struct PassCounts {
  int64_t eager = 0;
  int64_t captured = 0;
  int64_t replayed = 0;
};

class ForwardPass {
 public:
  // `fuse`: run fuse_commands() over each pass's commands.
  ForwardPass(CudaDevice& device, bool cuda_graphs, bool pdl, bool fuse);
  ~ForwardPass();
  ForwardPass(const ForwardPass&) = delete;
  ForwardPass& operator=(const ForwardPass&) = delete;

  void begin(const StepBatch& step);
  void end();

  // Launches `command` now outside a pass; queues it inside one.
  void submit(const Command& command);

  // Launches every queued command now (eagerly) and marks the pass split.
  void flush();

  // Device pointers to `step`'s metadata. Inside a pass, for the StepBatch
  // begin() received (the same object), the copy begin() made; otherwise
  // `step` is copied to the device first, after flushing, so queued work
  // keeps reading what it was queued with.
  StepMetadataView metadata(const StepBatch& step);

  const PassCounts& counts() const { return counts_; }

 private:
  void upload(const StepBatch& step);
  std::vector<Command> launches(const std::vector<Command>& commands) const;
  void run_eagerly(const std::vector<Command>& commands);
  void capture(const std::vector<Command>& commands);
  void release_graph();

  CudaDevice& device_;
  Launcher launcher_;
  bool fuse_;
  GraphPolicy policy_;
  PassCounts counts_;

  bool in_pass_ = false;
  bool eligible_ = false;
  bool split_ = false;
  const StepBatch* uploaded_ = nullptr;  // whose metadata the buffer holds, in a pass
  std::vector<Command> queued_;

  StepLayout layout_;
  std::unique_ptr<Buffer> metadata_;  // layout_.elements() int32 on the device
  int32_t* staging_ = nullptr;        // pinned host copy source, same size
  cudaEvent_t staged_ = nullptr;      // the last copy out of staging_ is done
  cudaGraphExec_t graph_ = nullptr;
};

}  // namespace duet::cuda
