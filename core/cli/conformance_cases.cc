#include "conformance_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <random>

#include "duet/attention.h"
#include "duet/backend.h"
#include "duet/error.h"
#include "duet/kv_cache.h"
#include "duet/quant.h"
#include "duet/sampler.h"

namespace duet::cli {
namespace {

// Small enough to run in a second, large enough for paged tables, several
// KV heads per query head group, and head_dim a q8_0 block.
constexpr int32_t kLayers = 2;
constexpr int32_t kHeads = 4;
constexpr int32_t kKvHeads = 2;
constexpr int32_t kHeadDim = 32;
constexpr int32_t kCapacity = 256;
constexpr int32_t kLayer = 1;  // the layer every step runs on

// A prompt, a decode step, a long chunk, decode steps and a short chunk.
struct Step {
  int32_t first, n;
};
constexpr Step kSteps[] = {{0, 5}, {5, 1}, {6, 60}, {66, 1}, {67, 3}, {70, 1}};

// The precision contract (docs/plugins.md) as a normalised squared error.
double bound_for(DType dtype) { return dtype == DType::kQ8_0 ? 1e-8 : 1e-10; }

// Uniform values in [lo, hi), rounded to f16 for an f16 cache so that both
// caches hold exactly what they were given.
std::vector<float> values(size_t n, uint32_t seed, float lo, float hi, DType dtype) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& x : out) {
    x = dist(rng);
    if (dtype == DType::kF16) x = f16_to_f32(f32_to_f16(x));
  }
  return out;
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double{got[i]} - want[i];
    err += std::isfinite(d) ? d * d : INFINITY;
    ref += double{want[i]} * want[i];
  }
  return ref == 0.0 ? err : err / ref;
}

// One attention and its cache on one backend, fed step by step.
class Run {
 public:
  Run(Backend& backend, std::shared_ptr<Attention> attention, const KVCacheSpec& spec)
      : Run(backend, std::move(attention), backend.create_kv_cache(spec)) {}
  Run(Backend& backend, std::shared_ptr<Attention> attention, std::shared_ptr<KVCache> kv)
      : backend_(backend), attention_(std::move(attention)), kv_(std::move(kv)) {}

  // Runs positions [first, first + n) of one sequence held in blocks
  // `table`; returns the f32 output.
  std::vector<float> step(const std::vector<int32_t>& table, Step s, uint32_t seed, DType dtype) {
    const int32_t block = kv_->spec().block_tokens;
    StepBatch batch;
    batch.n_tokens = s.n;
    batch.n_prefill_tokens = s.n > 1 ? s.n : 0;
    for (int32_t p = s.first; p < s.first + s.n; ++p) {
      batch.positions.push_back(p);
      batch.slot_mapping.push_back(table[static_cast<size_t>(p / block)] * block + p % block);
    }
    batch.sequences.push_back(SequenceStep{0, 0, s.n, s.first + s.n, table});
    const auto rows = static_cast<size_t>(s.n);
    const TensorView q = upload(values(rows * kHeads * kHeadDim, seed, -2, 2, DType::kF32),
                                Shape{s.n, kHeads, kHeadDim});
    const TensorView k = upload(values(rows * kKvHeads * kHeadDim, seed + 1, -2, 2, dtype),
                                Shape{s.n, kKvHeads, kHeadDim});
    const TensorView v = upload(values(rows * kKvHeads * kHeadDim, seed + 2, -1, 1, dtype),
                                Shape{s.n, kKvHeads, kHeadDim});
    const TensorView out =
        upload(std::vector<float>(rows * kHeads * kHeadDim), Shape{s.n, kHeads, kHeadDim});
    attention_->forward(kLayer, batch, q, k, v, *kv_, out);
    std::vector<float> host(rows * kHeads * kHeadDim);
    Device& d = backend_.device();
    d.copy_to_host(host.data(), out.data, host.size() * sizeof(float));
    d.synchronize();
    buffers_.clear();
    return host;
  }

  std::vector<uint8_t> exported(int64_t slots) {
    std::vector<uint8_t> bytes;
    kv_->export_slots(slots, bytes);
    return bytes;
  }
  KVCache& kv() { return *kv_; }

 private:
  TensorView upload(const std::vector<float>& host, Shape shape) {
    Device& d = backend_.device();
    buffers_.push_back(d.allocate(host.size() * sizeof(float)));
    d.copy_from_host(buffers_.back()->data(), host.data(), host.size() * sizeof(float));
    return TensorView{buffers_.back()->data(), DType::kF32, shape};
  }

