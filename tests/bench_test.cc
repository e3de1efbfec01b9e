// `duet bench`: its statistics and system probes, and the command as a user
// runs it on a tiny model — table, JSON and CSV output, and its errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_stats.h"
#include "bench_system.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

TEST(BenchStats, MedianStddevMinMax) {
  auto s = bench::summarize_values({4.0, 1.0, 3.0, 2.0});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.stddev, 1.2909944, 1e-6);  // sample standard deviation
  s = bench::summarize_values({7.0, 1.0, 5.0});
  EXPECT_DOUBLE_EQ(s.median, 5.0);
}

TEST(BenchStats, OneValueHasNoSpreadAndNoneIsAllZero) {
  auto s = bench::summarize_values({3.5});
  EXPECT_DOUBLE_EQ(s.median, 3.5);
  EXPECT_DOUBLE_EQ(s.stddev, 0.0);
  s = bench::summarize_values({});
  EXPECT_DOUBLE_EQ(s.median, 0.0);
  EXPECT_DOUBLE_EQ(s.max, 0.0);
}

TEST(BenchSystem, CpuFeaturesComeFromTheFlagsLineInOrder) {
  const char* cpuinfo =
      "processor\t: 0\nmodel\t\t: 143\nmodel name\t: Test CPU @ 2.0GHz\n"
      "flags\t\t: fpu sse amx_bf16 amx_int8 avx512_vnni avx2 avx512fp16 avx512f_x avx512f "
      "amx_tile\n\n"
      "processor\t: 1\n";
  EXPECT_EQ(bench::cpu_features_from(cpuinfo),
            (std::vector<std::string>{"avx2", "avx512f", "avx512_vnni", "amx_int8", "amx_bf16"}));
  EXPECT_EQ(bench::proc_field(cpuinfo, "model name"), "Test CPU @ 2.0GHz");
  EXPECT_EQ(bench::proc_field(cpuinfo, "model"), "143");
  EXPECT_TRUE(bench::cpu_features_from("flags\t: fpu sse avx\n").empty());
  EXPECT_TRUE(bench::cpu_features_from("").empty());
}

TEST(BenchSystem, PeakRssIsVmHWMInBytes) {
  EXPECT_EQ(bench::peak_rss_from(
                "Name:\tduet\nVmPeak:\t  9999 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n"),
            1234u * 1024u);
  EXPECT_EQ(bench::peak_rss_from("Name:\tduet\n"), 0u);
  EXPECT_GT(bench::peak_rss_bytes(), 0u);  // this process, on Linux
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

class Bench : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::write_tiny_llama(dir_ / "tiny.gguf");
    std::ofstream(dir_ / "p.yaml") << R"(model:
  path: tiny.gguf
backend:
  plugin: reference
components:
  kv_cache: {capacity_tokens: 64}
  sampler:
    seed: 1
    chain: [greedy]
stages:
  - prefill: {chunk_tokens: 16}
  - decode: {max_new_tokens: 8}
)";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `build/bin/duet bench p.yaml ARGS`.
  Result bench(const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    std::string cmd = std::string(DUET_BUILD_DIR) + "/bin/duet bench " +
                      (dir_ / "p.yaml").string() + " " + args + " >" + out.string() + " 2>" +
                      err.string() + " </dev/null";
    int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream s(text);
    for (std::string line; std::getline(s, line);) out.push_back(line);
    return out;
  }

  fs::path dir_;
};

TEST_F(Bench, HelpShowsTheSynopsis) {
  Result r = bench("--help");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Usage: duet bench PIPELINE.yaml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--prompt-tokens"), std::string::npos) << r.out;
}

TEST_F(Bench, TableHasARowPerTestAndASummary) {
  Result r = bench("-p 8,16 -n 4 -r 2");
  ASSERT_EQ(r.code, 0) << r.err;
  auto l = lines(r.out);
  ASSERT_GE(l.size(), 5u) << r.out;
  EXPECT_EQ(l[0].rfind("| test", 0), 0u) << r.out;
  EXPECT_NE(l[0].find("t/s median"), std::string::npos) << r.out;
  EXPECT_EQ(l[1].rfind("| ---", 0), 0u) << r.out;
  EXPECT_EQ(l[2].rfind("| pp8 ", 0), 0u) << r.out;
  EXPECT_EQ(l[3].rfind("| pp16 ", 0), 0u) << r.out;
  EXPECT_EQ(l[4].rfind("| tg4 ", 0), 0u) << r.out;
  EXPECT_NE(l[2].find("| reference |"), std::string::npos) << r.out;
  EXPECT_NE(l[2].find("| 0.1.0 "), std::string::npos) << r.out;
  // Aligned: every table line is as long as the header.
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(l[i].size(), l[0].size()) << r.out;
  EXPECT_NE(r.out.find("peak RSS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens of f32), peak RSS"), std::string::npos) << r.out;
  // What the backend says it computes with, as `duet plugins` lists it.
  EXPECT_NE(r.out.find("\nbackend reference: "), std::string::npos) << r.out;
}

