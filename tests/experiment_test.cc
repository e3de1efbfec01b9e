// Experiment files for `duet compare`: what they expand to, and one clear
// line per problem for bad ones.
#include "duet/app/experiment.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "duet/app/pipeline_config.h"
#include "duet/error.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

class ExperimentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("experiment"));
    std::ofstream(*dir_ / "p.yaml") << "model: {path: m.gguf}\nbackend: {plugin: reference}\n"
                                       "stages: [{prefill: {}}, {decode: {max_new_tokens: 8}}]\n";
    std::ofstream(*dir_ / "text.txt") << "some text to score\n";
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  static Experiment parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
    return parse_experiment(text, "e.yaml", *dir_, overrides);
  }

  // The error of a bad experiment; fails the test when it is accepted or
  // the error is not a config error (exit code 2).
  static std::string error_of(const std::string& text) {
    try {
      parse(text);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), ExitCode::kUsageOrConfig) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "accepted:\n" << text;
    return "";
  }

  static inline fs::path* dir_ = nullptr;
};

constexpr const char* kGood = R"(pipeline: p.yaml
baseline: ref
variants:
  - name: ref
  - name: f16
    set: {components.kv_cache.dtype: f16, stages.1.decode.stop: ["a, b", "\n"]}
matrix:
  backend.plugin: [reference]
  components.kv_cache.dtype: [f32, q8_0]
  backend.options.threads: [1, 2]
workload:
  speed: {prompt_tokens: [64, 128], gen_tokens: 16, depths: [0, 256], rounds: 2}
  fidelity: {text: text.txt, ctx: 64}
  greedy: {prompts: [hello, "a: b"], tokens: 8}
)";

TEST_F(ExperimentTest, AGoodFileExpandsItsMatrixAfterItsVariants) {
  const Experiment e = parse(kGood);
  EXPECT_EQ(e.pipeline, (*dir_ / "p.yaml").lexically_normal());
  EXPECT_EQ(e.baseline, "ref");
  ASSERT_EQ(e.variants.size(), 6u);
  EXPECT_EQ(e.variants[0].name, "ref");
  EXPECT_TRUE(e.variants[0].overrides.empty());
  EXPECT_EQ(e.variants[1].overrides,
            (std::vector<std::string>{"components.kv_cache.dtype=\"f16\"",
                                      "stages.1.decode.stop=[\"a, b\", \"\\n\"]"}));
  // The first key varies slowest; names hold only the keys that vary.
  EXPECT_EQ(e.variants[2].name, "dtype=f32,threads=1");
  EXPECT_EQ(e.variants[3].name, "dtype=f32,threads=2");
  EXPECT_EQ(e.variants[5].name, "dtype=q8_0,threads=2");
  EXPECT_EQ(e.variants[5].overrides, (std::vector<std::string>{"backend.plugin=\"reference\"",
                                                               "components.kv_cache.dtype=\"q8_0\"",
                                                               "backend.options.threads=\"2\""}));
  EXPECT_EQ(e.speed.prompt_tokens, (std::vector<int32_t>{64, 128}));
  EXPECT_EQ(e.speed.gen_tokens, (std::vector<int32_t>{16}));
  EXPECT_EQ(e.speed.depths, (std::vector<int32_t>{0, 256}));
  EXPECT_EQ(e.speed.rounds, 2);
  EXPECT_EQ(e.fidelity.text, (*dir_ / "text.txt").lexically_normal());
  EXPECT_EQ(e.fidelity.ctx, 64);
  EXPECT_EQ(e.greedy.prompts, (std::vector<std::string>{"hello", "a: b"}));
  EXPECT_EQ(e.greedy.tokens, 8);
}

TEST_F(ExperimentTest, SetOverridesTheExperimentItself) {
  const Experiment e = parse(kGood, {"baseline=f16", "workload.speed.rounds=5"});
  EXPECT_EQ(e.baseline, "f16");
  EXPECT_EQ(e.speed.rounds, 5);
}

TEST_F(ExperimentTest, TheShippedExamplesLoad) {
  for (const char* name : {"compare-cpu.yaml", "compare-gpu.yaml"}) {
    const Experiment e = load_experiment(fs::path(DUET_SOURCE_DIR) / "configs" / name);
    EXPECT_GE(e.variants.size(), 3u) << name;
    EXPECT_FALSE(e.fidelity.text.empty()) << name;
  }
}

