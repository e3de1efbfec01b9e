// The bad-input matrix: malformed model files, pipeline YAML, command-line
// flags, sampler values, prompts, plugins and resource limits, each run
// through the real `duet` binary. Every row asserts the documented exit
// code, a substring of the one-line error, and that the process ended on
// its own (no signal, no hang). docs/reliability.md lists the same rows.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "duet/app/gguf.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

struct Row {
  const char* name;
  const char* args;  // after `duet`; {dir} is the fixture folder
  int exit_code;
  const char* message;  // a substring of stderr (or stdout for exit code 0)
  bool once = false;    // the message must appear exactly once
  bool alone = false;   // and be the only line: nothing follows from it
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

constexpr const char* kPipeline = R"(model: {path: tiny.gguf}
backend: {plugin: reference}
components:
  kv_cache: {capacity_tokens: 64}
  sampler: {seed: 1, chain: [greedy]}
stages:
  - prefill: {}
  - decode: {max_new_tokens: 4}
)";

// Stages on two named backends (both reference, so the rows need no other
// plugin), with a cache of its own dtype on one of them.
constexpr const char* kSplit = R"(model: {path: tiny.gguf}
backends:
  fast: {plugin: reference}
  slow: {plugin: reference, kv_cache: {dtype: f16}}
components:
  kv_cache: {capacity_tokens: 64}
  sampler: {seed: 1, chain: [greedy]}
stages:
  - prefill: {backend: fast}
  - decode: {backend: slow, max_new_tokens: 4}
)";