TEST_F(Bench, JsonIsOneObjectWithAResultPerTest) {
  Result r = bench("-p 8 -n 3 --depth 0,5 -r 2 --warmup 0 -o json --set backend.plugin=reference");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  for (const char* key : {"\"results\":[",
                          "\"backend\":\"reference\"",
                          "\"plugin_version\":\"0.1.0\"",
                          "\"backend_summary\":\"",
                          "\"threads\":\"-\"",
                          "\"cpu_features\":[",
                          "\"load_seconds\":",
                          "\"kv_cache_bytes\":",
                          "\"peak_rss_bytes\":",
                          "\"kv_cache_capacity_tokens\":64",
                          "\"kv_cache_dtype\":\"f32\"",
                          "\"test\":\"pp8\"",
                          "\"test\":\"tg3\"",
                          "\"test\":\"tg3@d5\"",
                          "\"depth\":5",
                          "\"time_to_first_token_seconds\":",
                          "\"tokens_per_second_median\":",
                          "\"tokens_per_second_stddev\":",
                          "\"tokens_per_second_min\":",
                          "\"tokens_per_second_max\":",
                          "\"repetitions\":2",
                          "\"samples_tokens_per_second\":["}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  }
  EXPECT_EQ(count(r.out, "\"test\":"), 3u) << r.out;
  EXPECT_EQ(count(r.out, "\"time_to_first_token_seconds\":"), 1u) << "pp rows only: " << r.out;
  // Valid JSON, where a parser is at hand.
  if (std::system("python3 -c '' >/dev/null 2>&1") == 0) {
    const std::string check =
        "python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); "
        "assert len(d[\"results\"]) == 3' " +
        (dir_ / "stdout").string();
    EXPECT_EQ(std::system(check.c_str()), 0) << r.out;
  }
}

TEST_F(Bench, InterleaveRunsEveryTestsRepetitionsAndSaysSo) {
  Result plain = bench("-p 8 -n 3 --depth 0,5 -r 2 -o json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_NE(plain.out.find("\"interleave\":false"), std::string::npos) << plain.out;
  Result r = bench("-p 8 -n 3 --depth 0,5 -r 3 --interleave -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"interleave\":true"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "\"test\":"), 3u) << r.out;
  EXPECT_EQ(count(r.out, "\"repetitions\":3"), 4u) << "the run's and each test's: " << r.out;
  Result table = bench("-n 2 -r 1 --tests tg --interleave");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("warm-up run, interleaved"), std::string::npos) << table.out;
}

