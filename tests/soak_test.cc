// Soak: many decode steps and many pipelines in one process, on a tiny
// model with the reference backend. Memory, open files and mappings must
// stay flat: a leak per step or per run would show here long before a user
// would notice it.
#include <gtest/gtest.h>
#include <malloc.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "duet/app/pipeline.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

// A field of /proc/self/status in kB, e.g. "VmRSS".
long status_kb(const std::string& field) {
  // glibc keeps up to 128 kB of freed memory at the top of its heap before
  // it trims, so RSS moves by that much from one moment to the next with
  // nothing leaked; returning free memory first makes readings comparable.
  malloc_trim(0);
  std::ifstream in("/proc/self/status");
  std::string key;
  long value = 0;
  std::string unit;
  while (in >> key) {
    if (key == field + ":") {
      in >> value;
      return value;
    }
    std::getline(in, unit);
  }
  return -1;
}

size_t count_entries(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}));
}

size_t count_lines(const fs::path& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

class Soak : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("soak");
    testing::write_tiny_llama(dir_ / "tiny.gguf");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Pipeline> make(const std::vector<std::string>& overrides) {
    PipelineConfig config = parse_pipeline_config(R"(model: {path: tiny.gguf}
backend: {plugin: reference}
components:
  kv_cache: {capacity_tokens: 256}
  sampler: {seed: 3, chain: []}
stages:
  - prefill: {}
  - decode: {max_new_tokens: 100}
)",
                                                  "soak.yaml", dir_, overrides);
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  fs::path dir_;
  PluginHost host_;
  NullSink sink_;
};

// 10,000 decode steps: 100 requests of 100 tokens, the cache reused by each.
// RSS after the first 10 requests (allocations warmed up) is the baseline.
TEST_F(Soak, TenThousandDecodeStepsKeepRssFlat) {
  auto p = make({"components.sampler.chain=[{logit_bias: {\"2\": -inf, \"0\": -inf}}]"});
  const std::vector<int32_t> prompt = {1, 40, 41, 42};
  long baseline = 0;
  int64_t steps = 0;
  for (int request = 0; request < 100; ++request) {
    RunResult r = p->run_tokens(prompt, sink_);
    ASSERT_EQ(r.generated_tokens.size(), 100u) << "end-of-generation tokens are banned";
    steps += static_cast<int64_t>(r.generated_tokens.size());
    if (request == 9) baseline = status_kb("VmRSS");
  }
  const long end = status_kb("VmRSS");
  std::printf("%lld decode steps: RSS %ld kB after 1,000 steps, %ld kB after all\n",
              static_cast<long long>(steps), baseline, end);
  EXPECT_EQ(steps, 10000);
  EXPECT_LE(end, baseline + baseline / 100) << "RSS grew more than 1%";
}

// 1,000 pipelines built, run and destroyed: no file descriptor, mapping or
// memory left behind by any of them.
TEST_F(Soak, AThousandPipelineRunsLeaveNoFilesOrMappingsBehind) {
  long baseline_rss = 0;
  size_t baseline_fds = 0, baseline_maps = 0;
  for (int run = 0; run < 1000; ++run) {
    auto p = make({"stages.1.decode.max_new_tokens=2"});
    p->run_tokens(std::vector<int32_t>{1, 50, 51}, sink_);
    p.reset();
    if (run == 19) {
      baseline_rss = status_kb("VmRSS");
      baseline_fds = count_entries("/proc/self/fd");
      baseline_maps = count_lines("/proc/self/maps");
    }
  }
  const long rss = status_kb("VmRSS");
  const size_t fds = count_entries("/proc/self/fd"), maps = count_lines("/proc/self/maps");
  std::printf("1,000 pipelines: fds %zu -> %zu, mappings %zu -> %zu, RSS %ld -> %ld kB\n",
              baseline_fds, fds, baseline_maps, maps, baseline_rss, rss);
  EXPECT_EQ(fds, baseline_fds);
  EXPECT_EQ(maps, baseline_maps);
  EXPECT_LE(rss, baseline_rss + baseline_rss / 100);
}

}  // namespace
}  // namespace duet
