// Tests of the pipeline YAML loader: the structs a valid file gives, the
// shipped default config, every class of error with its position, and --set.
#include "duet/app/pipeline_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>

#include "duet/error.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

// The message of the duet::Error(kConfig) that `fn` throws; fails otherwise.
std::string config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a duet::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

PipelineConfig parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_pipeline_config(text, "test.yaml", "/base", overrides);
}

std::string parse_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return config_error([&] { parse(text, overrides); });
}

// Smallest valid document, for tests that only look at one part.
const char* const kMinimal = "model: {path: m.gguf}\nstages: [decode]\n";

const char* const kFull = R"(model:
  path: models/m.gguf
  chat: true
  system: You are helpful.
  chat_template: "{{ messages }}"
plugins:
  paths: [plugins, /opt/duet/plugins]
backend:
  plugin: onednn
  options: {threads: 2, pin: true}
components:
  attention: {impl: flash}
  kv_cache: {impl: paged, capacity_tokens: 4096, block_tokens: 16, dtype: f16}
  sampler:
    seed: 18446744073709551615
    chain:
      - repetition_penalty: {penalty: 1.1, last_n: 64}
      - top_k: 40
      - greedy
      - temperature: {}
stages:
  - prefill: {chunk_tokens: 256}
  - decode: {max_new_tokens: 64, stop: ["<|im_end|>", "\n\n"]}
)";

TEST(PipelineConfigTest, FullConfigParsesToStructs) {
  PipelineConfig c = parse(kFull);
  EXPECT_EQ(c.source, "test.yaml");
  EXPECT_EQ(c.model.path, fs::path("/base/models/m.gguf"));
  EXPECT_TRUE(c.model.chat);
  EXPECT_EQ(c.model.system_prompt, "You are helpful.");
  EXPECT_EQ(c.model.chat_template, "{{ messages }}");
  EXPECT_EQ(c.plugins.paths, (std::vector<std::string>{"/base/plugins", "/opt/duet/plugins"}));

  EXPECT_EQ(c.backend.plugin, "onednn");
  EXPECT_EQ(c.backend.options.path(), "backend.options");
  EXPECT_EQ(c.backend.options.values(),
            (std::map<std::string, std::string>{{"pin", "true"}, {"threads", "2"}}));

  EXPECT_EQ(c.attention.impl, "flash");
  EXPECT_EQ(c.kv_cache.impl, "paged");
  EXPECT_EQ(c.kv_cache.capacity_tokens, 4096);
  EXPECT_EQ(c.kv_cache.block_tokens, 16);
  EXPECT_EQ(c.kv_cache.dtype, DType::kF16);

  EXPECT_EQ(c.sampler.seed, UINT64_MAX);
  ASSERT_EQ(c.sampler.chain.size(), 4u);
  const SamplerLink& penalty = c.sampler.chain[0];
  EXPECT_EQ(penalty.name, "repetition_penalty");
  EXPECT_EQ(penalty.options.path(), "components.sampler.chain[0].repetition_penalty");
  EXPECT_EQ(penalty.options.values(),
            (std::map<std::string, std::string>{{"last_n", "64"}, {"penalty", "1.1"}}));
  EXPECT_EQ(penalty.pos.line, 17);
  EXPECT_EQ(penalty.pos.column, 9);
  EXPECT_EQ(c.sampler.chain[1].name, "top_k");
  EXPECT_EQ(c.sampler.chain[1].options.values(),
            (std::map<std::string, std::string>{{"value", "40"}}));
  EXPECT_EQ(c.sampler.chain[2].name, "greedy");
  EXPECT_TRUE(c.sampler.chain[2].options.values().empty());
  EXPECT_EQ(c.sampler.chain[3].name, "temperature");
  EXPECT_TRUE(c.sampler.chain[3].options.values().empty());

  ASSERT_EQ(c.stages.size(), 2u);
  EXPECT_EQ(c.stages[0].name, "prefill");
  EXPECT_EQ(c.stages[0].options.path(), "stages[0].prefill");
  EXPECT_EQ(c.stages[0].options.values().at("chunk_tokens"), "256");
  EXPECT_EQ(c.stages[0].pos.line, 22);
  EXPECT_EQ(c.stages[0].pos.column, 5);
  EXPECT_EQ(c.stages[1].name, "decode");
  EXPECT_EQ(c.stages[1].options.values().at("max_new_tokens"), "64");
  EXPECT_FALSE(c.stages[1].options.has("stop"));
  EXPECT_EQ(c.stages[1].lists.at("stop"), (std::vector<std::string>{"<|im_end|>", "\n\n"}));
}

TEST(PipelineConfigTest, MinimalConfigGetsDefaults) {
  PipelineConfig c = parse(kMinimal);
  EXPECT_EQ(c.model.path, fs::path("/base/m.gguf"));
  EXPECT_FALSE(c.model.chat);
  EXPECT_EQ(c.model.system_prompt, "");
  EXPECT_EQ(c.model.chat_template, "");
  EXPECT_TRUE(c.plugins.paths.empty());
  EXPECT_EQ(c.backend.plugin, "reference");
  EXPECT_TRUE(c.backend.options.values().empty());
  EXPECT_EQ(c.attention.impl, "default");
  EXPECT_EQ(c.kv_cache.impl, "contiguous");
  EXPECT_EQ(c.kv_cache.capacity_tokens, 4096);
  EXPECT_EQ(c.kv_cache.block_tokens, 0);
  EXPECT_EQ(c.kv_cache.dtype, DType::kF32);
  EXPECT_EQ(c.sampler.seed, 0u);
  EXPECT_TRUE(c.sampler.chain.empty());
  ASSERT_EQ(c.stages.size(), 1u);
  EXPECT_EQ(c.stages[0].name, "decode");
  EXPECT_EQ(c.stages[0].pos.line, 2);
  EXPECT_EQ(c.stages[0].pos.column, 10);
}

