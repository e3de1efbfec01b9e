// The duet CLI as a user meets it: exit codes, one-line errors, --help.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

using Result = testing::CommandResult;

class Cli : public testing::CliFixture {};

constexpr const char* kTinyPipeline = R"(model:
  path: tiny.gguf
backend:
  plugin: reference
components:
  kv_cache: {capacity_tokens: 128}
  sampler:
    seed: 1
    chain: [greedy]
stages:
  - prefill: {chunk_tokens: 16}
  - decode: {max_new_tokens: 8, stop: ["tok9"]}
)";

TEST_F(Cli, NoArgumentsPrintsUsageAndExits2) {
  Result r = duet("");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("duet: error: no command given; see 'duet --help'"), std::string::npos)
      << r.err;
}

TEST_F(Cli, HelpForEveryCommand) {
  EXPECT_EQ(duet("--help").code, 0);
  for (const char* command : {"run", "validate", "plugins", "inspect", "quantize"}) {
    Result r = duet(std::string(command) + " --help");
    EXPECT_EQ(r.code, 0) << command;
    EXPECT_NE(r.out.find(std::string("Usage: duet ") + command), std::string::npos) << r.out;
  }
}

TEST_F(Cli, UnknownCommandAndUnknownFlagAreUsageErrors) {
  Result r = duet("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("duet: error: unknown command 'frobnicate'"), std::string::npos) << r.err;
  r = duet("inspect --bogus x.gguf");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("see 'duet inspect --help'"), std::string::npos) << r.err;
  r = duet("inspect");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing argument model"), std::string::npos) << r.err;
}

