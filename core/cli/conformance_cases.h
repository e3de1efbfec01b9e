// conformance_cases.h — `duet conformance`'s cases. Attention: a plugin's
// attention against the reference backend's 'full' attention on the same
// random queries, keys and values, step by step over contiguous and paged
// caches of each dtype and as a sliding-window layer (a window of 24
// positions, ABI 1.6), within the precision contract of docs/plugins.md,
// and its cache rows against the rows KVCache::write stores. KV-cache
// storage: the backend's own attention over the plugin's storage against
// the reference over its own, the stored rows compared after every step,
// then block copies and an export/import round trip. Samplers: the
// Candidates contract and determinism on random rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "duet/app/plugin_host.h"
#include "duet/options.h"

namespace duet::cli {

struct ConformanceCase {
  std::string component;  // "attention 'sliding_window'"
  std::string backend;
  std::string layout;  // "contiguous f32", "paged q8_0"
  // "pass", "FAIL" or "skip"; `detail` says why for the last two.
  std::string result;
  std::string detail;
  double worst_nmse = 0.0;  // over the steps run; NaN when a call threw
  double bound = 0.0;       // the precision contract's
};

// Every case of attention `info` (an extension some plugin registered for
// info.backend), made with `options`. A duet::Error(kConfig) from its
// factory (a required option missing) is thrown, not a failed case.
// REQUIRES: the reference backend is loaded in `host`.
std::vector<ConformanceCase> attention_conformance(const PluginHost& host,
                                                   const ComponentInfo& info,
                                                   const Options& options);

// The same for KV-cache storage `info`, made with `options`.
std::vector<ConformanceCase> kv_cache_conformance(const PluginHost& host, const ComponentInfo& info,
                                                  const Options& options);

// Sampler `info` made with `options`, on 200 random rows of logits (with
// ties, -inf and repeated ids in the history): it keeps at least one
// candidate, ids and logits of equal length, only ids it was given, each
// once; a selected token is one of them; and two samplers made alike give
// the same candidates and selection for the same row and context.
ConformanceCase sampler_conformance(const PluginHost& host, const ComponentInfo& info,
                                    const Options& options);

}  // namespace duet::cli
