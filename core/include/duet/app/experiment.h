// duet/app/experiment.h — a backend comparison experiment, parsed and validated.
//
// An experiment file names a base pipeline, the variants to compare (each a
// name and overrides of pipeline keys, written as `--set` would take them,
// or the product of a matrix of such overrides), the variant the others are
// measured against, and the workload: speed tests, a text to score for
// fidelity and prompts to answer greedily. `duet compare` runs it; the
// schema is documented key by key in docs/compare.md.
//
// Errors are reported as pipelines' are (duet/app/pipeline_config.h): every
// problem at once in one duet::Error(kConfig), one line each starting with
// "FILE:LINE:COL: ", with did-you-mean hints. Each variant's overrides are
// also applied to the base pipeline and validated there, so a variant that
// names a key the pipeline does not have fails before anything runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"

namespace duet {

// Experiment files larger than this are refused before they are parsed.
inline constexpr uint64_t kMaxExperimentFileBytes = 1u << 20;
// Variants, after a matrix is expanded: more than this is refused.
inline constexpr size_t kMaxVariants = 64;

struct DUET_API Variant {
  std::string name;                    // [A-Za-z0-9._+=,-], unique
  std::vector<std::string> overrides;  // "key.path=value", in order
  // The index of the decode stage in this variant's pipeline (overrides
  // may change the stages), or -1 when it has none.
  int32_t decode_stage = -1;
};

struct DUET_API SpeedWorkload {
  std::vector<int32_t> prompt_tokens;  // pp tests; empty = none
  std::vector<int32_t> gen_tokens;     // tg tests; empty = none
  std::vector<int32_t> depths{0};      // tg tests at these cache depths
  int32_t rounds = 3;                  // timed runs of each test per variant, one per round
};

struct DUET_API FidelityWorkload {
  std::filesystem::path text;  // absolute; empty = no fidelity figures
  int32_t ctx = 0;             // duet perplexity --ctx: 0 = the whole text
};

struct DUET_API GreedyWorkload {
  std::vector<std::string> prompts;  // empty = none
  int32_t tokens = 32;               // tokens generated per prompt
};

struct DUET_API Experiment {
  std::filesystem::path source;    // the experiment file
  std::filesystem::path pipeline;  // the base pipeline, absolute
  std::vector<Variant> variants;   // `variants` then the matrix's product
  std::string baseline;            // a variant's name
  SpeedWorkload speed;
  FidelityWorkload fidelity;
  GreedyWorkload greedy;
};

// Reads and validates an experiment file; `overrides` are --set strings
// applied to the experiment document as for pipelines. Throws
// duet::Error(kConfig) listing every problem.
DUET_API Experiment load_experiment(const std::filesystem::path& file,
                                    const std::vector<std::string>& overrides = {});

// As load_experiment(), for text in memory; relative paths are taken from
// `base_dir`.
DUET_API Experiment parse_experiment(std::string_view yaml_text, const std::string& source_name,
                                     const std::filesystem::path& base_dir,
                                     const std::vector<std::string>& overrides = {});

}  // namespace duet