TEST_F(Cli, QuantizeWritesAFileAndRefusesBadRequestsWithTheirExitCodes) {
  const std::string tiny = (dir_ / "tiny.gguf").string();
  const std::string out = (dir_ / "out.gguf").string();
  Result r = duet("quantize " + tiny + " " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--type is required; one of f32, f16"), std::string::npos) << r.err;
  r = duet("quantize " + tiny + " " + out + " --type q4_k");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown --type 'q4_k'; one of"), std::string::npos) << r.err;
  r = duet("quantize " + tiny + " " + out + " --type q8_0");  // tiny is q4_1
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("pass --allow-requantize"), std::string::npos) << r.err;
  r = duet("quantize " + (dir_ / "absent.gguf").string() + " " + out + " --type f32");
  EXPECT_EQ(r.code, 3);
  // An output nowhere to be written is refused before any conversion.
  r = duet("quantize " + tiny + " " + (dir_ / "no" / "such" / "dir.gguf").string() + " --type f32");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("cannot write model file"), std::string::npos) << r.err;
  r = duet("quantize " + tiny + " " + out + " --type Q8_0 --allow-requantize --threads 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("as q8_0: 20 tensors (f32 5, q8_0 15)"), std::string::npos) << r.out;
  r = duet("inspect --tensors " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("q8_0"), std::string::npos) << r.out;
  r = duet("quantize " + tiny + " " + out + " --type q4_k_m --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("blk.0.attn_q.weight  [64, 64]  q4_1 -> q5_0 (fallback"), std::string::npos)
      << r.out;
}

TEST_F(Cli, InspectShowsTheModel) {
  Result r = duet("inspect --tensors " + (dir_ / "tiny.gguf").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("llama"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.1.ffn_down.weight"), std::string::npos) << r.out;
}

TEST_F(Cli, InspectRejectsMissingAndMalformedFilesWithExit3) {
  Result r = duet("inspect " + (dir_ / "absent.gguf").string());
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("absent.gguf"), std::string::npos) << r.err;
  r = duet("inspect " + write("text.gguf", "not a model at all"));
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

TEST_F(Cli, ValidateAcceptsAGoodPipeline) {
  Result r = duet("validate " + write("p.yaml", kTinyPipeline));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("valid: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chain [greedy]"), std::string::npos) << r.out;
}

TEST_F(Cli, ValidateReportsYamlErrorsWithPositionAndExit2) {
  std::string yaml = kTinyPipeline;
  yaml.replace(yaml.find("capacity_tokens"), 15, "capacity_tokns");
  Result r = duet("validate " + write("p.yaml", yaml));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("p.yaml:6:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'capacity_tokens'"), std::string::npos) << r.err;
}

TEST_F(Cli, SetOverridesAKeyAndItsErrorsNameTheOverride) {
  fs::path p = write("p.yaml", kTinyPipeline);
  EXPECT_EQ(
      duet("validate -q " + p.string() + " --set components.kv_cache.capacity_tokens=64").code, 0);
  Result r = duet("validate " + p.string() + " --set components.kv_cache.capacity_tokens=lots");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set"), std::string::npos) << r.err;
}

TEST_F(Cli, ValidateReportsEveryProblemAtOnce) {
  std::string yaml = kTinyPipeline;
  yaml.replace(yaml.find("[greedy]"), 8, "[greedy: {bogus: 1}]");
  yaml.replace(yaml.find("capacity_tokens: 128"), 20, "capacity_tokens: 100000");
  Result r = duet("validate " + write("p.yaml", yaml));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exceeds the model's context_length 256"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bogus"), std::string::npos) << r.err;
}

TEST_F(Cli, UnknownBackendIsAPluginError) {
  std::string yaml = kTinyPipeline;
  yaml.replace(yaml.find("plugin: reference"), 17, "plugin: refrence");
  Result r = duet("validate " + write("p.yaml", yaml));
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("no backend named 'refrence'; did you mean 'reference'?"), std::string::npos)
      << r.err;
}

// kTinyPipeline with the test plugins in reach and `backend` instead of its
// backend section.
std::string with_backend(const std::string& backend) {
  std::string text = kTinyPipeline;
  const std::string pinned = "backend:\n  plugin: reference\n";
  text.replace(text.find(pinned), pinned.size(),
               "plugins: {paths: [\"" + std::string(DUET_TEST_PLUGIN_DIR) + "\"]}\n" + backend);
  return text;
}

bool onednn_built() { return fs::exists(fs::path(DUET_BUILD_DIR) / "plugins/duet-onednn.so"); }

TEST_F(Cli, ABackendChoiceRunsOnTheFirstThatCanAndSaysWhyTheOthersCannot) {
  // test-no-device is refused by its probe; onednn, where built, has no
  // attention 'test_f32_only' (the test-extensions plugin registers it for
  // reference only); nosuch does not exist.
  const fs::path p = write(
      "p.yaml", with_backend("backend: {plugin: [test-no-device, onednn, nosuch, reference]}\n"));
  const std::string naive = " --set components.attention.impl=test_f32_only";
  Result r = duet("run " + p.string() + naive);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("backend reference, attention test_f32_only"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("passed over test-no-device: no backend named 'test-no-device': plugin "
                       "'test-no-device' ("),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("was refused: cannot run here: no test device present\n"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("passed over nosuch: no backend named 'nosuch'"), std::string::npos)
      << r.err;
  if (onednn_built()) {
    EXPECT_NE(
        r.err.find(
            "passed over onednn: components.attention.impl 'test_f32_only' is not provided by "
            "backend 'onednn' or a plugin for it; available: 'full', 'sliding_window', "
            "'test_full'\n"),
        std::string::npos)
        << r.err;
  }
  // In order, one line each.
  EXPECT_LT(r.err.find("passed over test-no-device"), r.err.find("passed over onednn"));
  EXPECT_LT(r.err.find("passed over onednn"), r.err.find("passed over nosuch"));

  Result json = duet("run " + p.string() + naive + " --json");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_NE(json.out.find("\"backend\":\"reference\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"backends_passed_over\":[\"test-no-device: "), std::string::npos)
      << json.out;

  Result validate = duet("validate " + p.string() + naive);
  ASSERT_EQ(validate.code, 0) << validate.err;
  EXPECT_NE(validate.out.find("(passed over nosuch: no backend named 'nosuch'"), std::string::npos)
      << validate.out;
}

TEST_F(Cli, ValidateReportsAnAttentionThatCannotReadTheStoragesDtypeWithExit2) {
  // test_f32_only (tests/plugins) reads f32 caches only.
  const fs::path p = write("p.yaml", with_backend("backend: {plugin: reference}\n"));
  Result r = duet("validate " + p.string() +
                  " --set components.attention.impl=test_f32_only --set "
                  "components.kv_cache.dtype=q8_0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(p.string() +
                       ": attention 'test_f32_only' cannot use this KV cache: test_f32_only reads "
                       "f32 caches only; set components.kv_cache.dtype: f32"),
            std::string::npos)
      << r.err;
  Result ok = duet("validate " + p.string() + " --set components.attention.impl=test_f32_only");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// A plugin storage's bad option is the pipeline's problem (exit 2), not a
// reason to pass its backend over.
TEST_F(Cli, ABackendChoiceStopsAtOptionsAPluginStorageRejects) {
  const fs::path p = write("p.yaml", with_backend("backend: {plugin: [reference, onednn]}\n"));
  Result r = duet("validate " + p.string() +
                  " --set components.kv_cache.impl=test_rows --set "
                  "components.kv_cache.options.size=3");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(p.string() + ": components.kv_cache.options"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("none of"), std::string::npos) << r.err;
}

TEST_F(Cli, ABackendChoiceUsesTheFirstWhenItCan) {
  Result r =
      duet("run " + write("p.yaml", with_backend("backend: {plugin: [reference, nosuch]}\n")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("backend reference,"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("passed over"), std::string::npos) << r.err;
}

TEST_F(Cli, ABackendChoiceWithNoneThatCanRunExits4ListingEveryReason) {
  const fs::path p =
      write("p.yaml", with_backend("backend: {plugin: [test-no-device, reference]}\n"));
  Result r = duet("run " + p.string() + " --set components.attention.impl=flash");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(
      r.err.find(
          "duet: error: " + p.string() +
          ": backend.plugin: none of [test-no-device, reference] can run this pipeline here:\n"),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("duet: error:   test-no-device: no backend named 'test-no-device': plugin"),
            std::string::npos)
      << r.err;
  EXPECT_NE(
      r.err.find(
          "duet: error:   reference: components.attention.impl 'flash' is not provided by backend "
          "'reference' or a plugin for it; available: 'full', 'sliding_window', 'test_f32_only', "
          "'test_forgets_row', 'test_full', 'test_no_scale', 'test_throw_int'\n"),
      std::string::npos)
      << r.err;
}

TEST_F(Cli, APinnedBackendThatCannotRunExits4WithTheReason) {
  Result r = duet("run " + write("p.yaml", with_backend("backend: {plugin: test-no-device}\n")));
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find(": backend: no backend named 'test-no-device': plugin 'test-no-device' ("),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("was refused: cannot run here: no test device present"), std::string::npos)
      << r.err;
}

TEST_F(Cli, ABackendChoiceStopsAtOptionsABackendRejects) {
  // A misspelt option is the pipeline's error, not a reason to move on.
  Result r = duet("run " + write("p.yaml", with_backend("backend:\n  plugin: [reference]\n"
                                                        "  options: {reference: {thread: 2}}\n")));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("backend.options.reference"), std::string::npos) << r.err;
}

TEST_F(Cli, RunStreamsTextAndSummarizesOnStderr) {
  Result r = duet("run " + write("p.yaml", kTinyPipeline) + " --prompt 'hello there'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("prompt 11 tokens"), std::string::npos)
      << r.err;  // byte-level BPE, tiny vocabulary
  EXPECT_NE(r.err.find("finish "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode "), std::string::npos) << r.err;
}

TEST_F(Cli, RunTakesAModelFileAndSavesThePipelineItBuilds) {
  const std::string saved = (dir_ / "saved.yaml").string();
  Result r = duet("run " + (dir_ / "tiny.gguf").string() +
                  " --prompt hi --set stages.1.decode.max_new_tokens=3 --save-pipeline " + saved);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("pipeline written to " + saved), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("finish "), std::string::npos) << r.err;
  const std::string yaml = slurp(saved);
  EXPECT_NE(yaml.find("path: " + (dir_ / "tiny.gguf").string()), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("max_new_tokens: 3"), std::string::npos) << yaml;  // --set included
  EXPECT_NE(yaml.find("chat: true"), std::string::npos) << yaml;         // the file has a template
  EXPECT_NE(yaml.find("capacity_tokens: 256"), std::string::npos) << yaml;  // its context
  Result again = duet("validate " + saved);
  EXPECT_EQ(again.code, 0) << again.err;
  // A pipeline file is not rewritten: --save-pipeline is for model files.
  Result yaml_arg = duet("validate " + saved + " --save-pipeline " + saved + ".2");
  EXPECT_EQ(yaml_arg.code, 2);
  EXPECT_NE(yaml_arg.err.find("is a pipeline file already"), std::string::npos) << yaml_arg.err;
  Result unwritable = duet("validate " + (dir_ / "tiny.gguf").string() + " --save-pipeline " +
                           (dir_ / "no/such/dir.yaml").string());
  EXPECT_EQ(unwritable.code, 2);
  EXPECT_NE(unwritable.err.find("cannot write"), std::string::npos) << unwritable.err;
  Result missing = duet("run " + (dir_ / "absent.gguf").string() + " --prompt hi");
  EXPECT_EQ(missing.code, 3) << missing.err;
}

TEST_F(Cli, RunJsonIsOneObjectWithTheResult) {
  Result r = duet("run --json " + write("p.yaml", kTinyPipeline) +
                  " --prompt hi --chat --system 'Be \"brief\"'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  for (const char* key : {"\"finish_reason\":", "\"sampler_order\":\"greedy\"",
                          "\"prompt_token_ids\":[1,", "\"decode_tokens_per_second\":"}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  }
}

TEST_F(Cli, RunRejectsAnEmptyPromptWithExit6) {
  Result r = duet("run " + write("p.yaml", kTinyPipeline) + " --prompt ''");
  EXPECT_EQ(r.code, 6);
  EXPECT_NE(r.err.find("the prompt is empty"), std::string::npos) << r.err;
}

TEST_F(Cli, RunRejectsAPromptLongerThanTheCacheWithExit6) {
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "x ";
  Result r = duet("run " + write("p.yaml", kTinyPipeline) + " --prompt '" + long_prompt + "'");
  EXPECT_EQ(r.code, 6);
  EXPECT_NE(r.err.find("raise components.kv_cache.capacity_tokens or shorten the prompt"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, RunRejectsAChatTemplateItCannotApplyWithExit2) {
  Result unparsed = duet("run " + write("p.yaml", kTinyPipeline) +
                         " --chat --set 'model.chat_template=\"{% for m in %}\"'");
  EXPECT_EQ(unparsed.code, 2);
  EXPECT_NE(unparsed.err.find("model.chat_template is not a Jinja template Duet can run ("),
            std::string::npos)
      << unparsed.err;
  Result messageless = duet("run " + write("p.yaml", kTinyPipeline) +
                            " --chat --set 'model.chat_template=\"{{ x }}\"'");
  EXPECT_EQ(messageless.code, 2);
  EXPECT_NE(messageless.err.find("model.chat_template does not write the user's message into the "
                                 "prompt, so it is no chat template"),
            std::string::npos)
      << messageless.err;
}

TEST_F(Cli, RunRejectsAnImpossibleSamplerValueWithItsKeyPath) {
  Result r = duet("run " + write("p.yaml", kTinyPipeline) +
                  " --set 'components.sampler.chain=[{top_p: 1.5}]'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("components.sampler.chain[0].top_p"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1.5"), std::string::npos) << r.err;
}

TEST_F(Cli, PerplexityScoresATextFile) {
  Result r = duet("perplexity " + write("p.yaml", kTinyPipeline) + " " +
                  write("text.txt", "the cat sat on the mat") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"perplexity\":"), std::string::npos) << r.out;
  r = duet("perplexity " + (dir_ / "p.yaml").string() + " " + (dir_ / "absent.txt").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot read text file"), std::string::npos) << r.err;
}

TEST_F(Cli, PerplexityScoresATextLongerThanTheCacheInWindows) {
  const fs::path p = write("p.yaml", kTinyPipeline);  // a cache of 128 tokens
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat. ";  // ~ 40 * 24 byte-level tokens
  const fs::path t = write("long.txt", text);
  Result whole = duet("perplexity " + p.string() + " " + t.string());
  EXPECT_EQ(whole.code, 6) << whole.err;
  EXPECT_NE(whole.err.find("but the KV cache holds 128; score it in windows with --ctx N"),
            std::string::npos)
      << whole.err;
  Result windows = duet("perplexity " + p.string() + " " + t.string() + " --ctx 64 --json");
  ASSERT_EQ(windows.code, 0) << windows.err;
  EXPECT_NE(windows.out.find("\"ctx\":64,"), std::string::npos) << windows.out;
  // Each window scores positions 32..62: 31 predictions.
  const size_t at = windows.out.find("\"windows\":");
  ASSERT_NE(at, std::string::npos);
  const int n = std::stoi(windows.out.substr(at + 10));
  EXPECT_GE(n, 2);
  EXPECT_NE(windows.out.find("\"positions\":" + std::to_string(31 * n) + ","), std::string::npos)
      << windows.out;
  Result too_big = duet("perplexity " + p.string() + " " + t.string() + " --ctx 256");
  EXPECT_EQ(too_big.code, 2) << too_big.err;
  EXPECT_NE(too_big.err.find("--ctx 256 is larger than the KV cache (128 tokens)"),
            std::string::npos)
      << too_big.err;
}

TEST_F(Cli, PerplexityOfAnEmptyOrTooShortTextSaysSo) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result empty = duet("perplexity " + p.string() + " " + write("empty.txt", ""));
  EXPECT_EQ(empty.code, 6) << empty.err;
  EXPECT_NE(empty.err.find("empty.txt' is empty; perplexity needs a text to score"),
            std::string::npos)
      << empty.err;
  Result short_text =
      duet("perplexity " + p.string() + " " + write("short.txt", "abc") + " --ctx 64");
  EXPECT_EQ(short_text.code, 6) << short_text.err;
  EXPECT_NE(short_text.err.find("perplexity needs at least 64 (one window of --ctx)"),
            std::string::npos)
      << short_text.err;
}

TEST_F(Cli, PerplexityAgainstSavedBaselineLogits) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  std::string text;
  for (int i = 0; i < 8; ++i) text += "the cat sat on the mat. ";
  const fs::path t = write("text.txt", text);
  const std::string base = (dir_ / "base.lgt").string();
  Result saved =
      duet("perplexity " + p.string() + " " + t.string() + " --ctx 64 --save-logits " + base);
  ASSERT_EQ(saved.code, 0) << saved.err;
  // Against itself: exact.
  Result same =
      duet("perplexity " + p.string() + " " + t.string() + " --ctx 64 --json --kl-base " + base);
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_NE(same.out.find(
                "\"perplexity_ratio\":1.0,\"kld_mean\":0.0,\"kld_median\":0.0,\"kld_p99\":0.0,"
                "\"kld_max\":0.0,\"top1_agreement\":1.0,\"rms_delta_p\":0.0,\"logits_nmse\":0.0}"),
            std::string::npos)
      << same.out;
  // An f16 cache differs a little.
  Result f16 = duet("perplexity " + p.string() + " " + t.string() + " --ctx 64 --kl-base " + base +
                    " --set components.kv_cache.dtype=f16");
  ASSERT_EQ(f16.code, 0) << f16.err;
  EXPECT_NE(f16.out.find("KL divergence mean "), std::string::npos) << f16.out;
  EXPECT_EQ(f16.out.find("KL divergence mean 0.0000e+00"), std::string::npos) << f16.out;
  // Another window size, another text, or not a logits file: refused.
  Result ctx = duet("perplexity " + p.string() + " " + t.string() + " --ctx 32 --kl-base " + base);
  EXPECT_EQ(ctx.code, 6) << ctx.err;
  EXPECT_NE(
      ctx.err.find("saved with --ctx 64, this run uses 32; save the baseline with --save-logits"),
      std::string::npos)
      << ctx.err;
  Result other = duet("perplexity " + p.string() + " " + write("other.txt", text + "more") +
                      " --ctx 64 --kl-base " + base);
  EXPECT_EQ(other.code, 6) << other.err;
  EXPECT_NE(other.err.find("tokens of text, this run has"), std::string::npos) << other.err;
  Result same_file = duet("perplexity " + p.string() + " " + t.string() + " --ctx 64 --kl-base " +
                          base + " --save-logits " + base);
  EXPECT_EQ(same_file.code, 2) << same_file.err;
  EXPECT_NE(same_file.err.find("--save-logits and --kl-base name the same file"), std::string::npos)
      << same_file.err;
  EXPECT_TRUE(fs::file_size(base) > 64) << "the baseline is kept";
  Result junk =
      duet("perplexity " + p.string() + " " + t.string() + " --ctx 64 --kl-base " + t.string());
  EXPECT_EQ(junk.code, 6) << junk.err;
  EXPECT_NE(junk.err.find("not a Duet logits file"), std::string::npos) << junk.err;
}

// Regression: an error thrown in a plugin's code crashed duet (SIGSEGV) when
// main() printed it after the plugin had been unloaded.
TEST_F(Cli, AnErrorThrownInsideAPluginIsReportedNotACrash) {
  Result r = duet("run " + write("p.yaml", kTinyPipeline) + " --set 'plugins.paths=[" +
                  DUET_TEST_PLUGIN_DIR + "]' --set 'components.sampler.chain=[test_throw]'");
  EXPECT_EQ(r.code, 6) << r.err;
  EXPECT_NE(r.err.find("duet: error: sampler 'test_throw' (plugin 'test-good', "
                       "components.sampler.chain[0]): test_throw rejects every step"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, PluginsListsLoadedAndRefusedWithReasons) {
  Result r = duet(std::string("plugins --plugin-path ") + DUET_TEST_PLUGIN_DIR);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("reference 0.1.0  loaded"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sampler greedy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reason: ABI major version mismatch"), std::string::npos) << r.out;
}

TEST_F(Cli, PluginsVerboseListsTheFilesNotTried) {
  const fs::path dir = fs::path(write("readme.txt", "not a plugin")).parent_path();
  Result r = duet("plugins --plugin-path " + dir.string() + " --verbose");
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t section = r.out.find("Files in the plugin folders not tried:");
  ASSERT_NE(section, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("readme.txt\n      not named duet-<name>.so", section), std::string::npos)
      << r.out;
  Result quiet = duet("plugins --plugin-path " + dir.string());
  EXPECT_EQ(quiet.out.find("not tried"), std::string::npos) << quiet.out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(Cli, ChatAnswersEachLineKeepsTheConversationAndResets) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result r = duet("chat " + p.string() + " --stats", "hello\nand then\n/reset\nagain\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count(r.err, "[turn 1: prefill "), 2u) << r.err;
  EXPECT_EQ(count(r.err, "[turn 2: prefill "), 1u) << r.err;
  EXPECT_EQ(count(r.err, "[new conversation]"), 1u) << r.err;
  EXPECT_LT(r.err.find("[turn 2:"), r.err.find("[new conversation]"));
  EXPECT_EQ(count(r.out, "\n"), 3u) << "one answer line per message: " << r.out;
  EXPECT_EQ(r.out.find("> "), std::string::npos) << "no prompt when input is not a terminal";
}

TEST_F(Cli, ChatEndsAtExitOrTheEndOfInput) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result r = duet("chat " + p.string() + " --stats", "hello\n/exit\nnever answered\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count(r.err, "[turn "), 1u) << r.err;
  Result empty = duet("chat " + p.string(), "");
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_EQ(empty.out, "");
  // A last line without a newline is still a message.
  Result unterminated = duet("chat " + p.string() + " --stats", "hello");
  EXPECT_EQ(count(unterminated.err, "[turn 1:"), 1u) << unterminated.err;
}

TEST_F(Cli, ChatSaysWhenTheCacheIsFullAndOffersTheWayOut) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result r =
      duet("chat " + p.string() + " --stats --set components.kv_cache.capacity_tokens=72",
           "hello there\nsomething longer that will not fit any more\n/reset\nhello there\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("duet: the KV cache is full: this message needs "), std::string::npos)
      << r.err;
  EXPECT_NE(
      r.err.find(
          "type /reset to start a new conversation, or run again with a larger cache, e.g. --set "
          "components.kv_cache.capacity_tokens=144"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(count(r.err, "[turn 1:"), 2u) << "the conversation goes on after /reset: " << r.err;
}

TEST_F(Cli, ChatTakesOnlyItsOwnCommandsAndCrlfLines) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result r = duet("chat " + p.string() + " --stats", "/etc/hosts\r\n/help\r\n/exit\r\nnever\r\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count(r.err, "[turn 1:"), 1u) << "'/etc/hosts' is a message: " << r.err;
  EXPECT_EQ(count(r.err, "[turn "), 1u) << "/exit with CRLF ends the chat: " << r.err;
  EXPECT_NE(r.err.find("[/reset starts a new conversation"), std::string::npos) << r.err;
}

TEST_F(Cli, ChatRefusesALineThatIsNotUtf8AndGoesOn) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result r = duet("chat " + p.string() + " --stats", "bad \xff byte\nfine\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("duet: this message is not valid UTF-8: byte 4 (0xff)"), std::string::npos)
      << r.err;
  EXPECT_EQ(count(r.err, "[turn 1:"), 1u) << r.err;
}

TEST_F(Cli, RunReadsThePromptFromAFileOrStandardInput) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  const std::string text = "a prompt\nover two lines";
  Result from_file =
      duet("run " + p.string() + " --json --prompt-file " + write("prompt.txt", text));
  ASSERT_EQ(from_file.code, 0) << from_file.err;
  EXPECT_NE(from_file.out.find("\"prompt\":\"a prompt\\nover two lines\""), std::string::npos)
      << from_file.out;
  Result from_stdin = duet("run " + p.string() + " --json --prompt -", text);
  ASSERT_EQ(from_stdin.code, 0) << from_stdin.err;
  EXPECT_NE(from_stdin.out.find("\"prompt\":\"a prompt\\nover two lines\""), std::string::npos)
      << from_stdin.out;
}

TEST_F(Cli, APromptThatIsNotUtf8Exits6) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result file = duet("run " + p.string() + " --prompt-file " + write("bad.txt", "ok \xc3\x28 no"));
  EXPECT_EQ(file.code, 6) << file.err;
  EXPECT_NE(
      file.err.find("duet: error: --prompt-file " + (dir_ / "bad.txt").string() +
                    " is not valid UTF-8: byte 3 (0xc3) does not start a well-formed character"),
      std::string::npos)
      << file.err;
  Result stdin_overlong = duet("run " + p.string() + " --prompt -", "\xc0\xaf");
  EXPECT_EQ(stdin_overlong.code, 6) << stdin_overlong.err;
  EXPECT_NE(stdin_overlong.err.find(
                "the prompt on standard input (--prompt -) is not valid UTF-8: byte 0"),
            std::string::npos)
      << stdin_overlong.err;
}

TEST_F(Cli, PromptSourcesAreExclusiveAndAMissingFileIsAUsageError) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result both = duet("run " + p.string() + " --prompt x --prompt-file " + write("x.txt", "x"));
  EXPECT_EQ(both.code, 2) << both.err;
  EXPECT_NE(both.err.find("--prompt and --prompt-file both given"), std::string::npos) << both.err;
  Result missing = duet("run " + p.string() + " --prompt-file " + (dir_ / "nope.txt").string());
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_NE(missing.err.find("nope.txt: cannot open the file"), std::string::npos) << missing.err;
}

TEST_F(Cli, TokenizeListsIdsAndPiecesAndParsesControlTokensOnlyWhenAsked) {
  const std::string model = (dir_ / "tiny.gguf").string();
  Result plain = duet("tokenize " + model + " --ids --no-bos --prompt '<|im_end|>'");
  ASSERT_EQ(plain.code, 0) << plain.err;
  Result special =
      duet("tokenize " + model + " --ids --no-bos --parse-special --prompt '<|im_end|>'");
  ASSERT_EQ(special.code, 0) << special.err;
  EXPECT_EQ(special.out, "[2]\n");  // <|im_end|>: one control token
  EXPECT_NE(plain.out, special.out);
  EXPECT_GT(count(plain.out, ","), 1u) << "the text's own bytes: " << plain.out;

  Result lines = duet("tokenize " + model + " --prompt -", "a\tb\n");
  ASSERT_EQ(lines.code, 0) << lines.err;
  EXPECT_NE(lines.out.find("\t\\t\n"), std::string::npos) << "escaped tab piece: " << lines.out;
  EXPECT_NE(lines.out.find("\t\\n\n"), std::string::npos) << lines.out;
  EXPECT_NE(lines.err.find(" tokens"), std::string::npos);
}

TEST_F(Cli, TokenizeRefusesTwoOutputFormats) {
  Result r = duet("tokenize " + (dir_ / "tiny.gguf").string() + " --ids --json --prompt x");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--ids and --json both given"), std::string::npos) << r.err;
}

TEST_F(Cli, RunParsesControlTokensInARawPromptOnlyWhenAsked) {
  const fs::path p = write("p.yaml", kTinyPipeline);
  Result special = duet("run " + p.string() + " --json --parse-special --prompt '<|im_start|>'");
  ASSERT_EQ(special.code, 0) << special.err;
  EXPECT_NE(special.out.find("\"prompt_token_ids\":[1]"), std::string::npos) << special.out;
  Result chat = duet("run " + p.string() + " --chat --parse-special --prompt hi");
  EXPECT_EQ(chat.code, 2) << chat.err;
  EXPECT_NE(chat.err.find("control tokens are parsed in raw prompts only"), std::string::npos)
      << chat.err;
}

TEST_F(Cli, InspectPrintsTheChatTemplate) {
  Result r = duet("inspect " + (dir_ / "tiny.gguf").string() + " --chat-template");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{% for message in messages %}", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("<|im_start|>assistant"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("duet applies: jinja (the model's tokenizer.chat_template, run as Jinja)"),
            std::string::npos)
      << r.err;
  // The tiny model's template (SmolLM2's shape) knows nothing of tools.
  EXPECT_NE(r.err.find("tools: json (Duet lists them"), std::string::npos) << r.err;
  Result summary = duet("inspect " + (dir_ / "tiny.gguf").string());
  EXPECT_NE(summary.out.find("bytes; duet inspect --chat-template prints it)"), std::string::npos)
      << summary.out;
}

// An experiment on the tiny model: the reference backend as baseline, one
// variant that compares, and three that fail their own way.
std::string experiment_text(const fs::path& dir) {
  std::string text;
  for (int i = 0; i < 4; ++i) text += "the cat sat on the mat. ";
  std::ofstream(dir / "score.txt") << text;
  return "pipeline: p.yaml\n"
         "baseline: ref\n"
         "variants:\n"
         "  - name: ref\n"
         "  - name: f16\n"
         "    set: {components.kv_cache.dtype: f16}\n"
         "  - name: crash\n"
         "    set: {components.sampler.chain: [test_abort]}\n"
         "  - name: oom\n"
         "    set: {components.sampler.chain: [test_oom]}\n"
         "  - name: refused\n"
         "    set: {backend.plugin: test-no-device}\n"
         "workload:\n"
         "  speed: {prompt_tokens: 8, gen_tokens: 4, depths: [0, 8], rounds: 2}\n"
         "  fidelity: {text: score.txt, ctx: 32}\n"
         "  greedy: {prompts: [hello, the cat, \"-\"], tokens: 6}\n";
}

TEST_F(Cli, CompareMeasuresEveryVariantAndReportsThoseThatFailWithTheirReasons) {
  write("p.yaml", with_backend("backend: {plugin: reference}\n"));
  const fs::path e = write("e.yaml", experiment_text(dir_));
  Result r = duet("compare " + e.string() + " -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  // Every variant is one object, the baseline first.
  EXPECT_EQ(r.out.find("\"variants\":[{\"name\":\"ref\""), r.out.find("\"variants\":[")) << r.out;
  EXPECT_NE(
      r.out.find(
          "\"name\":\"crash\",\"overrides\":[\"components.sampler.chain=[\\\"test_abort\\\"]\"],"
          "\"backend\":\"\",\"status\":\"failed\",\"failure\":{\"step\":\"speed\",\"exit_code\":"
          "134,"
          "\"reason\":\"killed by signal 6 (Aborted)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"status\":\"failed\",\"failure\":{\"step\":\"speed\",\"exit_code\":5,"
                       "\"reason\":\"duet: "
                       "error: out of host memory\"}"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"exit_code\":4,\"reason\":\"duet: error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("was refused: cannot run here: no test device present\"}"),
            std::string::npos)
      << r.out;
  // The baseline against itself is exact; the f16 cache is measured.
  EXPECT_NE(r.out.find("\"perplexity_ratio\":1.0,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"kld_max\":0.0,\"kld_mean\":0.0,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"top1_agreement\":1"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "\"test\":\"pp8\""), 2u) << "ref and f16: " << r.out;
  // The reference backend computes in host memory: no device figure.
  EXPECT_NE(r.out.find("\"device_bytes\":null,\"speed\":[{\"test\":\"pp8\""), std::string::npos)
      << r.out;
  EXPECT_EQ(count(r.out, "\"test\":\"tg4@d8\""), 2u) << r.out;
  EXPECT_NE(
      r.out.find(
          "\"prompt\":\"hello\",\"tokens\":6,\"matching_tokens\":6,\"first_divergence\":null"),
      std::string::npos)
      << r.out;
  // Rounds alternate between variants: ref, f16, ref, f16.
  const size_t ref1 = r.err.find("round 1/2, ref ("), f16_1 = r.err.find("round 1/2, f16 (");
  const size_t ref2 = r.err.find("round 2/2, ref (");
  EXPECT_LT(ref1, f16_1) << r.err;
  EXPECT_LT(f16_1, ref2) << r.err;
}

TEST_F(Cli, CompareTablesAndCsvNameEveryVariant) {
  write("p.yaml", with_backend("backend: {plugin: reference}\n"));
  const fs::path e = write("e.yaml", experiment_text(dir_));
  Result table = duet("compare " + e.string() + " --set workload.speed.rounds=1");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("| variant | backend   | pp8 t/s (min-max)"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("Fidelity against ref (teacher-forced on score.txt, windows of 32)"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("  crash: speed, exit code 134: killed by signal 6 (Aborted)"),
            std::string::npos)
      << table.out;
  Result csv = duet("compare " + e.string() + " -o csv --set workload.speed.rounds=1");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("variant,backend,status,pp8_tps_median,pp8_tps_min,pp8_tps_max,", 0), 0u)
      << csv.out;
  EXPECT_EQ(count(csv.out, "\n"), 6u) << "a header and five variants: " << csv.out;
  EXPECT_NE(csv.out.find("\nrefused,,failed,"), std::string::npos) << csv.out;
}

TEST_F(Cli, CompareRefusesABadExperimentWithExit2) {
  write("p.yaml", kTinyPipeline);
  Result r = duet("compare " + write("e.yaml",
                                     "pipeline: p.yaml\nbaseline: zzz\nvariants: [{name: a}]\n"
                                     "workload: {speed: {gen_tokens: 4}}\n"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("e.yaml:2:11: baseline: 'zzz' is not a variant's name; variants: 'a'"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, CompareInterruptedWithCtrlCKeepsWhatWasMeasured) {
  write("p.yaml", with_backend("backend: {plugin: reference}\n"));
  // Enough rounds to be still running when the interrupt comes.
  const fs::path e = write("e.yaml",
                           "pipeline: p.yaml\nbaseline: a\nvariants: [{name: a}, {name: b}]\n"
                           "workload: {speed: {gen_tokens: 4, rounds: 100}}\n");
  const fs::path out = dir_ / "out.json", err = dir_ / "err.txt";
  const std::string cmd = "bash -c '" + std::string(DUET_BUILD_DIR) + "/bin/duet compare " +
                          e.string() + " -o json >" + out.string() + " 2>" + err.string() +
                          " & pid=$!; sleep 1; kill -INT $pid; wait $pid'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(err);
  const std::string json = slurp(out);
  EXPECT_NE(json.find("\"interrupted\":true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"status\":\"interrupted\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"samples\":["), std::string::npos)
      << "rounds before the interrupt are kept: " << json;
}

// The SDK's conformance kit: a correct plugin attention passes every case;
// one that drops the scale and one that leaves a row unwritten fail with
// exit code 4, each naming what went wrong.
// Every component the source tree builds as a plugin passes the kit, each
// with the options its factory needs.
TEST_F(Cli, ConformancePassesEveryInTreePluginComponent) {
  const std::string dir = std::string(DUET_BUILD_DIR) + "/plugins/";
  const std::vector<std::pair<std::string, std::string>> checks = {
      {"duet-samplers.so", ""},
      {"duet-samplers.so", " --component temperature --option t=0.7"},
      {"duet-samplers.so", " --component top_k --option k=40"},
      {"duet-samplers.so", " --component top_p --option p=0.95"},
      {"duet-samplers.so", " --component min_p --option p=0.05"},
      {"duet-samplers.so", " --component repetition_penalty --option penalty=1.1"},
      {"duet-samplers.so", " --component presence_penalty --option penalty=0.5"},
      {"duet-samplers.so", " --component frequency_penalty --option penalty=0.5"},
      {"duet-speculative.so", ""},
      {"duet-sliding-window.so", " --option window=4096"},
      {"duet-mmap-kv-cache.so", " --option path=" + (dir_ / "kv").string()},
  };
  for (const auto& [file, args] : checks) {
    Result r = duet("conformance --plugin " + dir + file + args);
    EXPECT_EQ(r.code, 0) << file << args << "\n" << r.out << r.err;
    // sliding_window's one window is not a model's per-layer one: it says
    // so for the kit's sliding-window layer.
    if (file == "duet-sliding-window.so") {
      EXPECT_NE(r.out.find("skip: attention 'sliding_window' cannot run the model's own "
                           "sliding-window layers (24 positions); use attention 'full'"),
                std::string::npos)
          << r.out;
    }
    EXPECT_NE(r.out.find(" 0 FAIL"), std::string::npos) << file << args << "\n" << r.out;
    // A sampler given its options runs (onednn's own q8_0 tiles may skip
    // an attention's cases on VNNI machines).
    if (args.find("--component") != std::string::npos) {
      EXPECT_NE(r.out.find("1 cases: 1 pass"), std::string::npos) << file << args << "\n" << r.out;
    }
  }
}

// duet run's --grammar and --json-schema put a grammar link first in the
// chain: the tiny model's answer follows them.
TEST_F(Cli, RunFollowsAGrammarOrASchemaGivenOnTheCommandLine) {
  const std::string pipeline = write("p.yaml", kTinyPipeline);
  const std::string gbnf = write("g.gbnf", "root ::= \"ab\" [c-d]\n");
  Result r = duet("run " + pipeline + " --prompt hi --json --grammar " + gbnf);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["text"] == "abc" || j["text"] == "abd") << j["text"];
  EXPECT_EQ(j["finish_reason"], "stop");
  const std::string schema = write("s.json", R"({"type": "boolean"})");
  Result s = duet("run " + pipeline + " --prompt hi --json --json-schema " + schema);
  ASSERT_EQ(s.code, 0) << s.err;
  const std::string text = nlohmann::json::parse(s.out)["text"];
  EXPECT_TRUE(text == "true" || text == "false") << text;
  Result both = duet("run " + pipeline + " --grammar " + gbnf + " --json-schema " + schema);
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("give one"), std::string::npos) << both.err;
  Result missing = duet("run " + pipeline + " --grammar " + (dir_ / "none.gbnf").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("--grammar.gbnf_file: cannot read"), std::string::npos) << missing.err;
  Result batch = duet("run " + pipeline + " --prompts-file x.jsonl --grammar " + gbnf);
  EXPECT_EQ(batch.code, 2);
  EXPECT_NE(batch.err.find("--prompts-file and --grammar"), std::string::npos) << batch.err;
}

// A sampler that reads the vocabulary cannot be checked on random rows: its
// row says so (after its options are checked) rather than failing.
TEST_F(Cli, ConformanceSaysWhyItCannotCheckAVocabularySampler) {
  const std::string plugin = std::string(DUET_BUILD_DIR) + "/plugins/duet-grammar.so";
  Result r =
      duet("conformance --plugin " + plugin + " --component grammar --option json_object=true");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("skip: it reads the vocabulary"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 cases: 0 pass, 0 FAIL, 1 skipped"), std::string::npos) << r.out;
  Result bad = duet("conformance --plugin " + plugin + " --component grammar --option gbnf=x");
  EXPECT_NE(bad.out.find("expected '::=' after rule name 'x'"), std::string::npos)
      << bad.out << bad.err;
}

TEST_F(Cli, ConformancePassesACorrectAttentionAndFailsWrongOnes) {
  const std::string plugin =
      std::string(" --plugin ") + DUET_TEST_PLUGIN_DIR + "/duet-test-extensions.so";
  Result good = duet("conformance" + plugin + " --component test_full");
  EXPECT_EQ(good.code, 0) << good.err;
  EXPECT_NE(good.out.find("attention 'test_full'"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("reference  paged q8_0"), std::string::npos) << good.out;
  // A sliding-window layer too (AttentionSpec::window).
  EXPECT_NE(good.out.find("reference  paged w24 f32        0.00e+00    1e-10  pass"),
            std::string::npos)
      << good.out;
  EXPECT_NE(good.out.find(" 0 FAIL"), std::string::npos) << good.out;
  EXPECT_EQ(good.out.find("FAIL:"), std::string::npos) << good.out;

  Result unscaled = duet("conformance" + plugin + " --component test_no_scale");
  EXPECT_EQ(unscaled.code, 4) << unscaled.err;
  EXPECT_NE(unscaled.out.find("FAIL: positions 0..4: output off the reference's 'full' attention"),
            std::string::npos)
      << unscaled.out;
  Result forgetful = duet("conformance" + plugin + " --component test_forgets_row");
  EXPECT_EQ(forgetful.code, 4) << forgetful.err;
  EXPECT_NE(forgetful.out.find("cache rows differ from what KVCache::write stores"),
            std::string::npos)
      << forgetful.out;
  EXPECT_NE(forgetful.err.find("duet: error: duet conformance: 9 of 9 cases of plugin "
                               "'test-extensions' failed"),
            std::string::npos)
      << forgetful.err;

  // The plugin's KV-cache storage, under the backend's own attention, with
  // block copies and an export/import round trip.
  Result storage = duet("conformance" + plugin + " --component test_rows");
  EXPECT_EQ(storage.code, 0) << storage.err;
  EXPECT_NE(storage.out.find("KV-cache storage 'test_rows'         reference  paged f16"),
            std::string::npos)
      << storage.out;
  EXPECT_NE(storage.out.find("9 cases: 9 pass, 0 FAIL, 0 skipped"), std::string::npos)
      << storage.out;
  Result late = duet("conformance" + plugin + " --component test_range_off_by_one");
  EXPECT_EQ(late.code, 4) << late.err;
  EXPECT_NE(late.out.find("FAIL: export_slot_range(17, 40) differs from slots 17..56 of "
                          "export_slots"),
            std::string::npos)
      << late.out;

  // Samplers: the Candidates contract on random rows.
  const std::string samplers =
      std::string(" --plugin ") + DUET_TEST_PLUGIN_DIR + "/duet-test-good.so";
  Result first = duet("conformance" + samplers + " --component test_first");
  EXPECT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("sampler 'test_first'"), std::string::npos) << first.out;
  Result thrower = duet("conformance" + samplers + " --component test_throw_int_apply");
  EXPECT_EQ(thrower.code, 4) << thrower.err;
  EXPECT_NE(thrower.out.find("FAIL: row 0: threw something that is not a std::exception"),
            std::string::npos)
      << thrower.out;

  // Each component is checked in a process of its own: one that aborts
  // fails its row, and the table is still printed.
  Result aborts = duet("conformance" + samplers + " --component test_abort");
  EXPECT_EQ(aborts.code, 4) << aborts.err;
  EXPECT_NE(aborts.out.find("sampler 'test_abort'"), std::string::npos) << aborts.out;
  EXPECT_NE(aborts.out.find("FAIL: the process checking it died of signal 6 (SIGABRT)"),
            std::string::npos)
      << aborts.out;
  EXPECT_NE(aborts.out.find("1 cases: 0 pass, 1 FAIL"), std::string::npos) << aborts.out;
  Result one_backend = duet("conformance" + plugin + " --component test_full --backend onednn");
  EXPECT_EQ(one_backend.code, 0) << one_backend.err;
  EXPECT_EQ(one_backend.out.find(" reference "), std::string::npos) << one_backend.out;
  EXPECT_NE(one_backend.out.find("9 cases: "), std::string::npos) << one_backend.out;
  EXPECT_NE(one_backend.out.find(" 0 FAIL"), std::string::npos) << one_backend.out;

  // Stages: core decode's tokens alone and batched (lookup_decode passes
  // every case); a stage that throws fails naming why; a stage of the old
  // interface (ABI 1.0) is refused before any case.
  Result lookup =
      duet(std::string("conformance --plugin ") + DUET_BUILD_DIR + "/plugins/duet-speculative.so");
  EXPECT_EQ(lookup.code, 0) << lookup.err;
  EXPECT_NE(lookup.out.find("stage 'lookup_decode'                reference  batched sampled"),
            std::string::npos)
      << lookup.out;
  EXPECT_NE(lookup.out.find("5 cases: 5 pass, 0 FAIL"), std::string::npos) << lookup.out;
  Result throws = duet("conformance" + samplers + " --component test_throw_stage");
  EXPECT_EQ(throws.code, 4) << throws.err;
  EXPECT_NE(throws.out.find("FAIL: threw: stage 'test_throw_stage' (plugin 'test-good', "
                            "stages[1]) failed: the stage broke"),
            std::string::npos)
      << throws.out;
  Result old = duet(std::string("conformance --plugin ") + DUET_TEST_PLUGIN_DIR +
                    "/duet-test-abi-1-0.so --component test_abi_1_0_decode");
  EXPECT_EQ(old.code, 4) << old.err;
  EXPECT_NE(old.err.find("stage 'test_abi_1_0_decode' (plugin 'test-abi-1-0') was built against "
                         "Duet ABI 1.0"),
            std::string::npos)
      << old.err;

  Result unknown = duet("conformance" + plugin + " --component nosuch");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("plugin 'test-extensions' has no component 'nosuch'; it has:"),
            std::string::npos)
      << unknown.err;
  EXPECT_EQ(duet("conformance").code, 2);
}

}  // namespace
}  // namespace duet
