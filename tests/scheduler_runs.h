// scheduler_runs.h — for tests of the batching scheduler: whether a
// backend can run here, running a set of requests through one scheduler,
// and comparing two runs of a request.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "duet/app/pipeline.h"
#include "duet/app/scheduler.h"

namespace duet::testing {

// Loads the default plugins into `host` (for a pipeline in `dir`) and says
// why backend `plugin` cannot run here: it refused to load (cuda without a
// usable GPU) or is not built; "" when it can. For a test's GTEST_SKIP.
inline std::string backend_unavailable(PluginHost& host, const std::filesystem::path& dir,
                                       const std::string& plugin) {
  load_pipeline_plugins(
      parse_pipeline_config("model: {path: m.gguf}\nstages: [decode]\n", "probe.yaml", dir, {}),
      host);
  for (const PluginRecord& r : host.records()) {
    if (r.name == plugin && !r.loaded) return plugin + " plugin refused: " + r.refusal;
  }
  if (!host.has(ComponentKind::kBackend, plugin)) return "the " + plugin + " plugin is not built";
  return "";
}

// Runs `requests` through one scheduler of `pipeline` (with `batching` in
// place of the pipeline's batching section when given), results by id;
// every block must be back in the pool afterwards. Its stats go to `stats`
// when given.
inline std::map<std::string, RequestResult> run_all(Pipeline& pipeline,
                                                    const std::vector<Request>& requests,
                                                    SchedulerStats* stats = nullptr,
                                                    const BatchingConfig* batching = nullptr) {
  auto scheduler = batching != nullptr ? std::make_unique<Scheduler>(pipeline, *batching)
                                       : std::make_unique<Scheduler>(pipeline);
  for (const Request& r : requests) scheduler->submit(r);
  scheduler->run();
  std::map<std::string, RequestResult> out;
  for (RequestResult& r : scheduler->take_finished()) out[r.id] = std::move(r);
  EXPECT_EQ(scheduler->used_blocks(), 0);
  if (stats != nullptr) *stats = scheduler->stats();
  return out;
}

// The same tokens, finish and logits (bit for bit) in two runs of a request.
inline void expect_same_result(const RequestResult& got, const RequestResult& expected) {
  EXPECT_EQ(got.generated_tokens, expected.generated_tokens) << "request " << got.id;
  EXPECT_EQ(got.finish, expected.finish) << "request " << got.id;
  ASSERT_EQ(got.logits.size(), expected.logits.size()) << "request " << got.id;
  EXPECT_EQ(
      0, std::memcmp(got.logits.data(), expected.logits.data(), got.logits.size() * sizeof(float)))
      << "request " << got.id << ": logits differ";
}

}  // namespace duet::testing