class BadInput : public ::testing::TestWithParam<Row> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("bad-input"));
    const fs::path& d = *dir_;
    testing::write_tiny_llama(d / "tiny.gguf");
    const std::string good = slurp(d / "tiny.gguf");
    spit(d / "empty.gguf", "");
    spit(d / "text.gguf", "this is not a model\n");
    spit(d / "truncated.gguf", good.substr(0, good.size() / 2));
    std::string v1 = good;
    v1[4] = 1;  // the version field follows the 4-byte magic
    spit(d / "version1.gguf", v1);
    std::string huge = good;
    // The first key's length (u64 after magic, version, tensor and kv counts).
    for (int i = 0; i < 8; ++i) huge[24 + static_cast<size_t>(i)] = '\xff';
    spit(d / "huge-string.gguf", huge);
    fs::create_directories(d / "dir.gguf");

    testing::TinyLlama arch;
    arch.architecture = "gpt9";
    testing::write_tiny_llama(d / "arch.gguf", arch);
    testing::TinyLlama missing;
    missing.omit_tensor = "blk.1.ffn_down.weight";
    testing::write_tiny_llama(d / "missing-tensor.gguf", missing);
    testing::TinyLlama scaled;
    scaled.extra_key = "rope.scaling.factor";
    testing::write_tiny_llama(d / "hparam.gguf", scaled);
    testing::TinyLlama freqs;
    freqs.extra_tensor = "blk.0.ffn_gate_exps.weight";
    testing::write_tiny_llama(d / "extra-tensor.gguf", freqs);
    testing::TinyLlama pre;
    pre.pre_tokenizer = "llama-bpe-2031";
    testing::write_tiny_llama(d / "pre.gguf", pre);
    // Huge KV heads and context: a cache of hundreds of GB is asked for.
    testing::TinyLlama wide;
    wide.n_embd = 1024;
    wide.n_heads = 16;
    wide.n_kv_heads = 16;
    wide.context_length = 16777216;
    testing::write_tiny_llama(d / "wide.gguf", wide);

    spit(d / "p.yaml", kPipeline);
    auto variant_of = [&](const char* base, const std::string& name, const std::string& from,
                          const std::string& to) {
      std::string text = base;
      const size_t at = text.find(from);
      if (at == std::string::npos) std::abort();
      spit(d / name, text.replace(at, from.size(), to));
    };
    auto variant = [&](const std::string& name, const std::string& from, const std::string& to) {
      variant_of(kPipeline, name, from, to);
    };
    auto split = [&](const std::string& name, const std::string& from, const std::string& to) {
      variant_of(kSplit, name, from, to);
    };
    variant("unknown-key.yaml", "backend:", "backnd:");
    variant("typo.yaml", "capacity_tokens", "capacity_tokns");
    variant("wrong-type.yaml", "capacity_tokens: 64", "capacity_tokens: lots");
    variant("zero-capacity.yaml", "capacity_tokens: 64", "capacity_tokens: 0");
    variant("bad-dtype.yaml", "capacity_tokens: 64", "capacity_tokens: 64, dtype: q2_k");
    variant("no-model.yaml", "model: {path: tiny.gguf}\n", "");
    variant("no-stages.yaml", "stages:\n  - prefill: {}\n  - decode: {max_new_tokens: 4}\n", "");
    variant("decode-first.yaml", "  - prefill: {}\n  - decode: {max_new_tokens: 4}\n",
            "  - decode: {}\n");
    variant("syntax.yaml", "chain: [greedy]", "chain: [greedy");
    variant("tab.yaml", "  kv_cache", "\tkv_cache");
    variant("two-keys.yaml", "chain: [greedy]", "chain: [{greedy: {}, top_k: 3}]");
    variant("dup-stage.yaml", "  - decode: {max_new_tokens: 4}\n",
            "  - decode: {}\n  - decode: {}\n");
    variant("score-only.yaml", "  - decode: {max_new_tokens: 4}\n", "");
    variant("big-capacity.yaml", "capacity_tokens: 64", "capacity_tokens: 100000");
    variant("attention.yaml", "kv_cache:", "attention: {impl: flash}\n  kv_cache:");
    variant("kv-impl.yaml", "capacity_tokens: 64", "capacity_tokens: 64, impl: paged");
    variant("kv-bf16.yaml", "capacity_tokens: 64", "capacity_tokens: 64, dtype: bf16");
    variant("backend-option.yaml", "plugin: reference", "plugin: reference, options: {threads: 2}");
    variant("wide.yaml", "path: tiny.gguf", "path: wide.gguf");
    variant("stage-backend.yaml", "  - prefill: {}", "  - prefill: {backend: fast}");
    split("split-both.yaml", "backends:", "backend: {plugin: reference}\nbackends:");
    split("split-undefined.yaml", "backend: slow,", "backend: slo,");
    split("split-unused.yaml", "{backend: slow, max_new_tokens", "{backend: fast, max_new_tokens");
    split("split-unplaced.yaml", "{backend: slow, max_new_tokens", "{max_new_tokens");
    split("split-name.yaml", "  fast: {plugin: reference}", "  Fast!: {plugin: reference}");
    split("split-no-plugin.yaml", "fast: {plugin: reference}", "fast: {options: {}}");
    split("split-plugin-list.yaml", "fast: {plugin: reference}",
          "fast: {plugin: [onednn, reference]}");
    split("split-dtype.yaml", "dtype: f16", "dtype: q4");
    split("split-bf16.yaml", "dtype: f16", "dtype: bf16");
    split("split-kv-key.yaml", "dtype: f16}", "dtype: f16, capacity_tokens: 8}");
    split("split-plugin.yaml", "fast: {plugin: reference}", "fast: {plugin: cuba}");
    split("split-option.yaml", "fast: {plugin: reference}",
          "fast: {plugin: reference, options: {threads: 2}}");
    split("split-empty.yaml",
          "  fast: {plugin: reference}\n  slow: {plugin: reference, kv_cache: {dtype: f16}}\n", "");
    split("split-wide.yaml", "path: tiny.gguf", "path: wide.gguf");
    spit(d / "large.yaml", std::string(2 << 20, '#'));
    for (const char* m : {"empty", "text", "truncated", "version1", "huge-string", "dir", "arch",
                          "missing-tensor", "pre", "hparam", "extra-tensor"}) {
      variant(std::string("model-") + m + ".yaml", "path: tiny.gguf",
              std::string("path: ") + m + ".gguf");
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  static inline fs::path* dir_ = nullptr;
};