TEST(PipelineConfigTest, AbsoluteModelPathIsKept) {
  PipelineConfig c = parse("model: {path: /m/x.gguf}\nstages: [decode]\n");
  EXPECT_EQ(c.model.path, fs::path("/m/x.gguf"));
}

TEST(PipelineConfigTest, RelativeBaseFolderGivesAbsolutePaths) {
  PipelineConfig c =
      parse_pipeline_config("model: {path: ../m.gguf}\nstages: [decode]\n", "cfg/p.yaml", "cfg");
  EXPECT_EQ(c.model.path, fs::current_path() / "m.gguf");
}

TEST(PipelineConfigTest, DefaultConfigFileLoads) {
  const fs::path file = DUET_SOURCE_DIR "/configs/smollm2-reference.yaml";
  PipelineConfig c = load_pipeline_config(file);
  EXPECT_EQ(c.source, file);
  EXPECT_EQ(c.model.path,
            fs::path(DUET_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf").lexically_normal());
  EXPECT_TRUE(c.model.chat);
  EXPECT_EQ(c.backend.plugin, "reference");
  EXPECT_EQ(c.attention.impl, "default");
  EXPECT_EQ(c.kv_cache.impl, "contiguous");
  EXPECT_EQ(c.kv_cache.capacity_tokens, 2048);
  EXPECT_EQ(c.kv_cache.dtype, DType::kF32);
  EXPECT_EQ(c.sampler.seed, 42u);
  ASSERT_EQ(c.sampler.chain.size(), 1u);
  EXPECT_EQ(c.sampler.chain[0].name, "greedy");
  ASSERT_EQ(c.stages.size(), 2u);
  EXPECT_EQ(c.stages[0].name, "prefill");
  EXPECT_EQ(c.stages[0].options.values().at("chunk_tokens"), "512");
  EXPECT_EQ(c.stages[1].name, "decode");
  EXPECT_EQ(c.stages[1].options.values().at("max_new_tokens"), "128");
  EXPECT_EQ(c.stages[1].lists.at("stop"), std::vector<std::string>{"<|im_end|>"});
}

TEST(PipelineConfigTest, TheDefaultPipelineChoosesAmongEveryBackend) {
  PipelineConfig c = load_pipeline_config(DUET_SOURCE_DIR "/configs/smollm2.yaml");
  EXPECT_EQ(c.backend.plugin, "");
  std::vector<std::string> names;
  for (const BackendCandidate& b : c.backend.choice) names.push_back(b.plugin);
  EXPECT_EQ(names, (std::vector<std::string>{"cuda", "onednn", "reference"}));
  EXPECT_EQ(c.kv_cache.dtype, DType::kF16);  // one all three backends store
}

TEST(PipelineConfigTest, ABackendChoiceHasOptionsPerBackend) {
  PipelineConfig c = parse(std::string(kMinimal) +
                           "backend:\n"
                           "  plugin: [onednn, reference]\n"
                           "  options: {onednn: {threads: 4}}\n");
  ASSERT_EQ(c.backend.choice.size(), 2u);
  EXPECT_EQ(c.backend.choice[0].plugin, "onednn");
  EXPECT_EQ(c.backend.choice[0].options.values(),
            (std::map<std::string, std::string>{{"threads", "4"}}));
  EXPECT_EQ(c.backend.choice[0].options.path(), "backend.options.onednn");
  EXPECT_TRUE(c.backend.choice[1].options.values().empty());

  PipelineConfig again = parse_pipeline_config(describe(c), "test.yaml", "");
  ASSERT_EQ(again.backend.choice.size(), 2u);
  EXPECT_EQ(again.backend.choice[1].plugin, "reference");
  EXPECT_EQ(again.backend.choice[0].options.values(), c.backend.choice[0].options.values());

  // --set pins one backend of the list.
  PipelineConfig pinned = parse(std::string(kMinimal) + "backend: {plugin: [onednn, reference]}\n",
                                {"backend.plugin=reference"});
  EXPECT_TRUE(pinned.backend.choice.empty());
  EXPECT_EQ(pinned.backend.plugin, "reference");
}

TEST(PipelineConfigTest, ABackendChoiceIsCheckedItemByItem) {
  EXPECT_EQ(parse_error(std::string(kMinimal) + "backend: {plugin: []}\n"),
            "test.yaml:3:19: backend.plugin: expected a backend's name or a non-empty list of "
            "them, found a "
            "list");
  EXPECT_EQ(parse_error(std::string(kMinimal) + "backend: {plugin: [onednn, onednn]}\n"),
            "test.yaml:3:28: backend.plugin[1]: 'onednn' is listed twice; list each backend once");
  EXPECT_EQ(parse_error(std::string(kMinimal) +
                        "backend: {plugin: [onednn, reference], options: {threads: 2}}\n"),
            "test.yaml:3:50: backend.options.threads: backend.plugin is a list, so backend.options "
            "holds one "
            "map of options per listed backend, and 'threads' is not listed; listed: 'onednn', "
            "'reference'");
  EXPECT_EQ(parse_error(std::string(kMinimal) +
                        "backend: {plugin: [onednn, reference], options: {onedn: {}}}\n"),
            "test.yaml:3:50: backend.options.onedn: backend.plugin is a list, so backend.options "
            "holds one "
            "map of options per listed backend, and 'onedn' is not listed; did you mean 'onednn'?");
  EXPECT_EQ(
      parse_error(
          std::string(kMinimal) + "backend: {plugin: [onednn], options: {onednn: {threads: 2}}}\n",
          {"backend.plugin=onednn"}),
      "test.yaml:3:47: backend.options.onednn: options per backend need backend.plugin to be a "
      "list; to run on 'onednn' alone and keep its options, write backend.plugin: [onednn] "
      "(--set 'backend.plugin=[onednn]')");
  EXPECT_EQ(
      parse_error(std::string(kMinimal) + "backend: {plugin: [onednn], options: {onednn: 2}}\n"),
      "test.yaml:3:47: backend.options.onednn: expected a map of options, found '2'");
}

TEST(PipelineConfigTest, DescribeWritesEveryKeyAndParsesBack) {
  PipelineConfig c = parse(kFull);
  const std::string text = describe(c);
  EXPECT_NE(text.find("# pipeline from test.yaml"), std::string::npos) << text;
  EXPECT_NE(text.find("capacity_tokens: 4096"), std::string::npos) << text;
  EXPECT_NE(text.find("dtype: f16"), std::string::npos) << text;
  // Paths are already resolved, so an empty base folder keeps them.
  PipelineConfig again = parse_pipeline_config(text, "test.yaml", "");
  EXPECT_EQ(describe(again), text);
  EXPECT_EQ(again.stages[1].lists.at("stop"), c.stages[1].lists.at("stop"));
  EXPECT_EQ(again.sampler.seed, c.sampler.seed);
}

TEST(PipelineConfigTest, DescribeOfDefaultsParsesBack) {
  PipelineConfig c = parse(kMinimal);
  const std::string text = describe(c);
  EXPECT_NE(text.find("chain: []"), std::string::npos) << text;
  EXPECT_EQ(describe(parse_pipeline_config(text, "test.yaml", "")), text);
}

TEST(PipelineConfigTest, DescribeQuotesWhatYamlWouldReadDifferently) {
  PipelineConfig c = parse(
      "model:\n"
      "  path: \"dir with spaces/m: x.gguf\"\n"
      "  system: \"one\\ntwo: 'q' \\\"dq\\\"  \"\n"
      "backend: {options: {a: \"~\", b: \"null\", c: \"\", d: \"[x]\", e: \"#x\", f: \" lead\"}}\n"
      "stages:\n"
      "  - decode: {stop: [\"a, b\", \"]\", \"\\n\\n\", \"\", \"*a\", \"}\"]}\n");
  EXPECT_EQ(c.model.system_prompt, "one\ntwo: 'q' \"dq\"  ");
  PipelineConfig again = parse_pipeline_config(describe(c), "test.yaml", "");
  EXPECT_EQ(again.model.path, c.model.path);
  EXPECT_EQ(again.model.system_prompt, c.model.system_prompt);
  EXPECT_EQ(again.backend.options.values(), c.backend.options.values());
  EXPECT_EQ(again.stages[0].lists, c.stages[0].lists);
}

// Found by pipeline_yaml_fuzz: yaml-cpp wrote "…reference\r" plain, which
// read back without its \r.
TEST(PipelineConfigTest, DescribeKeepsControlCharactersInEveryString) {
  PipelineConfig c = parse(
      "model:\n"
      "  path: \"m.gguf\\r\"\n"
      "  system: \"tab\\there\\r\"\n"
      "backend: {plugin: \"ref\\x7f\", options: {\"k\\r\": \"v\\x01\"}}\n"
      "components: {attention: {impl: \"a\\r\"}, kv_cache: {impl: \"b\\x1f\"}}\n"
      "stages:\n"
      "  - \"decode\\r\": {stop: [\"x\\r\"]}\n");
  ASSERT_EQ(c.model.path.filename().string(), "m.gguf\r");
  const std::string text = describe(c);
  PipelineConfig again = parse_pipeline_config(text, "test.yaml", "");
  EXPECT_EQ(again.model.path, c.model.path);
  EXPECT_EQ(again.model.system_prompt, "tab\there\r");
  EXPECT_EQ(again.backend.plugin, "ref\x7f");
  EXPECT_EQ(again.backend.options.values(), c.backend.options.values());
  EXPECT_EQ(again.attention.impl, "a\r");
  EXPECT_EQ(again.kv_cache.impl, "b\x1f");
  EXPECT_EQ(again.stages[0].name, "decode\r");
  EXPECT_EQ(again.stages[0].lists, c.stages[0].lists);
  EXPECT_EQ(describe(again), text);
}

// Found by pipeline_yaml_fuzz: a stage name of over 1,000 characters became
// an implicit key longer than YAML allows, and describe()'s text did not
// parse.
TEST(PipelineConfigTest, DescribeWritesLongKeysExplicitly) {
  const std::string name(1500, 'n');
  const std::string key(300, 'k');
  PipelineConfig c =
      parse("model: {path: m.gguf}\nstages:\n  - ? " + name + "\n    : {" + key + ": v}\n");
  const std::string text = describe(c);
  PipelineConfig again = parse_pipeline_config(text, "test.yaml", "");
  ASSERT_EQ(again.stages.size(), 1u);
  EXPECT_EQ(again.stages[0].name, name);
  EXPECT_EQ(again.stages[0].options.values(), c.stages[0].options.values());
  EXPECT_EQ(describe(again), text);
}

// Found by pipeline_yaml_fuzz: yaml-cpp writes a key of over 1,024
// characters explicitly by itself, and when told to as well, it went on
// writing every later key explicitly — in flow maps too, as "{ ?k: v}",
// which it cannot read back.
TEST(PipelineConfigTest, KeysAfterAVeryLongKeyStayImplicit) {
  for (size_t length : {201u, 1024u, 1025u, 3459u}) {
    const std::string name(length, 'n');
    PipelineConfig c =
        parse("model: {path: m.gguf}\ncomponents:\n  sampler:\n    chain:\n      - ? " + name +
              "\n        : {}\nstages:\n  - prefill: {chunk_tokens: 512}\n  - decode\n");
    const std::string text = describe(c);
    EXPECT_NE(text.find("prefill: {chunk_tokens: 512}"), std::string::npos) << length << ":\n"
                                                                            << text;
    PipelineConfig again = parse_pipeline_config(text, "test.yaml", "");
    ASSERT_EQ(again.sampler.chain.size(), 1u);
    EXPECT_EQ(again.sampler.chain[0].name, name);
    EXPECT_EQ(describe(again), text) << length;
  }
}

// Found by pipeline_yaml_fuzz: yaml-cpp keeps some invalid UTF-8 bytes and
// replaces others, so the same text could mean two things (and describe()
// did not round-trip). Such text is refused where the first bad byte is.
TEST(PipelineConfigTest, BatchingHasDefaultsAndBounds) {
  PipelineConfig c = parse(kMinimal);
  EXPECT_EQ(c.batching.max_sequences, 16);
  EXPECT_EQ(c.batching.max_step_tokens, 512);
  EXPECT_TRUE(c.batching.prefix_caching);
  EXPECT_EQ(c.batching.draft_rows, 9);
  c = parse(std::string(kMinimal) +
            "batching: {max_sequences: 64, max_step_tokens: 256, prefix_caching: false, "
            "draft_rows: 0}\n");
  EXPECT_EQ(c.batching.max_sequences, 64);
  EXPECT_EQ(c.batching.max_step_tokens, 256);
  EXPECT_FALSE(c.batching.prefix_caching);
  EXPECT_EQ(c.batching.draft_rows, 0);
  EXPECT_NE(describe(c).find("max_sequences: 64"), std::string::npos);
  EXPECT_EQ(describe(parse_pipeline_config(describe(c), "test.yaml", "")), describe(c));
  EXPECT_EQ(
      parse_error(std::string(kMinimal) + "batching: {max_sequences: 0}\n"),
      "test.yaml:3:27: batching.max_sequences: 0 is out of range; expected an integer in 1..1024");
  EXPECT_EQ(
      parse_error(std::string(kMinimal) + "batching: {draft_rows: -1}\n"),
      "test.yaml:3:24: batching.draft_rows: -1 is out of range; expected an integer in 0..65536");
  EXPECT_NE(parse_error(std::string(kMinimal) + "batching: {max_sequence: 4}\n")
                .find("did you mean 'max_sequences'"),
            std::string::npos);
}

TEST(PipelineConfigTest, InvalidUtf8IsRefusedWithItsPosition) {
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages:\n  - dec\xffode\n"),
            "test.yaml:3:8: not valid UTF-8 (byte 0xFF); save the file as UTF-8");
  EXPECT_EQ(parse_error("model: {path: \"\xc0\xafx\"}\nstages: [decode]\n"),  // overlong '/'
            "test.yaml:1:16: not valid UTF-8 (byte 0xC0); save the file as UTF-8");
  EXPECT_EQ(parse_error("model: {path: \"\xed\xa0\x80\"}\nstages: [decode]\n"),  // a surrogate
            "test.yaml:1:16: not valid UTF-8 (byte 0xED); save the file as UTF-8");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages: [decode]\n\xe2\x82"),  // cut short
            "test.yaml:3:1: not valid UTF-8 (byte 0xE2); save the file as UTF-8");
  EXPECT_NE(parse_error(kMinimal, {"model.system=\xf5"}).find("not valid UTF-8 (byte 0xF5)"),
            std::string::npos);
  // Raw control characters (YAML allows tab and line breaks only); escapes
  // in double quotes stay allowed.
  EXPECT_EQ(parse_error(std::string("model: {path: \"a\0b\"}\nstages: [decode]\n", 37)),
            "test.yaml:1:17: control character 0x00 is not allowed in YAML text; remove it, or "
            "write it as an escape in a double-quoted string");
  EXPECT_NE(parse_error("model: {path: m\x1b}\nstages: [decode]\n").find("control character 0x1B"),
            std::string::npos);
  EXPECT_EQ(
      parse("model: {path: \"a\\x01b\\tc\"}\nstages: [decode]\n").model.path.filename().string(),
      "a\x01"
      "b\tc");
  // A --set key path becomes a key of the document: checked too.
  EXPECT_NE(parse_error(kMinimal, {"backend.options.k\x99=1"}).find("not valid UTF-8 (byte 0x99)"),
            std::string::npos);
  // Well-formed multi-byte text of every length is accepted.
  PipelineConfig c = parse("model: {path: m.gguf, system: \"é € 𝄞\"}\nstages: [decode]\n");
  EXPECT_EQ(c.model.system_prompt, "é € 𝄞");
}

