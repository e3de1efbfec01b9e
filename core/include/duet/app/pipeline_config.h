// duet/app/pipeline_config.h — a pipeline YAML file, parsed and validated.
//
// load_pipeline_config() turns a file such as configs/smollm2.yaml into the
// plain structs below. It checks the file's structure and every key that core
// owns (types, ranges, required keys, stage order); the meaning of component
// options (backend.options, sampler chain links, stage options) is checked
// later by the factory that creates the component, through Options::finish().
// The schema is documented key by key in docs/pipeline-yaml.md.
//
// Errors: every problem in the file and in the overrides is collected and
// thrown together as one duet::Error(ErrorKind::kConfig) whose message has
// one line per problem. A line starts with "FILE:LINE:COL: " (1-based) for a
// problem in the file, with "--set KEY=VALUE: " for one in an override, and
// with "FILE: " for a problem with the whole file (missing, too large).
// No yaml-cpp exception ever leaves these functions.
//
// Thread-safety: the functions are reentrant; the structs are plain values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "duet/dtype.h"
#include "duet/export.h"
#include "duet/options.h"

namespace duet {

// Pipeline files larger than this are refused before they are parsed.
inline constexpr uint64_t kMaxPipelineFileBytes = 1u << 20;

// Where a value was written: 1-based line and column in the pipeline file,
// or line 0 when it came from a --set override or is a default.
struct DUET_API SourcePos {
  int line = 0;
  int column = 0;
};

struct DUET_API ModelConfig {
  // The GGUF file, absolute and lexically normal. A relative path written in
  // the file is resolved against the file's folder; one given by --set
  // against the working directory, like any command-line path.
  std::filesystem::path path;
  bool chat = false;          // wrap the prompt in the model's chat template
  std::string system_prompt;  // YAML key `system`; "" = none
  std::string chat_template;  // "" = the template stored in the model
};

struct DUET_API PluginsConfig {
  // Folders searched for plugins before the defaults, resolved like
  // ModelConfig::path (so absolute). Pass them to plugin_search_dirs().
  std::vector<std::string> paths;
};

// One backend a pipeline may run on, with the options it gets.
struct DUET_API BackendCandidate {
  std::string plugin;  // a backend's name
  Options options;     // validated by the backend's factory
};

// `backend.plugin` is either one name, which pins that backend (a pipeline
// that cannot run on it fails), or an ordered list of names, a choice:
// check_pipeline() uses the first backend whose plugin loaded and probed
// and that accepts the model, the KV cache and the attention, and reports
// why each one before it was passed over. A pinned backend's options are
// `backend.options: {KEY: VALUE}`; a choice's are per backend,
// `backend.options: {NAME: {KEY: VALUE}}`, NAME one of the listed plugins.
struct DUET_API BackendConfig {
  std::string plugin = "reference";      // the pinned backend; "" when `choice` is used
  Options options{"backend.options"};    // its options
  std::vector<BackendCandidate> choice;  // the list, in order; empty when pinned
};

// `impl` names the backend's own attention or one a plugin registered for
// the backend; `options` go to a plugin's factory (the backend's own take
// none).
// One entry of `backends:`, a backend a pipeline's stages are placed on by
// name: `backends: {NAME: {plugin: P, options: {...}, kv_cache: {dtype: D}}}`.
// Each named backend is created once and binds the weights once; its KV
// cache has the pipeline's components.kv_cache geometry and, where given,
// its own dtype (the cache is handed over between backends at a stage that
// changes backend, converted to the receiving dtype).
struct DUET_API NamedBackend {
  std::string name;               // [a-z0-9_-]+, the key under `backends`
  std::string plugin;             // the backend component to create
  Options options;                // its options, path "backends.NAME.options"
  std::optional<DType> kv_dtype;  // backends.NAME.kv_cache.dtype, else components'
  SourcePos pos;
};

struct DUET_API AttentionConfig {
  std::string impl = "default";  // "default" = the backend's first
  Options options{"components.attention.options"};
};

// Where a model's sliding-window layers keep keys and values
// (components.kv_cache.window_layers): `ring`, a ring per sequence of twice
// the window (kv/window_rings.h), or `full`, the cache of every position
// the other layers use. `auto` is ring where that takes less memory and the
// pipeline runs on one backend, else full.
enum class WindowLayers { kAuto, kRing, kFull };
// "auto", "ring" or "full".
DUET_API std::string_view window_layers_name(WindowLayers mode);

struct DUET_API KVCacheConfig {
  std::string impl = "contiguous";                 // the backend's own storage or a plugin's
  int64_t capacity_tokens = 4096;                  // 1..16777216
  int32_t block_tokens = 0;                        // 0 = one block of the whole capacity;
                                                   // otherwise divides capacity_tokens
  DType dtype = DType::kF32;                       // f32, f16, bf16 or q8_0
  Options options{"components.kv_cache.options"};  // for a plugin's storage
  WindowLayers window_layers = WindowLayers::kAuto;
};

// One link of the sampling chain, e.g. `- top_k: 40`. A scalar shorthand is
// stored as the option "value"; `options.path()` is the link's key path, e.g.
// "components.sampler.chain[2].top_p". Validated by the sampler's factory.
struct DUET_API SamplerLink {
  std::string name;
  Options options;
  SourcePos pos;
};

struct DUET_API SamplerConfig {
  uint64_t seed = 0;
  std::vector<SamplerLink> chain;  // in the order the links apply
};

// One stage, e.g. `- decode: {max_new_tokens: 128, stop: ["<|im_end|>"]}`.
// Scalar options go to `options` (path e.g. "stages[1].decode"), options
// whose value is a list of scalars go to `lists`; each key is in exactly one.
// Validated by the stage's factory.
// `backend: NAME` in a stage's map is core's, for every stage: the entry of
// `backends:` it runs on (not passed to the stage's factory). Where the
// pipeline has `backends:` with one entry it may be left out; with several
// every stage names one. Pipelines using `backend:` give none.
struct DUET_API StageConfig {
  std::string name;
  Options options;
  std::map<std::string, std::vector<std::string>> lists;
  SourcePos pos;
  std::string backend;  // stages[i].NAME.backend; "" = the pipeline's only backend
};

// How `duet run --prompts-file` and the server run many requests at once
// (duet/app/scheduler.h): `batching: {max_sequences: 16, ...}`.
struct DUET_API BatchingConfig {
  int32_t max_sequences = 16;     // 1..1024 running at once
  int32_t max_step_tokens = 512;  // 1..65536 rows in one forward pass
  bool prefix_caching = true;     // reuse cached blocks of a shared prompt prefix
  // Decode rows (each decoding sequence's token and its draft) up to which a
  // step verifies drafts: with n sequences decoding, each may add at most
  // (draft_rows - n) / n draft tokens, so drafts shrink as the batch grows
  // and stop once a pass is mostly decode rows anyway (a CPU pass of many
  // rows costs about a row's time per row: docs/performance.md); 0 runs no
  // drafts. 9 leaves one sequence lookup_decode's default 8 draft tokens.
  int32_t draft_rows = 9;  // 0..65536
};

// `debug: {check_plugins: true}`: slower runs that check what plugins do.
struct DUET_API DebugConfig {
  // A plugin's attention must store every K/V row it is given as
  // KVCache::write would (duet/attention.h); checked after each of its
  // calls by exporting the cache, so for tests and conformance runs only.
  bool check_plugins = false;
};

struct DUET_API PipelineConfig {
  std::filesystem::path source;  // the file, or the source name given to parse
  ModelConfig model;
  PluginsConfig plugins;
  BackendConfig backend;               // used when `backends` is empty
  std::vector<NamedBackend> backends;  // `backends:` in file order; empty unless given
  AttentionConfig attention;
  KVCacheConfig kv_cache;
  SamplerConfig sampler;
  std::vector<StageConfig> stages;  // at least one; in the order they run
  BatchingConfig batching;
  DebugConfig debug;
};

// Reads, overrides and validates a pipeline file. `overrides` are --set
// strings "key.path=value", applied in order to the parsed document before
// validation: dots separate map keys, a number selects a list item
// ("stages.1.decode.max_new_tokens=64"), and the value is parsed as YAML
// ("[a, b]", "{k: 1}", "true"; an empty value is the empty string). Missing
// maps along the path are created; a list index out of range or a path
// through a scalar is an error.
// Throws duet::Error(kConfig) when the file is missing, unreadable or larger
// than kMaxPipelineFileBytes, and for every problem described above.
DUET_API PipelineConfig load_pipeline_config(const std::filesystem::path& file,
                                             const std::vector<std::string>& overrides = {});

// As load_pipeline_config(), for text already in memory. `source_name`
// prefixes every error line and becomes PipelineConfig::source; relative
// paths in the text are resolved against `base_dir` (itself relative to the
// working directory unless absolute; may be empty).
DUET_API PipelineConfig parse_pipeline_config(std::string_view yaml_text,
                                              const std::string& source_name,
                                              const std::filesystem::path& base_dir,
                                              const std::vector<std::string>& overrides = {});

// The pipeline `duet run MODEL.gguf` builds for a model file, as YAML text:
// the model (its absolute path; chat on when the file has a chat template
// ChatTemplate recognises),
// the fastest backend that loads ([cuda, onednn, reference]), an f16 KV
// cache of min(4096, context_length) tokens, greedy decoding of up to 256
// tokens ending at the model's end-of-generation token. Reads only the
// file's metadata. Throws duet::Error(kModelFile) when the file cannot be
// opened as GGUF.
DUET_API std::string default_pipeline_yaml(const std::filesystem::path& model);

// Whether a pipeline argument names a model file (*.gguf, any case) rather
// than a pipeline YAML: `duet run MODEL.gguf`, duet.Pipeline("MODEL.gguf").
DUET_API bool is_model_path(const std::string& path);

// The configuration as normalized YAML: every key written out, defaults
// included, paths resolved, one fixed key order, preceded by a comment naming
// the source. Parsing the result again gives the same configuration.
DUET_API std::string describe(const PipelineConfig& config);

// `text` as a YAML double-quoted scalar, so that it reads back as exactly
// that string: for building --set values ("model.system=" + yaml_quoted(s)).
DUET_API std::string yaml_quoted(std::string_view text);

// "FILE:LINE:COL" for a position in `source`; "FILE (--set)" for line 0.
// The prefix the pipeline builder puts before a component's own errors.
DUET_API std::string format_source_pos(const std::filesystem::path& source, SourcePos pos);

}  // namespace duet