TEST_P(BadInput, GetsItsExitCodeAndAOneLineMessage) {
  const Row& row = GetParam();
  std::string args = row.args;
  for (size_t at; (at = args.find("{dir}")) != std::string::npos;)
    args.replace(at, 5, dir_->string());
  const fs::path out = *dir_ / (std::string(row.name) + ".out"),
                 err = *dir_ / (std::string(row.name) + ".err");
  const std::string cmd = "timeout 60 " + std::string(DUET_BUILD_DIR) + "/bin/duet " + args + " >" +
                          out.string() + " 2>" + err.string() + " </dev/null";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: " << cmd;
  const int code = WEXITSTATUS(status);
  ASSERT_NE(code, 124) << "hung (timeout): " << cmd;
  const std::string text = slurp(row.exit_code == 0 ? out : err);
  EXPECT_EQ(code, row.exit_code) << cmd << "\n" << text;
  EXPECT_NE(text.find(row.message), std::string::npos) << "expected '" << row.message << "' in:\n"
                                                       << text;
  if (row.once) {
    EXPECT_EQ(text.find(row.message), text.rfind(row.message)) << "reported twice:\n" << text;
  }
  if (row.alone) {
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << "more than the one problem:\n"
                                                             << text;
  }
  if (row.exit_code != 0) {
    // Every problem on its own line, each starting with the tool's prefix.
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_EQ(line.rfind("duet: error: ", 0), 0u) << "line: " << line;
    }
  }
}