TEST(PipelineConfigTest, UnknownKeyNamesPositionAndSuggestion) {
  EXPECT_EQ(parse_error("model:\n"
                        "  path: m.gguf\n"
                        "components:\n"
                        "  kv_cache:\n"
                        "    capcity_tokens: 100\n"
                        "stages: [decode]\n"),
            "test.yaml:5:5: unknown key 'capcity_tokens' in components.kv_cache; "
            "did you mean 'capacity_tokens'?");
}

TEST(PipelineConfigTest, UnknownKeyWithoutSuggestionListsKnownKeys) {
  EXPECT_EQ(parse_error(std::string(kMinimal) + "extras: 1\n"),
            "test.yaml:3:1: unknown key 'extras' at the top level; expected one of 'model', "
            "'plugins', 'backend', 'backends', 'components', 'stages', 'batching', 'debug'");
}

TEST(PipelineConfigTest, WrongTypeNamesPathExpectationAndValue) {
  EXPECT_EQ(parse_error("model:\n"
                        "  path: m.gguf\n"
                        "components:\n"
                        "  kv_cache:\n"
                        "    capacity_tokens: lots\n"
                        "stages: [decode]\n"),
            "test.yaml:5:22: components.kv_cache.capacity_tokens: expected an integer in "
            "1..16777216, found 'lots'");
  EXPECT_EQ(parse_error("model: {path: m.gguf, chat: yes}\nstages: [decode]\n"),
            "test.yaml:1:29: model.chat: expected true or false, found 'yes'");
  EXPECT_EQ(parse_error("model: [m.gguf]\nstages: [decode]\n"),
            "test.yaml:1:8: model: expected a map with the keys 'path', 'chat', 'system', "
            "'chat_template', found a list");
  EXPECT_EQ(parse_error("model: {path: m.gguf, system: [a]}\nstages: [decode]\n"),
            "test.yaml:1:31: model.system: expected a string, found a list");
  EXPECT_EQ(parse_error(std::string(kMinimal) + "plugins: {paths: build}\n"),
            "test.yaml:3:18: plugins.paths: expected a list of folders, found 'build'");
  EXPECT_EQ(parse_error(std::string(kMinimal) + "backend: {options: {threads: [1, 2]}}\n"),
            "test.yaml:3:30: backend.options.threads: expected a single value, found a list");
}