  Backend& backend_;
  std::shared_ptr<Attention> attention_;
  std::shared_ptr<KVCache> kv_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

std::string positions(Step s) {
  return "positions " + std::to_string(s.first) + ".." + std::to_string(s.first + s.n - 1);
}

const AttentionSpec kGeometry{kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(float{kHeadDim})};

// One layout of one dtype: every step of `got` against `want` (the
// reference), the caches compared after each. Returns false, with c.result
// FAIL and why, at the first difference.
bool run_steps(ConformanceCase& c, Run& want, Run& got, const KVCacheSpec& spec,
               const std::vector<int32_t>& table) {
  const int64_t slots =
      int64_t{*std::max_element(table.begin(), table.end()) + 1} * spec.block_tokens;
  uint32_t seed = 100;
  for (const Step s : kSteps) {
    const std::vector<float> expected = want.step(table, s, seed, spec.dtype);
    const std::vector<float> output = got.step(table, s, seed, spec.dtype);
    seed += 3;
    const double e = nmse(output, expected);
    c.worst_nmse = std::max(c.worst_nmse, e);
    if (!(e <= c.bound)) {
      c.result = "FAIL";
      c.detail = positions(s) + ": output off the reference's 'full' attention";
      return false;
    }
    if (got.exported(slots) != want.exported(slots)) {
      c.result = "FAIL";
      c.detail = positions(s) +
                 ": cache rows differ from what KVCache::write stores (a row left unwritten?)";
      return false;
    }
  }
  c.result = "pass";
  return true;
}

// Slots [17, 57) of an export of all kCapacity slots.
std::vector<uint8_t> range_of(const std::vector<uint8_t>& all, int64_t first, int64_t count) {
  const size_t part = all.size() / (2 * kLayers), slot = part / kCapacity;
  std::vector<uint8_t> out;
  for (size_t i = 0; i < 2 * kLayers; ++i) {
    const auto* from = all.data() + i * part + static_cast<size_t>(first) * slot;
    out.insert(out.end(), from, from + static_cast<size_t>(count) * slot);
  }
  return out;
}

// For storage of a plugin built against ABI 1.4 or later: export_slot_range
// gives the range of the whole export, and import_slot_range changes that
// range alone. Returns false, filling `c`, on a failure.
bool check_slot_ranges(ConformanceCase& c, Run& got) {
  constexpr int64_t kFirst = 17, kCount = 40;
  const std::vector<uint8_t> before = got.exported(kCapacity);
  std::vector<uint8_t> range;
  got.kv().export_slot_range(kFirst, kCount, range);
  if (range != range_of(before, kFirst, kCount)) {
    c.result = "FAIL";
    c.detail = "export_slot_range(17, 40) differs from slots 17..56 of export_slots";
    return false;
  }
  std::vector<uint8_t> reversed(range.rbegin(), range.rend());  // other bytes, same size
  got.kv().import_slot_range(kFirst, kCount, reversed);
  const std::vector<uint8_t> after = got.exported(kCapacity);
  if (range_of(after, kFirst, kCount) != reversed ||
      range_of(after, 0, kFirst) != range_of(before, 0, kFirst) ||
      range_of(after, kFirst + kCount, kCapacity - kFirst - kCount) !=
          range_of(before, kFirst + kCount, kCapacity - kFirst - kCount)) {
    c.result = "FAIL";
    c.detail = "import_slot_range(17, 40) did not store exactly slots 17..56";
    return false;
  }
  got.kv().import_slot_range(kFirst, kCount, range);
  return true;
}

// After run_steps: blocks copied on both caches, then the reference's
// export imported into `got`'s cache, must leave the two exports equal;
// with `ranges`, the slot-range export and import too (check_slot_ranges).
void check_block_copy_and_import(ConformanceCase& c, Run& want, Run& got,
                                 const std::vector<int32_t>& table, int32_t block_tokens,
                                 bool ranges) {
  const int64_t blocks = kCapacity / block_tokens;
  if (blocks >= 4) {
    want.kv().copy_blocks(table[0], blocks - 2, 2);
    got.kv().copy_blocks(table[0], blocks - 2, 2);
    if (got.exported(kCapacity) != want.exported(kCapacity)) {
      c.result = "FAIL";
      c.detail = "copy_blocks: the copied rows differ from the reference's";
      return;
    }
  }
  const std::vector<uint8_t> reference = want.exported(kCapacity);
  std::vector<uint8_t> shuffled = reference;
  std::reverse(shuffled.begin(), shuffled.end());  // other bytes, same size
  got.kv().import_slots(kCapacity, shuffled);
  if (got.exported(kCapacity) != shuffled) {
    c.result = "FAIL";
    c.detail = "import_slots then export_slots does not give the imported rows back";
    return;
  }
  got.kv().import_slots(kCapacity, reference);
  if (ranges) check_slot_ranges(c, got);
}

// What a case runs on the backend under test — the attention and the cache
// it reads — or, in `skip`, why the case cannot run there.
struct Subject {
  std::shared_ptr<Attention> attention;
  std::shared_ptr<KVCache> kv;
  std::string skip;
};
using MakeSubject = std::function<Subject(Backend& backend, const KVCacheSpec& spec,
                                          const AttentionSpec& geometry)>;

// Why an attention of a plugin built against ABI `minor` is not given a
// sliding-window layer (`window` > 0) to check; empty when it is.
std::string window_refusal(int32_t window, uint32_t minor) {
  if (window == 0 || minor >= 6) return "";
  return "built against Duet ABI 1." + std::to_string(minor) +
         ", before sliding-window layers (AttentionSpec::window, ABI 1.6)";
}

// Every layout and dtype for component `info` ("attention 'x'" in `label`)
// on info.backend; `round_trip` adds block copies and export/import, given
// the ABI minor version the storage's plugin was built against (the slot
// ranges are checked from 1.4 on).
std::vector<ConformanceCase> run_cases(const PluginHost& host, const ComponentInfo& info,
                                       const std::string& label, const MakeSubject& make,
                                       std::optional<uint32_t> round_trip) {
  struct Layout {
    std::string name;
    int32_t block_tokens;
    std::vector<int32_t> table;
    int32_t window;  // AttentionSpec::window: a sliding-window layer's
  };
  // 16-slot blocks out of order: positions 0..70 in blocks 9, 3, 14, 0, 7.
  const std::vector<int32_t> paged = {9, 3, 14, 0, 7, 12, 5, 1, 15, 2, 11, 4, 8, 6, 10, 13};
  const std::vector<Layout> layouts = {
      {"contiguous", kCapacity, {0}, 0},
      {"paged", 16, paged, 0},
      // A window shorter than the 60-row chunk and the positions after it.
      {"paged w24", 16, paged, 24},
  };
  std::vector<ConformanceCase> cases;
  std::shared_ptr<Backend> reference = host.create_backend("reference", Options());
  std::shared_ptr<Backend> backend;
  std::string unavailable = host.unavailable_reason(info);
  if (unavailable.empty()) {
    try {
      backend = host.create_backend(info.backend, Options());
    } catch (const std::exception& e) {
      unavailable = e.what();
    }
  }
  if (!unavailable.empty()) {
    cases.push_back(ConformanceCase{label, info.backend, "-", "skip", unavailable, 0.0, 0.0});
    return cases;
  }
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    for (const Layout& layout : layouts) {
      ConformanceCase& c = cases.emplace_back();
      c.component = label;
      c.backend = info.backend;
      c.layout = layout.name + " " + std::string(dtype_name(dtype));
      c.bound = bound_for(dtype);
      c.result = "skip";
      const KVCacheSpec spec{"contiguous",        kLayers, kKvHeads, kHeadDim, kCapacity,
                             layout.block_tokens, dtype};
      AttentionSpec geometry = kGeometry;
      geometry.window = layout.window;
      try {
        Subject subject = make(*backend, spec, geometry);
        if (!subject.skip.empty()) {
          c.detail = subject.skip;
          continue;
        }
        if (const Support s = subject.attention->check(subject.kv->spec()); !s.ok()) {
          c.detail = s.reasons.front();
          continue;
        }
        Run want(*reference, reference->create_attention("full", geometry), spec);
        Run got(*backend, std::move(subject.attention), std::move(subject.kv));
        if (run_steps(c, want, got, spec, layout.table) && round_trip)
          check_block_copy_and_import(c, want, got, layout.table, layout.block_tokens,
                                      *round_trip >= 4);
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kConfig) throw;  // its options, not its behaviour
        c.result = "FAIL";
        c.detail = std::string("threw: ") + e.what();
        c.worst_nmse = NAN;
      } catch (const std::exception& e) {
        c.result = "FAIL";
        c.detail = std::string("threw: ") + e.what();
        c.worst_nmse = NAN;
      } catch (...) {
        c.result = "FAIL";
        c.detail = "threw something that is not a std::exception";
        c.worst_nmse = NAN;
      }
    }
  }
  return cases;
}

