#include "forward_pass.h"

#include <utility>

#include "command_fusion.h"
#include "cuda_error.h"

namespace duet::cuda {

ForwardPass::ForwardPass(CudaDevice& device, bool cuda_graphs, bool pdl, bool fuse)
    : device_(device), launcher_(device, pdl), fuse_(fuse), policy_(cuda_graphs) {
  check_cuda(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming), "creating an event");
}

ForwardPass::~ForwardPass() {
  release_graph();
  if (staging_ != nullptr) {
    (void)cudaEventSynchronize(staged_);
    (void)cudaFreeHost(staging_);
  }
  (void)cudaEventDestroy(staged_);
}

void ForwardPass::begin(const StepBatch& step) {
  device_.activate();
  // Left over when a forward pass threw before end_forward: every submitted
  // command runs, in order, so they run now.
  if (!queued_.empty()) run_eagerly(std::exchange(queued_, {}));
  in_pass_ = true;
  split_ = false;
  eligible_ = is_decode_step(step);
  upload(step);
  uploaded_ = &step;
}

void ForwardPass::end() {
  if (!in_pass_) return;
  in_pass_ = false;
  uploaded_ = nullptr;
  std::vector<Command> commands;
  commands.swap(queued_);
  switch (
      policy_.next(eligible_ && !split_ && !commands.empty() && capturable(commands), commands)) {
    case PassAction::kEager:
      run_eagerly(commands);
      ++counts_.eager;
      break;
    case PassAction::kCapture:
      capture(commands);
      ++counts_.captured;
      break;
    case PassAction::kReplay:
      check_cuda(cudaGraphLaunch(graph_, device_.stream()), "launching the decode graph");
      ++counts_.replayed;
      break;
  }
}

void ForwardPass::submit(const Command& command) {
  if (in_pass_) {
    queued_.push_back(command);
  } else {
    launcher_.run(command);
  }
}

void ForwardPass::flush() {
  if (queued_.empty()) return;
  split_ = true;
  std::vector<Command> commands;
  commands.swap(queued_);
  run_eagerly(commands);
}

StepMetadataView ForwardPass::metadata(const StepBatch& step) {
  // Inside a pass the buffer is known to hold `uploaded_`; outside one the
  // address of a StepBatch says nothing about its contents.
  if (!in_pass_ || &step != uploaded_) {
    flush();
    upload(step);
    uploaded_ = in_pass_ ? &step : nullptr;
  }
  auto* base = static_cast<const int32_t*>(metadata_->data());
  return StepMetadataView{base + layout_.row_position(), base + layout_.row_slot(),
                          base + layout_.row_table(), base + layout_.block_tables()};
}

void ForwardPass::upload(const StepBatch& step) {
  const StepLayout layout = layout_for(step, layout_);
  if (!metadata_ || !(layout == layout_)) {
    const uint64_t bytes = static_cast<uint64_t>(layout.elements()) * sizeof(int32_t);
    metadata_.reset();  // cudaFree waits for queued work that reads it
    metadata_ = device_.allocate(bytes);
    if (staging_ != nullptr) {
      check_cuda(cudaEventSynchronize(staged_), "waiting for the last metadata copy");
      check_cuda(cudaFreeHost(staging_), "freeing pinned memory");
      staging_ = nullptr;
    }
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&staging_), bytes),
               "allocating pinned memory");
    layout_ = layout;
  }
  // The copy queued for the previous step may not have read staging_ yet.
  check_cuda(cudaEventSynchronize(staged_), "waiting for the last metadata copy");
  pack_step(step, layout_, staging_);
  const uint64_t used = static_cast<uint64_t>(used_elements(step, layout_)) * sizeof(int32_t);
  check_cuda(
      cudaMemcpyAsync(metadata_->data(), staging_, used, cudaMemcpyHostToDevice, device_.stream()),
      "copying step metadata to the device");
  check_cuda(cudaEventRecord(staged_, device_.stream()), "recording an event");
}

std::vector<Command> ForwardPass::launches(const std::vector<Command>& commands) const {
  return fuse_ ? fuse_commands(commands) : commands;
}

void ForwardPass::run_eagerly(const std::vector<Command>& commands) {
  for (const Command& c : launches(commands)) launcher_.run(c);
}

void ForwardPass::capture(const std::vector<Command>& commands) {
  release_graph();
  const std::vector<Command> fused = launches(commands);
  cudaStream_t stream = device_.stream();
  // Thread-local mode: only this thread's CUDA calls are checked for
  // capture safety, so another thread's unrelated work cannot break it.
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
             "starting a graph capture");
  cudaGraph_t graph = nullptr;
  try {
    for (const Command& c : fused) launcher_.run(c);
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    policy_.forget();
    throw;
  }
  cudaError_t status = cudaStreamEndCapture(stream, &graph);
  if (status == cudaSuccess) {
    status = cudaGraphInstantiate(&graph_, graph, 0);
    (void)cudaGraphDestroy(graph);
  }
  if (status != cudaSuccess) {
    graph_ = nullptr;
    policy_.forget();
    check_cuda(status, "capturing the decode graph");
  }
  // Capturing only recorded the kernels; this runs them.
  check_cuda(cudaGraphLaunch(graph_, stream), "launching the decode graph");
}

void ForwardPass::release_graph() {
  if (graph_ == nullptr) return;
  // The graph may still be running from its last launch.
  (void)cudaStreamSynchronize(device_.stream());
  (void)cudaGraphExecDestroy(graph_);
  graph_ = nullptr;
}

}  // namespace duet::cuda