const Row kRows[] = {
    // Model files.
    {"model_missing", "inspect {dir}/absent.gguf", 3, "absent.gguf"},
    {"model_empty", "inspect {dir}/empty.gguf", 3, "empty.gguf"},
    {"model_text", "inspect {dir}/text.gguf", 3, "not a GGUF file"},
    {"model_truncated", "inspect {dir}/truncated.gguf", 3, "truncated.gguf"},
    {"model_version1", "inspect {dir}/version1.gguf", 3, "version 1"},
    {"model_huge_string", "inspect {dir}/huge-string.gguf", 3, "huge-string.gguf"},
    {"model_directory", "inspect {dir}/dir.gguf", 3, "dir.gguf"},
    // A model core cannot read stops the check there: no follow-on problems
    // from hyperparameters it never read (context length 0, 0 heads).
    {"model_architecture", "run {dir}/model-arch.yaml", 3,
     "general.architecture 'gpt9' is not supported", true, true},
    {"model_missing_tensor", "run {dir}/model-missing-tensor.yaml", 3,
     "'blk.1.ffn_down.weight' is missing"},
    {"model_pre_tokenizer", "run {dir}/model-pre.yaml", 3, "'llama-bpe-2031' is not supported"},
    // A hyperparameter or tensor Duet does not implement is named, not
    // ignored.
    {"model_unimplemented_key", "run {dir}/model-hparam.yaml", 3,
     "llama.rope.scaling.factor is a hyperparameter Duet's llama model does not implement", true,
     true},
    {"model_unbound_tensor", "run {dir}/model-extra-tensor.yaml", 3,
     "tensor 'blk.0.ffn_gate_exps.weight' is not part of Duet's llama model", true, true},
    {"run_model_truncated", "run {dir}/model-truncated.yaml", 3, "truncated.gguf"},
    {"run_model_text", "run {dir}/model-text.yaml", 3, "not a GGUF file"},
    // Pipeline YAML.
    {"yaml_unknown_key", "validate {dir}/unknown-key.yaml", 2, "unknown key 'backnd'"},
    {"yaml_typo_suggests", "validate {dir}/typo.yaml", 2, "did you mean 'capacity_tokens'?"},
    {"yaml_wrong_type", "validate {dir}/wrong-type.yaml", 2, "'lots'"},
    {"yaml_out_of_range", "validate {dir}/zero-capacity.yaml", 2, "1..16777216"},
    {"yaml_bad_dtype", "validate {dir}/bad-dtype.yaml", 2, "q2_k"},
    {"yaml_missing_model", "validate {dir}/no-model.yaml", 2, "model"},
    {"yaml_no_stages", "validate {dir}/no-stages.yaml", 2, "stages"},
    {"yaml_decode_first", "validate {dir}/decode-first.yaml", 2,
     "needs logits from a stage before it"},
    {"yaml_syntax", "validate {dir}/syntax.yaml", 2, "syntax.yaml:"},
    {"yaml_tab", "validate {dir}/tab.yaml", 2, "tab"},
    {"yaml_two_keys", "validate {dir}/two-keys.yaml", 2, "two-keys.yaml:"},
    {"yaml_duplicate_stage", "validate {dir}/dup-stage.yaml", 2, "decode"},
    {"serve_scoring_pipeline", "serve {dir}/score-only.yaml", 2,
     "score prompts and generate nothing; add a decode stage"},
    {"yaml_missing_file", "validate {dir}/absent.yaml", 2, "absent.yaml"},
    {"yaml_too_large", "validate {dir}/large.yaml", 2, "large.yaml"},
    {"yaml_capacity_over_context", "validate {dir}/big-capacity.yaml", 2,
     "exceeds the model's context_length 256"},
    {"yaml_unknown_attention", "validate {dir}/attention.yaml", 2,
     "'flash' is not provided by backend 'reference'"},
    {"yaml_unknown_kv_cache", "validate {dir}/kv-impl.yaml", 2,
     "'paged' is not provided by backend 'reference'"},
    {"yaml_kv_dtype_unsupported", "validate {dir}/kv-bf16.yaml", 2, "f32, f16 or q8_0, not bf16",
     true},
    {"yaml_backend_option", "validate {dir}/backend-option.yaml", 2, "threads"},
    // Stages on named backends (`backends:`).
    {"split_both_forms", "validate {dir}/split-both.yaml", 2,
     "either on one `backend:` or on named `backends:`, not both; remove one"},
    {"split_undefined_backend", "validate {dir}/split-undefined.yaml", 2,
     "stages[1].decode.backend: 'slo' is not defined under `backends:`; did you mean 'slow'?"},
    {"split_unused_backend", "validate {dir}/split-unused.yaml", 2,
     "backends.slow: no stage runs on it; place a stage on it with `backend: slow` or remove it"},
    {"split_stage_not_placed", "validate {dir}/split-unplaced.yaml", 2,
     "stages[1].decode: this pipeline has several backends ('fast', 'slow'); say which this stage "
     "runs on with `backend: NAME`"},
    {"split_stage_backend_without_backends", "validate {dir}/stage-backend.yaml", 2,
     "stages[0].prefill.backend: names backend 'fast', but this pipeline has no `backends:`"},
    {"split_bad_name", "validate {dir}/split-name.yaml", 2,
     "backends.Fast!: a backend's name is [a-z0-9_-]+"},
    {"split_plugin_missing", "validate {dir}/split-no-plugin.yaml", 2,
     "backends.fast: missing required key 'plugin'"},
    {"split_plugin_list", "validate {dir}/split-plugin-list.yaml", 2,
     "backends.fast.plugin: expected one backend's name"},
    {"split_bad_dtype", "validate {dir}/split-dtype.yaml", 2,
     "backends.slow.kv_cache.dtype: expected one of 'f32', 'f16', 'bf16', 'q8_0', found 'q4'"},
    {"split_dtype_unsupported", "validate {dir}/split-bf16.yaml", 2,
     "backends.slow: components.kv_cache: backend 'reference' holds K and V as f32, f16 or q8_0, "
     "not bf16; set backends.slow.kv_cache.dtype to f32, f16 or q8_0"},
    {"split_kv_cache_unknown_key", "validate {dir}/split-kv-key.yaml", 2,
     "unknown key 'capacity_tokens' in backends.slow.kv_cache"},
    {"split_backend_option", "validate {dir}/split-option.yaml", 2,
     "backends.fast.options.threads: unknown option 'threads'"},
    {"split_empty_backends", "validate {dir}/split-empty.yaml", 2,
     "backends: expected a map from a name to {plugin: NAME"},
    // Command line.
    {"cli_no_command", "", 2, "no command given"},
    {"cli_unknown_command", "frobnicate", 2, "unknown command 'frobnicate'"},
    {"cli_unknown_flag", "validate {dir}/p.yaml --frob", 2, "see 'duet validate --help'"},
    {"cli_missing_argument", "validate", 2, "missing argument pipeline"},
    {"cli_set_without_equals", "validate {dir}/p.yaml --set components.kv_cache", 2,
     "components.kv_cache"},
    {"cli_set_through_scalar", "validate {dir}/p.yaml --set model.path.x=1", 2, "model.path"},
    // Sampler values.
    {"sampler_top_p", "validate {dir}/p.yaml --set 'components.sampler.chain=[{top_p: 1.5}]'", 2,
     "chain[0].top_p"},
    {"sampler_temperature",
     "validate {dir}/p.yaml --set 'components.sampler.chain=[{temperature: -1}]'", 2,
     "temperature"},
    {"sampler_top_k", "validate {dir}/p.yaml --set 'components.sampler.chain=[{top_k: -3}]'", 2,
     "-3"},
    {"sampler_unknown", "validate {dir}/p.yaml --set 'components.sampler.chain=[top_q]'", 4,
     "no sampler named 'top_q'"},
    {"sampler_unknown_option",
     "validate {dir}/p.yaml --set 'components.sampler.chain=[{top_k: {kk: 3}}]'", 2, "kk"},
    // Prompts.
    {"prompt_empty", "run {dir}/p.yaml --prompt ''", 6, "the prompt is empty"},
    {"prompt_longer_than_cache",
     "run {dir}/p.yaml --set components.kv_cache.capacity_tokens=8 --prompt 'zz zz zz zz zz zz zz "
     "zz'",
     6, "raise components.kv_cache.capacity_tokens or shorten the prompt"},
    {"prompt_chat_template", "run {dir}/p.yaml --chat --set 'model.chat_template=\"{{ x }}\"'", 2,
     "model.chat_template does not write the user's message into the prompt"},
    {"perplexity_not_a_file", "perplexity {dir}/p.yaml {dir}", 2, "cannot read text file"},
    // Plugins.
    {"plugin_unknown_backend", "validate {dir}/p.yaml --set backend.plugin=cuba", 4,
     "no backend named 'cuba'"},
    {"split_unknown_plugin", "validate {dir}/split-plugin.yaml", 4,
     "backends.fast: no backend named 'cuba'"},
    {"plugin_create_throws", "plugins --plugin-path " DUET_TEST_PLUGIN_DIR, 0,
     "create() failed: create exploded"},
    {"plugin_not_a_library", "plugins --plugin-path " DUET_TEST_PLUGIN_DIR, 0,
     "not a loadable shared library"},
    {"plugin_wrong_abi", "plugins --plugin-path " DUET_TEST_PLUGIN_DIR, 0,
     "ABI major version mismatch"},
    {"plugin_error_inside",
     "run {dir}/p.yaml --set 'plugins.paths=[" DUET_TEST_PLUGIN_DIR
     "]' --set 'components.sampler.chain=[test_throw]'",
     6,
     "sampler 'test_throw' (plugin 'test-good', components.sampler.chain[0]): test_throw rejects "
     "every step"},
    {"plugin_sampler_throws_an_int",
     "run {dir}/p.yaml --set 'plugins.paths=[" DUET_TEST_PLUGIN_DIR
     "]' --set 'components.sampler.chain=[test_throw_int_apply]'",
     4,
     "sampler 'test_throw_int_apply' (plugin 'test-good', components.sampler.chain[0]) failed: it "
     "threw something that is not a std::exception"},
    {"plugin_stage_throws",
     "run {dir}/p.yaml --set 'plugins.paths=[" DUET_TEST_PLUGIN_DIR
     "]' --set 'stages.1={test_throw_stage: {}}'",
     4, "stage 'test_throw_stage' (plugin 'test-good', stages[1]) failed: the stage broke"},
    {"plugin_kv_storage_throws",
     "run {dir}/p.yaml --set 'plugins.paths=[" DUET_TEST_PLUGIN_DIR
     "]' --set components.kv_cache.impl=test_throw_write",
     4,
     "KV-cache storage 'test_throw_write' (plugin 'test-extensions', components.kv_cache.impl) "
     "failed: it threw something that is not a std::exception"},
    {"plugin_folder_missing", "validate {dir}/p.yaml --set 'plugins.paths=[nosuch-folder]'", 2,
     "nosuch-folder' is not a folder; fix the path or remove it from the list"},
    {"plugin_path_option_missing", "plugins --plugin-path {dir}/nosuch", 2, "--plugin-path '"},
    {"plugin_factory_throws_an_int",
     "run {dir}/p.yaml --set 'plugins.paths=[" DUET_TEST_PLUGIN_DIR
     "]' --set 'components.sampler.chain=[test_throw_int]'",
     4,
     "plugin 'test-good' failed in sampler 'test_throw_int': its factory threw something that is "
     "not a std::exception"},
    // Resources.
    {"kv_cache_larger_than_memory",
     "run {dir}/wide.yaml --set components.kv_cache.capacity_tokens=16777216", 5,
     "GiB KV cache (reference)) but has"},
    {"split_device_memory",
     "run {dir}/split-wide.yaml --set components.kv_cache.capacity_tokens=16777216", 5,
     "GiB KV cache (fast) + 128.0 GiB KV cache (slow)) but has"},
};

INSTANTIATE_TEST_SUITE_P(Matrix, BadInput, ::testing::ValuesIn(kRows),
                         [](const auto& row_info) { return std::string(row_info.param.name); });

}  // namespace
}  // namespace duet