// Why `backend`'s own storage for `spec` cannot serve a plugin's attention.
std::string own_storage_refusal(const PluginHost& host, Backend& backend, const KVCacheSpec& spec) {
  if (const Support s = backend.check_kv_cache(spec); !s.ok())
    return "backend '" + backend.name() + "': " + s.reasons.front();
  if (host.backend_abi_minor(backend.name()) >= 1 && !host.backend_makes_kv_rows(backend.name())) {
    if (const int32_t tile = backend.kv_cache_tile_slots(spec); tile > 0) {
      return "backend '" + backend.name() + "' keeps this cache in tiles of " +
             std::to_string(tile) + " slots, which only its own attention reads";
    }
  }
  return "";
}

}  // namespace

std::vector<ConformanceCase> attention_conformance(const PluginHost& host,
                                                   const ComponentInfo& info,
                                                   const Options& options) {
  return run_cases(
      host, info, "attention '" + info.name + "'",
      [&](Backend& backend, const KVCacheSpec& spec, const AttentionSpec& geometry) {
        Subject s;
        s.skip = own_storage_refusal(host, backend, spec);
        if (s.skip.empty()) {
          s.skip = window_refusal(
              geometry.window,
              host.extension_abi_minor(ComponentKind::kAttention, info.backend, info.name));
        }
        if (!s.skip.empty()) return s;
        s.attention = host.create_attention(backend, info.name, geometry, options);
        // A plugin's attention reads slot rows, which a backend that can
        // is asked for.
        s.kv = host.backend_makes_kv_rows(backend.name()) ? backend.create_kv_cache_rows(spec)
                                                          : backend.create_kv_cache(spec);
        return s;
      },
      std::nullopt);
}