TEST_F(Bench, BackendOptionsAreCheckedByTheBackend) {
  // The reference backend takes no options, so a threads count is refused
  // before anything runs (backends that take one show it in the threads column).
  Result r = bench("-p 4 -n 1 -r 1 --set backend.options.threads=2");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("backend.options.threads"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(Bench, CsvHasAHeaderAndARowPerTest) {
  Result r = bench("-p 4 -n 2,3 -r 1 -o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  auto l = lines(r.out);
  ASSERT_EQ(l.size(), 4u) << r.out;
  EXPECT_EQ(
      l[0].rfind("test,backend,plugin_version,threads,cpu_features,tokens_per_second_median,", 0),
      0u)
      << r.out;
  EXPECT_EQ(l[1].rfind("pp4,reference,0.1.0,-,", 0), 0u) << r.out;
  EXPECT_TRUE(l[0].ends_with(",peak_rss_bytes,kv_cache_dtype")) << r.out;
  EXPECT_TRUE(l[1].ends_with(",f32")) << r.out;
  EXPECT_EQ(l[2].rfind("tg2,reference,", 0), 0u) << r.out;
  EXPECT_EQ(l[3].rfind("tg3,reference,", 0), 0u) << r.out;
  const auto commas = std::count(l[0].begin(), l[0].end(), ',');
  for (size_t i = 1; i < l.size(); ++i)
    EXPECT_EQ(std::count(l[i].begin(), l[i].end(), ','), commas) << l[i];
}

TEST_F(Bench, TestsSelectsPpOrTg) {
  Result r = bench("-p 4 -n 2 -r 1 --tests pp -o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines(r.out).size(), 2u) << r.out;
  EXPECT_NE(r.out.find("\npp4,"), std::string::npos) << r.out;
  r = bench("-p 4 -n 2 -r 1 --tests tg -o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines(r.out).size(), 2u) << r.out;
  EXPECT_NE(r.out.find("\ntg2,"), std::string::npos) << r.out;
}

TEST_F(Bench, APromptLongerThanThePrefillChunkRunsInPasses) {
  // chunk_tokens is 16: pp40 is three forward passes, as prefill would run it.
  Result r = bench("-p 40 -n 1 -r 1 --depth 20 -o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\npp40,reference,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ntg1@d20,reference,"), std::string::npos) << r.out;
}

TEST_F(Bench, BadNumbersAreOneLineUsageErrors) {
  for (const char* args : {"-p 0", "-p -3", "-p abc", "-p 8,,4", "-p 4x", "-n 0", "-n -1", "-r 0",
                           "-r two", "--warmup -1", "--warmup x", "--depth -2", "--depth 1.5",
                           "-o xml", "--tests none", "-p 99999999999999999999"}) {
    Result r = bench(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("duet: error: duet bench: ", 0), 0u) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
  }
}

TEST_F(Bench, ACacheTooSmallNamesTheNeededCapacityAndTheFix) {
  Result r = bench("-p 8 -n 10 --depth 60");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("tg10@d60 needs 71 KV-cache tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--set components.kv_cache.capacity_tokens=71"), std::string::npos) << r.err;
  r = bench("-p 100 -n 1");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("pp100 needs 100"), std::string::npos) << r.err;
  // The fix works.
  r = bench("-p 100 -n 1 -r 1 --warmup 0 --set components.kv_cache.capacity_tokens=100 -o csv");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(Bench, ABatchOnACacheOfOneBlockIsToldToGiveItBlocks) {
  // p.yaml's cache is one block of 64: each sequence would take all of it.
  Result r = bench("--batch 4 -p 8 -n 4");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("pp8+tg4@b4 needs 4 x 64 KV-cache tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("one block that a sequence takes whole"), std::string::npos) << r.err;
  // The scheduler wants a block for each of batching.max_sequences (16), so
  // the fix names a capacity of 16 blocks as well.
  EXPECT_NE(r.err.find("block_tokens=16 --set components.kv_cache.capacity_tokens=256 (at most"),
            std::string::npos)
      << r.err;
  // The fix works.
  r = bench(
      "--batch 4 -p 8 -n 4 -r 1 --warmup 0 --set components.kv_cache.block_tokens=16 --set "
      "components.kv_cache.capacity_tokens=256 -o csv");
  EXPECT_EQ(r.code, 0) << r.err;
  // Blocks too big for max_sequences: the scheduler names a size that fits.
  r = bench("--batch 4 -p 8 -n 4 -r 1 --set components.kv_cache.block_tokens=16");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("set components.kv_cache.block_tokens to 4 or a smaller divisor of "
                       "capacity_tokens, or lower batching.max_sequences"),
            std::string::npos)
      << r.err;
  // A cache of 1000 slots, one block: 16 does not divide it, so the
  // capacity named is the next multiple of 16.
  r = bench("--batch 2 -p 8 -n 4 --set components.kv_cache.capacity_tokens=1000");
  EXPECT_NE(r.err.find("block_tokens=16 --set components.kv_cache.capacity_tokens=1008 (at "
                       "most the model's context length)"),
            std::string::npos)
      << r.err;
}

// A model file's default pipeline caches in blocks, so the batching
// scheduler takes it as it is (a 256-token context: 16 blocks of 16).
TEST_F(Bench, ABatchRunsOnAModelFilesDefaultPipeline) {
  const std::string cmd = std::string(DUET_BUILD_DIR) + "/bin/duet bench " +
                          (dir_ / "tiny.gguf").string() +
                          " --batch 2 -p 4 -n 4 -r 1 --warmup 0 -o csv --set "
                          "backend.plugin=reference >" +
                          (dir_ / "out").string() + " 2>" + (dir_ / "err").string();
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(dir_ / "err");
  EXPECT_NE(slurp(dir_ / "out").find("pp4+tg4@b2"), std::string::npos) << slurp(dir_ / "out");
}

TEST_F(Bench, AMissingPipelineIsAConfigError) {
  fs::remove(dir_ / "p.yaml");
  Result r = bench("-p 4");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("p.yaml"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace duet
