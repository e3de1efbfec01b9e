// Runs attention 'sliding_window' (examples/attention-plugin) and the
// reference backend's 'full' on the same random queries, keys and values —
// two sequences in paged blocks, a prefill step then a mixed step — and
// writes inputs and both outputs as JSON for tests/sliding_window_oracle.py,
// which recomputes the attention with NumPy.
//   usage: sliding_window_driver BUILD_DIR WINDOW SINKS DTYPE OUT.json
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "duet/app/plugin_host.h"
#include "duet/error.h"

namespace {

constexpr int32_t kHeads = 4, kKvHeads = 2, kHeadDim = 32, kBlock = 4, kCapacity = 64;

struct Sequence {
  std::vector<int32_t> blocks;
  int32_t cached = 0;
};

void write_floats(std::ostream& out, const char* key, const std::vector<float>& values) {
  out << '"' << key << "\":[";
  char buf[32];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(values[i]));
    out << (i ? "," : "") << buf;
  }
  out << ']';
}

duet::DType dtype(const std::string& name) {
  const std::optional<duet::DType> type = duet::dtype_from_name(name);
  if (!type) throw duet::Error(duet::ErrorKind::kUsage, "unknown dtype '" + name + "'");
  return *type;
}

int run(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: sliding_window_driver BUILD_DIR WINDOW SINKS DTYPE OUT.json\n";
    return 2;
  }
  const std::string build = argv[1];
  duet::PluginHost host;
  for (const char* name : {"duet-reference.so", "duet-sliding-window.so"}) {
    const duet::PluginRecord r = host.load(build + "/plugins/" + name);
    if (!r.loaded) throw duet::Error(duet::ErrorKind::kPlugin, r.path.string() + ": " + r.refusal);
  }
  std::shared_ptr<duet::Backend> backend =
      host.create_backend("reference", duet::Options("backend.options"));
  const duet::AttentionSpec spec{kHeads, kKvHeads, kHeadDim,
                                 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
  duet::Options options("components.attention.options");
  options.set("window", argv[2]);
  options.set("sinks", argv[3]);
  std::shared_ptr<duet::Attention> window =
      host.create_attention(*backend, "sliding_window", spec, options);
  std::unique_ptr<duet::Attention> full = backend->create_attention("full", spec);
  const duet::KVCacheSpec kv_spec{"contiguous", 1,      kKvHeads,      kHeadDim,
                                  kCapacity,    kBlock, dtype(argv[4])};
  const duet::Attention* const both[] = {window.get(), full.get()};
  for (const duet::Attention* a : both) {
    if (const duet::Support s = a->check(kv_spec); !s.ok())
      throw duet::Error(duet::ErrorKind::kConfig, s.reasons.front());
  }
  std::unique_ptr<duet::KVCache> window_kv = backend->create_kv_cache(kv_spec);
  std::unique_ptr<duet::KVCache> full_kv = backend->create_kv_cache(kv_spec);

  // Blocks out of order, so positions must be found through the table.
  std::vector<Sequence> seqs = {{{5, 2, 9, 0, 14, 7}, 0}, {{3, 11, 1, 8}, 0}};
  const std::vector<std::vector<int32_t>> steps = {{19, 7}, {1, 5}};  // tokens per sequence
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  const auto random = [&](size_t n) {
    std::vector<float> x(n);
    for (float& f : x) f = uniform(rng);
    return x;
  };

  std::ofstream out(argv[5]);
  out << "{\"n_heads\":" << kHeads << ",\"n_kv_heads\":" << kKvHeads << ",\"head_dim\":" << kHeadDim
      << ",\"scale\":" << spec.scale << ",\"steps\":[";
  for (size_t s = 0; s < steps.size(); ++s) {
    duet::StepBatch step;
    std::ostringstream rows;
    for (size_t q = 0; q < seqs.size(); ++q) {
      Sequence& seq = seqs[q];
      duet::SequenceStep part;
      part.seq_id = static_cast<int32_t>(q);
      part.first_token = step.n_tokens;
      part.n_tokens = steps[s][q];
      part.context_len = seq.cached + part.n_tokens;
      part.block_table = seq.blocks;
      for (int32_t p = seq.cached; p < part.context_len; ++p) {
        step.positions.push_back(p);
        step.slot_mapping.push_back(seq.blocks[static_cast<size_t>(p / kBlock)] * kBlock +
                                    p % kBlock);
        rows << (step.positions.size() > 1 ? "," : "") << '[' << q << ',' << p << ']';
      }
      step.n_tokens += part.n_tokens;
      if (part.n_tokens > 1) step.n_prefill_tokens += part.n_tokens;
      seq.cached = part.context_len;
      step.sequences.push_back(part);
    }
    const auto n = static_cast<size_t>(step.n_tokens);
    std::vector<float> q = random(n * kHeads * kHeadDim), k = random(n * kKvHeads * kHeadDim),
                       v = random(n * kKvHeads * kHeadDim);
    std::vector<float> window_out(q.size()), full_out(q.size());
    const auto view = [&](std::vector<float>& x, int64_t heads) {
      return duet::TensorView{x.data(), duet::DType::kF32,
                              duet::Shape{step.n_tokens, heads, kHeadDim}};
    };
    window->forward(0, step, view(q, kHeads), view(k, kKvHeads), view(v, kKvHeads), *window_kv,
                    view(window_out, kHeads));
    full->forward(0, step, view(q, kHeads), view(k, kKvHeads), view(v, kKvHeads), *full_kv,
                  view(full_out, kHeads));
    out << (s ? "," : "") << "{\"rows\":[" << rows.str() << "],";
    write_floats(out, "q", q);
    out << ',';
    write_floats(out, "k", k);
    out << ',';
    write_floats(out, "v", v);
    out << ',';
    write_floats(out, "out", window_out);
    out << ',';
    write_floats(out, "full", full_out);
    out << '}';
  }
  out << "]}\n";
  return out ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sliding_window_driver: " << e.what() << "\n";
    return 1;
  }
}
