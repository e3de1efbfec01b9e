#include "command_fusion.h"

#include <cstdint>

namespace duet::cuda {
namespace {

// A byte range [begin, begin + bytes) of device memory.
struct Range {
  uintptr_t begin = 0;
  uint64_t bytes = 0;
};

Range range(const void* p, uint64_t bytes) { return Range{reinterpret_cast<uintptr_t>(p), bytes}; }
Range floats(const void* p, int64_t n) {
  return range(p, static_cast<uint64_t>(n) * sizeof(float));
}

bool overlap(Range a, Range b) {
  return a.bytes != 0 && b.bytes != 0 && a.begin < b.begin + b.bytes && b.begin < a.begin + a.bytes;
}

Range weights(const GemvCall& g, int s) {
  const GemvSegment& seg = g.segments[static_cast<size_t>(s)];
  const uint64_t row = dtype_row_bytes(g.dtype, static_cast<uint64_t>(g.cols)).value_or(0);
  return range(seg.w, row * static_cast<uint64_t>(seg.rows));
}

Range output(const GemvCall& g, int s) {
  const GemvSegment& seg = g.segments[static_cast<size_t>(s)];
  return floats(seg.out, seg.rows * g.x_rows);
}

// Appends `next`'s segment(s) to `into` if one launch computes the same.
bool merge(GemvCall& into, const GemvCall& next) {
  if (next.x != into.x || next.cols != into.cols || next.x_rows != into.x_rows ||
      next.dtype != into.dtype || into.count + next.count > kMaxGemvSegments) {
    return false;
  }
  const Range x = floats(into.x, into.cols * into.x_rows);
  for (int j = 0; j < next.count; ++j) {
    if (overlap(output(next, j), x)) return false;
    for (int i = 0; i < into.count; ++i) {
      if (overlap(output(into, i), x) || overlap(output(next, j), output(into, i)) ||
          overlap(output(next, j), weights(into, i)) ||
          overlap(output(into, i), weights(next, j))) {
        return false;
      }
    }
  }
  for (int j = 0; j < next.count; ++j) {
    into.segments[static_cast<size_t>(into.count++)] = next.segments[static_cast<size_t>(j)];
  }
  return true;
}

Range rotated(const RopeCall& r) { return floats(r.first.x, r.rows * r.first.heads * r.head_dim); }

bool merge(RopeCall& into, const RopeCall& next) {
  if (into.second.x != nullptr || next.second.x != nullptr || next.positions != into.positions ||
      next.rows != into.rows || next.head_dim != into.head_dim ||
      next.theta_base != into.theta_base || next.halves != into.halves ||
      next.freq_factors != into.freq_factors || overlap(rotated(into), rotated(next))) {
    return false;
  }
  into.second = next.first;
  return true;
}

// The fused call when `swiglu` gates exactly the two outputs of `g`.
bool fuse(const GemvCall& g, const SwiGLUCall& swiglu, GemvSwiGLUCall& out) {
  if (g.count != 2) return false;
  const GemvSegment& gate = g.segments[0];
  const GemvSegment& up = g.segments[1];
  if (gate.rows != up.rows || swiglu.n != gate.rows * g.x_rows || swiglu.gate != gate.out ||
      swiglu.up != up.out || (swiglu.out != gate.out && swiglu.out != up.out)) {
    return false;
  }
  out = GemvSwiGLUCall{
      g.x,     g.cols, g.dtype, gate.w, up.w, gate.rows, gate.out, up.out, swiglu.out == gate.out,
      g.x_rows};
  return true;
}

// The fused call when `norm` normalises exactly the sum `add` wrote.
bool fuse(const AddCall& add, const RmsNormCall& norm, AddRmsNormCall& out) {
  if (norm.x != add.out || norm.rows * norm.dim != add.n) return false;
  const Range sum = floats(add.out, add.n);
  const Range normed = floats(norm.out, add.n);
  const bool out_ok =
      norm.out == add.out || (!overlap(normed, floats(add.a, add.n)) &&
                              !overlap(normed, floats(add.b, add.n)) && !overlap(normed, sum));
  if (!out_ok || overlap(floats(norm.weight, norm.dim), sum)) return false;
  out = AddRmsNormCall{add.a, add.b, add.out, norm.weight, norm.eps, norm.rows, norm.dim, norm.out};
  return true;
}

}  // namespace

std::vector<Command> fuse_commands(const std::vector<Command>& commands) {
  std::vector<Command> out;
  out.reserve(commands.size());
  for (const Command& c : commands) {
    if (!out.empty()) {
      Command& last = out.back();
      if (auto* g = std::get_if<GemvCall>(&last); g && std::holds_alternative<GemvCall>(c)) {
        if (merge(*g, std::get<GemvCall>(c))) continue;
      }
      if (auto* r = std::get_if<RopeCall>(&last); r && std::holds_alternative<RopeCall>(c)) {
        if (merge(*r, std::get<RopeCall>(c))) continue;
      }
      if (auto* g = std::get_if<GemvCall>(&last); g && std::holds_alternative<SwiGLUCall>(c)) {
        GemvSwiGLUCall fused;
        if (fuse(*g, std::get<SwiGLUCall>(c), fused)) {
          last = fused;
          continue;
        }
      }
      if (auto* a = std::get_if<AddCall>(&last); a && std::holds_alternative<RmsNormCall>(c)) {
        AddRmsNormCall fused;
        if (fuse(*a, std::get<RmsNormCall>(c), fused)) {
          last = fused;
          continue;
        }
      }
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace duet::cuda