TEST(PipelineConfigTest, MissingRequiredKeys) {
  EXPECT_EQ(parse_error("model:\n  chat: true\nstages: [decode]\n"),
            "test.yaml:2:3: model: missing required key 'path'");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\n"),
            "test.yaml:1:1: the document: missing required key 'stages'");
  EXPECT_EQ(parse_error("stages: [decode]\n"),
            "test.yaml:1:1: the document: missing required key 'model'");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages: []\n"),
            "test.yaml:2:9: stages: expected a list of at least one stage such as "
            "'- decode: {}', found a list");
  EXPECT_EQ(parse_error("model: {path: ''}\nstages: [decode]\n"),
            "test.yaml:1:15: model.path: expected the path of a GGUF file, found ''");
}

TEST(PipelineConfigTest, EmptyDocumentIsNotAPipeline) {
  EXPECT_EQ(parse_error(""),
            "test.yaml:1:1: the document: expected a map with the keys 'model', 'plugins', "
            "'backend', 'backends', 'components', 'stages', 'batching', 'debug', found nothing");
  EXPECT_EQ(parse_error("# only a comment\n"), parse_error(""));
}

TEST(PipelineConfigTest, OutOfRangeValues) {
  EXPECT_EQ(parse_error(std::string(kMinimal) + "components: {kv_cache: {capacity_tokens: 0}}\n"),
            "test.yaml:3:42: components.kv_cache.capacity_tokens: 0 is out of range; expected "
            "an integer in 1..16777216");
  EXPECT_EQ(
      parse_error(std::string(kMinimal) + "components: {kv_cache: {capacity_tokens: 16777217}}\n"),
      "test.yaml:3:42: components.kv_cache.capacity_tokens: 16777217 is out of range; expected "
      "an integer in 1..16777216");
  EXPECT_EQ(parse_error(std::string(kMinimal) + "components: {kv_cache: {block_tokens: -1}}\n"),
            "test.yaml:3:39: components.kv_cache.block_tokens: -1 is out of range; expected an "
            "integer in 0..16777216");
  EXPECT_EQ(parse_error(std::string(kMinimal) + "components: {sampler: {seed: -1}}\n"),
            "test.yaml:3:30: components.sampler.seed: expected an integer in "
            "0..18446744073709551615, found '-1'");
}

