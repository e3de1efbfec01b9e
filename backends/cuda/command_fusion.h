// command_fusion.h — fewer kernel launches for the same arithmetic.
//
// A decode pass is hundreds of tiny kernels, each costing a few
// microseconds of launch and ramp-up however little it computes, so
// merging neighbours is worth more than any kernel tuning. Fusion only
// merges *consecutive* commands and never reorders, and each rule checks
// that the merged launch reads and writes exactly what the separate ones
// did:
//   - GemvCalls with the same x, cols, rows of x and dtype (Q, K, V; gate, up), up to
//     kMaxGemvSegments, whose outputs overlap neither each other, x nor the
//     other weights, become one GemvCall;
//   - two single-target RopeCalls with the same positions, rows, head_dim
//     and parameters on disjoint tensors (Q and K) become one;
//   - a two-segment GemvCall of equal rows followed by a SwiGLUCall of
//     exactly its outputs (gate first) writing into one of them becomes one
//     GemvSwiGLUCall, which leaves both outputs as the three calls would;
//   - an AddCall followed by an RmsNormCall of exactly its sum (the
//     residual add and the next layer's norm) becomes one AddRmsNormCall
//     when the norm's output is the sum itself or lies apart from a, b, the
//     sum and the weight is apart from the sum.
// Every fused kernel computes each value with the same expressions as the
// separate kernels, so fusion changes no bit of any result.
// Pure host code; thread-safe.
#pragma once

#include <vector>

#include "commands.h"

namespace duet::cuda {

std::vector<Command> fuse_commands(const std::vector<Command>& commands);

}  // namespace duet::cuda