std::vector<ConformanceCase> kv_cache_conformance(const PluginHost& host, const ComponentInfo& info,
                                                  const Options& options) {
  return run_cases(
      host, info, "KV-cache storage '" + info.name + "'",
      [&](Backend& backend, const KVCacheSpec& spec, const AttentionSpec& geometry) {
        Subject s;
        s.skip = window_refusal(geometry.window, host.backend_abi_minor(backend.name()));
        if (!s.skip.empty()) s.skip = "backend '" + backend.name() + "' " + s.skip;
        if (!s.skip.empty()) return s;
        KVCacheSpec mine = spec;
        mine.impl = info.name;
        if (const Support support = host.check_kv_cache(backend, mine, options); !support.ok()) {
          s.skip = support.reasons.front();
          return s;
        }
        s.kv = host.create_kv_cache(backend, mine, options);
        s.attention = backend.create_attention(backend.attention_impls().front(), geometry);
        return s;
      },
      host.unavailable_reason(info).empty()
          ? host.extension_abi_minor(ComponentKind::kKVCache, info.backend, info.name)
          : 0);
}

ConformanceCase sampler_conformance(const PluginHost& host, const ComponentInfo& info,
                                    const Options& options) {
  constexpr int32_t kRows = 200;
  ConformanceCase c{"sampler '" + info.name + "'",
                    "-",
                    std::to_string(kRows) + " random rows",
                    "pass",
                    "",
                    NAN,
                    0.0};  // no error measure: contract checks only
  std::shared_ptr<Sampler> first = host.create_sampler(info.name, options);
  std::shared_ptr<Sampler> second = host.create_sampler(info.name, options);
  std::mt19937 rng(11);
  std::vector<int32_t> history;
  const auto fail = [&](int32_t row, const std::string& why) {
    c.result = "FAIL";
    c.detail = "row " + std::to_string(row) + ": " + why;
    return c;
  };
  for (int32_t row = 0; row < kRows; ++row) {
    const auto n = static_cast<int32_t>(2 + rng() % 300);
    Candidates given;
    for (int32_t id = 0; id < n; ++id) {
      given.ids.push_back(id);
      // Ties (a coarse grid), and now and then a -inf.
      given.logits.push_back(rng() % 17 == 0 ? -INFINITY
                                             : static_cast<float>(rng() % 64) / 8.0f - 4.0f);
    }
    history.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(n)));
    const SamplingContext ctx{7, 0, static_cast<uint64_t>(row), history};
    Candidates a = given, b = given;
    try {
      first->apply(a, ctx);
      second->apply(b, ctx);
    } catch (const std::exception& e) {
      return fail(row, std::string("threw: ") + e.what());
    } catch (...) {
      return fail(row, "threw something that is not a std::exception");
    }
    if (a.ids.empty() || a.ids.size() != a.logits.size()) {
      return fail(row, "left " + std::to_string(a.ids.size()) + " ids and " +
                           std::to_string(a.logits.size()) + " logits");
    }
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (const int32_t id : a.ids) {
      if (id < 0 || id >= n || seen[static_cast<size_t>(id)])
        return fail(row, "id " + std::to_string(id) + " was not given, or is kept twice");
      seen[static_cast<size_t>(id)] = true;
    }
    if (a.selected >= 0 && std::find(a.ids.begin(), a.ids.end(), a.selected) == a.ids.end())
      return fail(row, "selected " + std::to_string(a.selected) + ", not a candidate");
    if (a.ids != b.ids || a.selected != b.selected ||
        std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) != 0)
      return fail(row, "two samplers made alike disagree on the same row and context");
  }
  return c;
}

}  // namespace duet::cli