TEST(PipelineConfigTest, BlockTokensMustDivideCapacity) {
  EXPECT_EQ(parse_error(std::string(kMinimal) +
                        "components: {kv_cache: {capacity_tokens: 100, block_tokens: 16}}\n"),
            "test.yaml:3:61: components.kv_cache.block_tokens: 16 does not divide "
            "capacity_tokens (100); use a divisor of it, or 0 for one block of the whole "
            "capacity");
  EXPECT_EQ(parse(std::string(kMinimal) +
                  "components: {kv_cache: {capacity_tokens: 128, block_tokens: 16}}\n")
                .kv_cache.block_tokens,
            16);
}

TEST(PipelineConfigTest, BadDTypeListsAcceptedNames) {
  EXPECT_EQ(parse_error(std::string(kMinimal) + "components: {kv_cache: {dtype: q4_0}}\n"),
            "test.yaml:3:32: components.kv_cache.dtype: expected one of 'f32', 'f16', 'bf16', "
            "'q8_0', found 'q4_0'; did you mean 'q8_0'?");
  EXPECT_EQ(parse_error(std::string(kMinimal) + "components: {kv_cache: {dtype: fp16}}\n"),
            "test.yaml:3:32: components.kv_cache.dtype: expected one of 'f32', 'f16', 'bf16', "
            "'q8_0', found 'fp16'; did you mean 'f16'?");
  for (const char* name : {"f32", "f16", "bf16", "q8_0"}) {
    PipelineConfig c =
        parse(std::string(kMinimal) + "components: {kv_cache: {dtype: " + name + "}}\n");
    EXPECT_EQ(dtype_name(c.kv_cache.dtype), name);
  }
}

TEST(PipelineConfigTest, BadChainItems) {
  const std::string head = std::string(kMinimal) + "components:\n  sampler:\n    chain:\n";
  EXPECT_EQ(parse_error(head + "      - top_k: 40\n        top_p: 0.9\n"),
            "test.yaml:6:9: components.sampler.chain[0]: one sampler per list item, found 2 "
            "keys 'top_k', 'top_p'; start each with its own '-'");
  EXPECT_EQ(parse_error(head + "      - [top_k]\n"),
            "test.yaml:6:9: components.sampler.chain[0]: expected a sampler such as "
            "'- top_k: 40', found a list");
  EXPECT_EQ(parse_error(head + "      - {}\n"),
            "test.yaml:6:9: components.sampler.chain[0]: expected a sampler such as "
            "'- top_k: 40', found a map");
  EXPECT_EQ(parse_error(head + "      - top_p: [0.9]\n"),
            "test.yaml:6:16: components.sampler.chain[0].top_p: expected a single value or a "
            "map of options, found a list");
  EXPECT_EQ(parse_error(head + "      - top_p: {p: {x: 1}}\n"),
            "test.yaml:6:20: components.sampler.chain[0].top_p.p: expected a single value, "
            "found a map");
  EXPECT_EQ(parse_error(std::string(kMinimal) + "components: {sampler: {chain: greedy}}\n"),
            "test.yaml:3:31: components.sampler.chain: expected a list of samplers such as "
            "[top_k: 40, greedy], found 'greedy'");
}