// Each variant of the placement example is a pipeline of its own: stages
// on named backends where its set drops the base's one backend.
TEST_F(ExperimentTest, PlacementVariantsPlaceStagesOnNamedBackends) {
  const Experiment e =
      load_experiment(fs::path(DUET_SOURCE_DIR) / "configs/compare-placement.yaml");
  ASSERT_EQ(e.variants.size(), 4u);
  const PipelineConfig split = load_pipeline_config(e.pipeline, e.variants[2].overrides);
  ASSERT_EQ(split.backends.size(), 2u);
  EXPECT_EQ(split.stages[0].backend, "fast");
  EXPECT_EQ(split.stages[1].backend, "slow");
}

struct BadFile {
  const char* what;
  std::string text;
  std::string message;  // the whole error, or a part of it when `part`
  bool part = false;
};

const std::string kHead = "pipeline: p.yaml\nbaseline: a\n";
const std::string kVariants = "variants: [{name: a}]\n";
const std::string kWork = "workload: {speed: {gen_tokens: 8}}\n";

class BadExperiment : public ExperimentTest, public ::testing::WithParamInterface<BadFile> {};

TEST_P(BadExperiment, IsRefusedWithOneClearLine) {
  const BadFile& bad = GetParam();
  const std::string error = error_of(bad.text);
  if (bad.part) {
    EXPECT_NE(error.find(bad.message), std::string::npos) << error;
  } else {
    EXPECT_EQ(error, bad.message);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadExperiment,
    ::testing::Values(
        BadFile{"unknown_top_key", kHead + kVariants + kWork + "workloads: {}\n",
                "e.yaml:5:1: unknown key 'workloads' at the top level; did you mean 'workload'?"},
        BadFile{"missing_pipeline", "baseline: a\n" + kVariants + kWork,
                "e.yaml:1:1: the document: missing required key 'pipeline'"},
        BadFile{"pipeline_not_found", "pipeline: nope.yaml\nbaseline: a\n" + kVariants + kWork,
                "e.yaml:1:11: pipeline: no pipeline file at ", true},
        BadFile{"missing_variants", kHead + kWork,
                "e.yaml:1:1: the document: missing required key 'variants' (or 'matrix'): name the "
                "variants to "
                "compare\ne.yaml:2:11: baseline: 'a' is not a variant's name; variants: (none)"},
        BadFile{"variants_not_a_list", kHead + "variants: {name: a}\n" + kWork,
                "e.yaml:3:11: variants: expected a non-empty list of {name, set} maps, found a map",
                true},
        BadFile{"variant_without_name", kHead + "variants: [{name: a}, {set: {}}]\n" + kWork,
                "e.yaml:3:23: variants[1]: missing required key 'name'"},
        BadFile{"variant_unknown_key", kHead + "variants: [{name: a, sets: {}}]\n" + kWork,
                "e.yaml:3:22: unknown key 'sets' in variants[0]; did you mean 'set'?"},
        BadFile{"duplicate_name", kHead + "variants: [{name: a}, {name: a}]\n" + kWork,
                "e.yaml:3:23: variants: two variants are named 'a'; give each a name of its own"},
        BadFile{"bad_name", kHead + "variants: [{name: a}, {name: \"b c\"}]\n" + kWork,
                "e.yaml:3:23: variants: name 'b c' may hold only letters, digits and ._+=,- ; "
                "rename it"},
        BadFile{
            "set_not_a_map", kHead + "variants: [{name: a, set: [x]}]\n" + kWork,
            "e.yaml:3:27: variants[0].set: expected a map from pipeline key paths to values, e.g. "
            "{backend.plugin: onednn}, found a list"},
        BadFile{"set_without_value",
                kHead + "variants: [{name: a, set: {backend.plugin: }}]\n" + kWork,
                "variants[0].set.backend.plugin: needs a value", true},
        BadFile{"baseline_unknown",
                "pipeline: p.yaml\nbaseline: ref\nvariants: [{name: reff}]\n" + kWork,
                "e.yaml:2:11: baseline: 'ref' is not a variant's name; did you mean 'reff'?"},
        BadFile{"matrix_value_not_a_list",
                kHead + kVariants + "matrix: {backend.plugin: onednn}\n" + kWork,
                "e.yaml:4:26: matrix.backend.plugin: expected a non-empty list of values, found "
                "'onednn'"},
        BadFile{"matrix_too_large",
                kHead + kVariants +
                    "matrix: {a: [1,2,3,4,5,6,7,8], b: [1,2,3,4,5,6,7,8], c: [1,2]}\n" + kWork,
                "matrix.c: the matrix has more than 64 combinations; split the experiment or drop "
                "values",
                true},
        BadFile{"matrix_of_lists",
                kHead + kVariants + "matrix: {stages.1.decode.stop: [[a]]}\n" + kWork,
                "e.yaml:4:33: matrix.stages.1.decode.stop[0]: expected a single value (lists and "
                "maps go in "
                "variants), found a list"},
        BadFile{"empty_workload", kHead + kVariants + "workload: {}\n",
                "e.yaml:4:11: workload: is empty; give at least one of speed, fidelity, greedy"},
        BadFile{
            "speed_without_tests", kHead + kVariants + "workload: {speed: {rounds: 2}}\n",
            "e.yaml:4:19: workload.speed: names no test; give prompt_tokens, gen_tokens or both"},
        BadFile{"speed_size_out_of_range",
                kHead + kVariants + "workload: {speed: {prompt_tokens: [0]}}\n",
                "e.yaml:4:36: workload.speed.prompt_tokens[0]: 0 is out of range; expected an "
                "integer in 1..65536"},
        BadFile{
            "speed_empty_list", kHead + kVariants + "workload: {speed: {gen_tokens: []}}\n",
            "e.yaml:4:32: workload.speed.gen_tokens: expected an integer or a non-empty list of "
            "them, found a list"},
        BadFile{"greedy_without_decode_stage",
                kHead + "variants: [{name: a, set: {stages: [{prefill: {}}]}}]\n" +
                    "workload: {greedy: {prompts: [hi]}}\n",
                "e.yaml: variant 'a': workload.greedy needs a decode stage in the pipeline", true},
        BadFile{"rounds_not_a_number",
                kHead + kVariants + "workload: {speed: {gen_tokens: 8, rounds: many}}\n",
                "e.yaml:4:43: workload.speed.rounds: expected an integer in 1..100, found 'many'"},
        BadFile{"fidelity_without_text", kHead + kVariants + "workload: {fidelity: {ctx: 64}}\n",
                "e.yaml:4:22: workload.fidelity: missing required key 'text'"},
        BadFile{"fidelity_text_missing",
                kHead + kVariants + "workload: {fidelity: {text: nope.txt}}\n",
                "e.yaml:4:29: workload.fidelity.text: no text file at ", true},
        BadFile{"fidelity_ctx_too_small",
                kHead + kVariants + "workload: {fidelity: {text: text.txt, ctx: 2}}\n",
                "e.yaml:4:44: workload.fidelity.ctx: must be 0 (the whole text) or at least 4"},
        BadFile{"greedy_empty_prompts", kHead + kVariants + "workload: {greedy: {prompts: []}}\n",
                "e.yaml:4:30: workload.greedy.prompts: expected a non-empty list of prompts, found "
                "a list"},
        BadFile{"greedy_tokens_zero",
                kHead + kVariants + "workload: {greedy: {prompts: [hi], tokens: 0}}\n",
                "e.yaml:4:44: workload.greedy.tokens: 0 is out of range; expected an integer in "
                "1..4096"},
        BadFile{
            "variant_breaks_the_pipeline",
            kHead + "variants: [{name: a, set: {components.kv_cache.dtyp: f16}}]\n" + kWork,
            "e.yaml: variant 'a': --set components.kv_cache.dtyp=\"f16\": unknown key 'dtyp' in "
            "components.kv_cache; did you mean 'dtype'?",
            true},
        BadFile{"yaml_syntax", kHead + "variants: [{name: a}\n" + kWork, "e.yaml:", true},
        BadFile{"every_problem_at_once",
                "pipeline: p.yaml\nbaseline: zzz\nvariants: [{name: a, extra: 1}]\n"
                "workload: {speed: {gen_tokens: -1}}\n",
                "e.yaml:2:11: baseline: 'zzz' is not a variant's name; variants: 'a'\n"
                "e.yaml:3:22: unknown key 'extra' in variants[0]; expected one of 'name', 'set'\n"
                "e.yaml:4:32: workload.speed.gen_tokens: -1 is out of range; expected an integer "
                "in 1..65536"}),
    [](const auto& param_info) { return std::string(param_info.param.what); });

TEST_F(ExperimentTest, AMissingFileIsAConfigError) {
  try {
    load_experiment(*dir_ / "absent.yaml");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("absent.yaml: experiment file not found"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace duet