TEST(PipelineConfigTest, StageOrderAndDuplicates) {
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages:\n  - decode\n  - prefill\n"),
            "test.yaml:4:5: stages[1]: 'prefill' must come before 'decode' (stages[0])");
  EXPECT_EQ(
      parse_error("model: {path: m.gguf}\nstages:\n  - prefill\n  - decode\n  - decode: {}\n"),
      "test.yaml:5:5: stages[2]: duplicate stage 'decode' (also stages[1]); each stage "
      "runs once");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages:\n  - prefill: {}\n  - prefill: {}\n"),
            "test.yaml:4:5: stages[1]: duplicate stage 'prefill' (also stages[0]); each stage "
            "runs once");
}

TEST(PipelineConfigTest, BadStageOptions) {
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages:\n  - prefill: 512\n"),
            "test.yaml:3:14: stages[0].prefill: expected a map of options such as "
            "{max_new_tokens: 128}, found '512'");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages:\n  - decode: {stop: [[a]]}\n"),
            "test.yaml:3:21: stages[0].decode.stop[0]: expected a single value, found a list");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages:\n  - decode: {limits: {a: 1}}\n"),
            "test.yaml:3:22: stages[0].decode.limits: expected a single value or a list of "
            "them, found a map");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages:\n  - decode: {}\n    prefill: {}\n"),
            "test.yaml:3:5: stages[0]: one stage per list item, found 2 keys 'decode', "
            "'prefill'; start each with its own '-'");
}

TEST(PipelineConfigTest, YamlSyntaxErrorHasPosition) {
  EXPECT_EQ(parse_error("model:\n  path: [m.gguf\nstages: [decode]\n"),
            "test.yaml:3:7: YAML syntax error: end of sequence flow not found");
  EXPECT_EQ(parse_error("model:\n\tpath: m.gguf\n"),
            "test.yaml:2:6: YAML syntax error: illegal map value; indent with spaces, not tabs");
}

TEST(PipelineConfigTest, RefusesYamlFeaturesPipelinesDoNotUse) {
  EXPECT_EQ(parse_error("model: &m {path: m.gguf}\nbackend: *m\nstages: [decode]\n"),
            "test.yaml:2:10: aliases ('*name') are not supported; write the value out");
  EXPECT_EQ(parse_error("model: !!map {path: m.gguf}\nstages: [decode]\n"),
            "test.yaml:1:8: YAML tags ('tag:yaml.org,2002:map') are not supported");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\nstages: [decode]\nmodel: {path: n.gguf}\n"),
            "test.yaml:3:1: duplicate key 'model' (first at line 1)");
  EXPECT_EQ(parse_error("model: {path: m.gguf}\n[a]: 1\n"),
            "test.yaml:2:1: a map key must be a plain name, found a list");
  EXPECT_EQ(parse_error(std::string(kMinimal) + "---\nmodel: {path: m.gguf}\n"),
            "test.yaml:3:1: a second YAML document ('---'); a pipeline holds exactly one");
  // A --set value that is a flow list and then more text (a regex) says how
  // to quote it, and quoted it is a string.
  EXPECT_EQ(parse_error(kMinimal, {"model.chat_template=[0-9]\\."}),
            "--set model.chat_template=[0-9]\\.: the value is one YAML value "
            "followed by more text; to set it as text, quote it: --set 'KEY=\"VALUE\"' (inside "
            "the quotes, \\\\ for a backslash)");
  EXPECT_EQ(parse(kMinimal, {"model.chat_template=\"[0-9]\\\\.\""}).model.chat_template,
            "[0-9]\\.");
}

TEST(PipelineConfigTest, RefusesDeepNestingQuickly) {
  // 200,000 nested flow maps: refused at depth 32 rather than recursed into.
  std::string deep = "a: ";
  for (int i = 0; i < 200000; ++i) deep += "{a: ";
  deep += std::string(200000, '}');
  ASSERT_LE(deep.size(), kMaxPipelineFileBytes);
  EXPECT_NE(parse_error(deep).find("nested deeper than 32 levels"), std::string::npos);
  EXPECT_EQ(config_error([&] { parse(std::string(100000, '[')); }).rfind("test.yaml:", 0), 0u);
}

TEST(PipelineConfigTest, NoYamlCppExceptionEscapes) {
  for (const char* text : {"\"unterminated", "a: b: c", "{", "]", "- a\nb: c", "? [a]\n: b",
                           "%YAML 9.9\n---\na: 1", "a: *", "&a", "\xff\xfe\x00"}) {
    try {
      parse(text);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig) << text;
      EXPECT_EQ(std::string(e.what()).rfind("test.yaml", 0), 0u) << e.what();
    }
  }
}

TEST(PipelineConfigTest, MultipleProblemsReportedTogetherInOrder) {
  const std::string message = parse_error(
      "model:\n"
      "  chat: maybe\n"
      "  pth: m.gguf\n"
      "components:\n"
      "  kv_cache: {dtype: q4_0}\n"
      "stages:\n"
      "  - decode\n"
      "  - prefill\n");
  EXPECT_EQ(message,
            "test.yaml:2:3: model: missing required key 'path'\n"
            "test.yaml:2:9: model.chat: expected true or false, found 'maybe'\n"
            "test.yaml:3:3: unknown key 'pth' in model; did you mean 'path'?\n"
            "test.yaml:5:21: components.kv_cache.dtype: expected one of 'f32', 'f16', 'bf16', "
            "'q8_0', found 'q4_0'; did you mean 'q8_0'?\n"
            "test.yaml:8:5: stages[1]: 'prefill' must come before 'decode' (stages[0])");
}

TEST(PipelineConfigTest, EachProblemIsOneLine) {
  EXPECT_EQ(parse_error(std::string(kMinimal) + "\"x\\ny\": 1\n", {"model.chat=\"a\\nb\""}),
            "test.yaml:3:1: unknown key 'x y' at the top level; expected one of 'model', "
            "'plugins', 'backend', 'backends', 'components', 'stages', 'batching', 'debug'\n"
            "--set model.chat=\"a\\nb\": model.chat: expected true or false, found 'a b'");
}

class PipelineFileTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, const std::string& text) {
    fs::path file = fs::path(::testing::TempDir()) / name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }
};

TEST_F(PipelineFileTest, ModelPathIsRelativeToTheFile) {
  fs::create_directories(fs::path(::testing::TempDir()) / "duet_cfg");
  fs::path file = write("duet_cfg/p.yaml", "model: {path: ../m.gguf}\nstages: [decode]\n");
  PipelineConfig c = load_pipeline_config(file);
  EXPECT_EQ(c.source, file);
  EXPECT_EQ(c.model.path, (fs::path(::testing::TempDir()) / "m.gguf").lexically_normal());
}

TEST_F(PipelineFileTest, ErrorsNameTheFile) {
  fs::path file = write("duet_bad.yaml", "model: {path: m.gguf, chat: 1}\nstages: [decode]\n");
  EXPECT_EQ(config_error([&] { load_pipeline_config(file); }),
            file.string() + ":1:29: model.chat: expected true or false, found '1'");
}

TEST_F(PipelineFileTest, MissingFile) {
  EXPECT_EQ(config_error([] { load_pipeline_config("/nonexistent/duet.yaml"); }),
            "/nonexistent/duet.yaml: pipeline file not found");
  EXPECT_EQ(config_error([] { load_pipeline_config(::testing::TempDir()); }),
            ::testing::TempDir() + ": not a regular file");
}

TEST_F(PipelineFileTest, FileTooLarge) {
  std::string big = std::string(kMinimal) + "# " + std::string(kMaxPipelineFileBytes, 'x') + "\n";
  fs::path file = write("duet_big.yaml", big);
  EXPECT_EQ(config_error([&] { load_pipeline_config(file); }),
            file.string() + ": " + std::to_string(big.size()) +
                " bytes is more than a pipeline file may hold (1 MiB, 1048576 bytes)");
  EXPECT_NE(parse_error(big).find("is more than a pipeline file may hold"), std::string::npos);
}

TEST(PipelineOverrideTest, SetsScalarsListsAndMaps) {
  PipelineConfig c =
      parse(kFull, {"stages.1.decode.max_new_tokens=8", "components.sampler.chain.1.top_k=10",
                    "components.kv_cache.dtype=q8_0", "model.chat=false",
                    "model.system=", "backend.options={threads: 4}", "stages.1.decode.stop=[a, b]",
                    "components.sampler.chain.3.temperature.t=0.5"});
  EXPECT_EQ(c.stages[1].options.values().at("max_new_tokens"), "8");
  EXPECT_EQ(c.sampler.chain[1].options.values().at("value"), "10");
  EXPECT_EQ(c.kv_cache.dtype, DType::kQ8_0);
  EXPECT_FALSE(c.model.chat);
  EXPECT_EQ(c.model.system_prompt, "");
  EXPECT_EQ(c.backend.options.values(), (std::map<std::string, std::string>{{"threads", "4"}}));
  EXPECT_EQ(c.stages[1].lists.at("stop"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.sampler.chain[3].options.values().at("t"), "0.5");
  // Overridden values have no file position; the stage itself keeps its own.
  EXPECT_EQ(c.stages[1].pos.line, 23);
}

TEST(PipelineOverrideTest, CreatesMissingMapsAndLaterOverridesWin) {
  PipelineConfig c = parse(kMinimal, {"components.kv_cache.capacity_tokens=64",
                                      "components.kv_cache.capacity_tokens=128",
                                      "components.sampler.chain=[{top_k: 40}, greedy]"});
  EXPECT_EQ(c.kv_cache.capacity_tokens, 128);
  ASSERT_EQ(c.sampler.chain.size(), 2u);
  EXPECT_EQ(c.sampler.chain[0].name, "top_k");
  EXPECT_EQ(c.sampler.chain[0].pos.line, 0);
  EXPECT_EQ(format_source_pos(c.source, c.sampler.chain[0].pos), "test.yaml (--set)");
  EXPECT_EQ(format_source_pos(c.source, c.stages[0].pos), "test.yaml:2:10");
}

TEST(PipelineOverrideTest, PathsFromSetAreRelativeToWorkingDirectory) {
  PipelineConfig c = parse(kMinimal, {"model.path=models/./x.gguf", "plugins.paths=[p, /abs/q]"});
  EXPECT_EQ(c.model.path, fs::current_path() / "models/x.gguf");
  EXPECT_EQ(c.plugins.paths,
            (std::vector<std::string>{(fs::current_path() / "p").string(), "/abs/q"}));
}

TEST(PipelineOverrideTest, MalformedOverrides) {
  EXPECT_EQ(parse_error(kMinimal, {"model.chat"}),
            "--set model.chat: expected KEY.PATH=VALUE, e.g. "
            "components.kv_cache.capacity_tokens=1024");
  EXPECT_EQ(parse_error(kMinimal, {"model..chat=true"}),
            "--set model..chat=true: the key path 'model..chat' has an empty part");
  EXPECT_EQ(parse_error(kMinimal, {"=1"}), "--set =1: the key path '' has an empty part");
  EXPECT_EQ(parse_error(kMinimal, {"model.system=[a"}),
            "--set model.system=[a: YAML syntax error: end of sequence flow not found");
}

TEST(PipelineOverrideTest, BadPaths) {
  EXPECT_EQ(parse_error(kMinimal, {"stages.1.decode.max_new_tokens=64"}),
            "--set stages.1.decode.max_new_tokens=64: index 1 is out of range for 'stages'; "
            "it has items 0..0");
  EXPECT_EQ(parse_error(kMinimal, {"stages.decode.max_new_tokens=64"}),
            "--set stages.decode.max_new_tokens=64: 'stages' is a list, so 'decode' must be an "
            "item number; it has items 0..0");
  EXPECT_EQ(parse_error(kMinimal, {"model.path.dir=x"}),
            "--set model.path.dir=x: 'model.path' is the value 'm.gguf', not a map, so it has "
            "no key 'dir'");
}

TEST(PipelineOverrideTest, OverriddenValuesAreValidatedWithTheirOrigin) {
  EXPECT_EQ(parse_error(kMinimal, {"components.kv_cache.capacity_tokens=lots"}),
            "--set components.kv_cache.capacity_tokens=lots: components.kv_cache.capacity_tokens: "
            "expected an integer in 1..16777216, found 'lots'");
  EXPECT_EQ(parse_error(kMinimal, {"components.kv_cache.capcity_tokens=1"}),
            "--set components.kv_cache.capcity_tokens=1: unknown key 'capcity_tokens' in "
            "components.kv_cache; did you mean 'capacity_tokens'?");
}

TEST(PipelineOverrideTest, FileAndOverrideProblemsReportedTogether) {
  EXPECT_EQ(parse_error("model: {path: m.gguf, chat: 2}\nstages: [decode]\n",
                        {"stages.3.decode.x=1", "model.system=[a]"}),
            "test.yaml:1:29: model.chat: expected true or false, found '2'\n"
            "--set stages.3.decode.x=1: index 3 is out of range for 'stages'; it has items 0..0\n"
            "--set model.system=[a]: model.system: expected a string, found a list");
}

}  // namespace
}  // namespace duet

namespace duet {
namespace {

const char* const kSplit = R"(model: {path: m.gguf}
backends:
  fast: {plugin: onednn, options: {threads: 2}, kv_cache: {dtype: f16}}
  slow: {plugin: reference}
stages:
  - prefill: {backend: fast, chunk_tokens: 64}
  - decode: {backend: slow, max_new_tokens: 8}
)";

TEST(PipelineConfigTest, NamedBackendsPlaceEachStage) {
  const PipelineConfig c = parse(kSplit);
  ASSERT_EQ(c.backends.size(), 2u);
  EXPECT_EQ(c.backends[0].name, "fast");
  EXPECT_EQ(c.backends[0].plugin, "onednn");
  EXPECT_EQ(c.backends[0].options.values().at("threads"), "2");
  EXPECT_EQ(c.backends[0].kv_dtype, DType::kF16);
  EXPECT_FALSE(c.backends[1].kv_dtype.has_value());
  EXPECT_EQ(c.stages[0].backend, "fast");
  EXPECT_EQ(c.stages[1].backend, "slow");
  // `backend` is core's key, not the stage's option.
  EXPECT_FALSE(c.stages[0].options.has("backend"));
  EXPECT_EQ(c.stages[0].options.values().at("chunk_tokens"), "64");
}

TEST(PipelineConfigTest, OneNamedBackendRunsEveryStageUnnamed) {
  const PipelineConfig c = parse(
      "model: {path: m.gguf}\nbackends: {only: {plugin: reference}}\nstages: [prefill, "
      "decode]\n");
  EXPECT_EQ(c.stages[0].backend, "only");
  EXPECT_EQ(c.stages[1].backend, "only");
}

TEST(PipelineConfigTest, DescribeWritesNamedBackendsBack) {
  const PipelineConfig c = parse(kSplit);
  const PipelineConfig again = parse(describe(c));
  ASSERT_EQ(again.backends.size(), 2u);
  EXPECT_EQ(again.backends[0].kv_dtype, DType::kF16);
  EXPECT_EQ(again.stages[0].backend, "fast");
  EXPECT_EQ(again.stages[1].backend, "slow");
  EXPECT_EQ(describe(again), describe(c));
}

// A variant of an experiment, or --set, drops a base's one backend with ~.
TEST(PipelineConfigTest, ANullBackendGivesWayToNamedBackends) {
  const PipelineConfig c =
      parse("model: {path: m.gguf}\nbackend: {plugin: onednn}\nstages: [decode: {}]\n",
            {"backend=~", "backends={a: {plugin: reference}}", "stages.0.decode.backend=a"});
  ASSERT_EQ(c.backends.size(), 1u);
  EXPECT_EQ(c.stages[0].backend, "a");
}

// docs/pipeline-yaml.md opens with configs/smollm2.yaml, comments left
// out: the two must describe the same pipeline, so the listing cannot go
// stale again.
TEST(PipelineConfigDocs, TheDefaultPipelineListingIsConfigsSmollm2) {
  std::ifstream doc(DUET_SOURCE_DIR "/docs/pipeline-yaml.md");
  ASSERT_TRUE(doc) << "docs/pipeline-yaml.md";
  std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  const size_t begin = text.find("```yaml\n");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = text.find("```", begin + 8);
  ASSERT_NE(end, std::string::npos);
  const fs::path configs = fs::path(DUET_SOURCE_DIR) / "configs";
  const PipelineConfig listed = parse_pipeline_config(
      text.substr(begin + 8, end - begin - 8), (configs / "smollm2.yaml").string(), configs, {});
  const PipelineConfig file = load_pipeline_config(configs / "smollm2.yaml");
  EXPECT_EQ(describe(listed), describe(file));
}

}  // namespace
}  // namespace duet
