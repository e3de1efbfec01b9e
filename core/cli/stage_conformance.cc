#include "stage_conformance.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "duet/app/pipeline.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/scheduler.h"
#include "duet/error.h"
#include "duet/generation.h"
#include "random_llama.h"

namespace duet::cli {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kVocab = 1024;  // prime span 1021: random_llama_next is a permutation
constexpr int32_t kRoomyCache = 512, kSmallCache = 64;
const char* const kGreedy = "{seed: 7, chain: [greedy]}";
const char* const kSampled = "{seed: 7, chain: [{top_k: 40}, {temperature: 4.0}]}";

// A temporary folder with the model file, removed with this.
class ModelFile {
 public:
  ModelFile()
      : dir_(fs::temp_directory_path() / ("duet-conformance-stage-" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
    testing::RandomLlama shape;
    shape.n_vocab = kVocab;
    shape.n_embd = 64;
    shape.n_layers = 2;
    shape.n_heads = 4;
    shape.n_kv_heads = 2;
    shape.n_ff = 128;
    shape.context_length = kRoomyCache;
    shape.matrix_type = DType::kF32;
    testing::write_random_llama(path(), shape);
  }
  ~ModelFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;
  fs::path path() const { return dir_ / "random.gguf"; }

 private:
  fs::path dir_;
};

// Prompt i: a run of 12 tokens the model chains, 8 others, then the run's
// first token again, whose continuation is the run: something to draft.
std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (int32_t i = 0; i < 4; ++i) {
    std::vector<int32_t> p;
    int32_t t = 3 + 97 * i;
    for (int32_t k = 0; k < 12; ++k, t = testing::random_llama_next(t, kVocab)) p.push_back(t);
    for (int32_t k = 0; k < 8; ++k) p.push_back(3 + (500 + 31 * i + 53 * k) % (kVocab - 3));
    p.push_back(p.front());
    out.push_back(std::move(p));
  }
  return out;
}

// Pipelines on the model: core's prefill, then `stage` (a YAML entry).
class Pipelines {
 public:
  Pipelines(const PluginHost& host, const fs::path& model) : host_(host), model_(model) {}

  std::unique_ptr<Pipeline> build(const std::string& stage, const char* sampler,
                                  int32_t capacity) const {
    nlohmann::json path = model_.string();
    const std::string yaml =
        "model: {path: " + path.dump() + "}\nbackend: {plugin: reference}\n" +
        "components:\n  kv_cache: {capacity_tokens: " + std::to_string(capacity) +
        ", block_tokens: 16}\n  sampler: " + sampler +
        // draft_rows lifted: each of the four sequences verifies whole drafts.
        "\nbatching: {max_sequences: 4, draft_rows: 65536}\nstages: [prefill: {}, " + stage + "]\n";
    return Pipeline::build(parse_pipeline_config(yaml, "conformance.yaml", model_.parent_path()),
                           host_);
  }

  // The tokens core's decode stage gives `prompt`, at most `n`.
  RunResult core(const std::vector<int32_t>& prompt, const char* sampler, int32_t capacity,
                 size_t n) const {
    NullSink sink;
    return build("{decode: {max_new_tokens: " + std::to_string(std::max<size_t>(n, 1)) + "}}",
                 sampler, capacity)
        ->run_tokens(prompt, sink);
  }

 private:
  const PluginHost& host_;
  fs::path model_;
};

// "" when `got` (the stage's) are core's tokens for as many, else why not.
std::string compare(size_t prompt, const std::vector<int32_t>& got, FinishReason got_finish,
                    const RunResult& core) {
  const std::string which = "prompt " + std::to_string(prompt) + ": ";
  if (got.empty()) return which + "the stage generated no token";
  for (size_t i = 0; i < got.size() && i < core.generated_tokens.size(); ++i) {
    if (got[i] != core.generated_tokens[i]) {
      return which + "token " + std::to_string(i) + " is " + std::to_string(got[i]) +
             " where core's decode gives " + std::to_string(core.generated_tokens[i]);
    }
  }
  if (got.size() != core.generated_tokens.size()) {
    return which + "the stage generated " + std::to_string(got.size()) +
           " tokens where core's decode gives " + std::to_string(core.generated_tokens.size());
  }
  if (got_finish != core.finish) {
    return which + "the stage finished with '" + std::string(finish_reason_name(got_finish)) +
           "', core's decode with '" + std::string(finish_reason_name(core.finish)) + "'";
  }
  return "";
}

}  // namespace

std::vector<ConformanceCase> stage_conformance(const PluginHost& host, const ComponentInfo& info,
                                               const Options& options) {
  nlohmann::json given = nlohmann::json::object();
  for (const auto& [key, value] : options.values()) given[key] = value;
  const std::string entry = "{" + info.name + ": " + given.dump() + "}";
  const ModelFile model;
  const Pipelines pipelines(host, model.path());
  // Its factory's refusal of the options, a kConfig error, is thrown here,
  // before any case.
  pipelines.build(entry, kGreedy, kRoomyCache);

  std::vector<ConformanceCase> cases;
  // `body` returns whether the case passed and a detail (why it failed).
  const auto run = [&](const std::string& layout,
                       const std::function<std::pair<bool, std::string>()>& body) {
    ConformanceCase& c = cases.emplace_back();
    c.component = "stage '" + info.name + "'";
    c.backend = "reference";
    c.layout = layout;
    c.worst_nmse = NAN;  // tokens are compared, not values
    try {
      auto [passed, detail] = body();
      c.result = passed ? "pass" : "FAIL";
      c.detail = std::move(detail);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      c.result = "FAIL";
      c.detail = std::string("threw: ") + e.what();
    } catch (...) {
      c.result = "FAIL";
      c.detail = "threw something that is not a std::exception";
    }
  };
  const std::vector<std::vector<int32_t>> all = prompts();
  // Each prompt through the stage, against core's decode asked for as many
  // tokens as the stage gave, or for `core_tokens` when nonzero.
  // On a pass, how many tokens the stage's decode passes gave.
  const auto one_at_a_time = [&](const char* sampler, int32_t capacity, size_t core_tokens) {
    auto stage = pipelines.build(entry, sampler, capacity);
    int64_t tokens = 0, passes = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      NullSink sink;
      const RunResult got = stage->run_tokens(all[i], sink);
      tokens += static_cast<int64_t>(got.generated_tokens.size());
      passes += got.stats.decode_passes;
      const RunResult want = pipelines.core(
          all[i], sampler, capacity, core_tokens != 0 ? core_tokens : got.generated_tokens.size());
      if (std::string why = compare(i, got.generated_tokens, got.finish, want); !why.empty())
        return std::make_pair(false, why);
    }
    // The first token comes out of the prefill: decode passes give the rest.
    return std::make_pair(true, std::to_string(tokens - static_cast<int64_t>(all.size())) +
                                    " tokens in " + std::to_string(passes) + " decode passes");
  };
  run("greedy", [&] { return one_at_a_time(kGreedy, kRoomyCache, 0); });
  run("sampled", [&] { return one_at_a_time(kSampled, kRoomyCache, 0); });
  for (const char* sampler : {kGreedy, kSampled}) {
    const std::string layout = sampler == kGreedy ? "batched greedy" : "batched sampled";
    auto stage = pipelines.build(entry, sampler, kRoomyCache);
    auto scheduler = std::make_unique<Scheduler>(*stage);
    run(layout, [&] {
      for (size_t i = 0; i < all.size(); ++i) {
        Request r;
        r.id = std::to_string(i);
        r.prompt = all[i];
        scheduler->submit(std::move(r));
      }
      scheduler->run();
      for (const RequestResult& got : scheduler->take_finished()) {
        const size_t i = std::stoul(got.id);
        const RunResult want =
            pipelines.core(all[i], sampler, kRoomyCache, got.generated_tokens.size());
        if (std::string why = compare(i, got.generated_tokens, got.finish, want); !why.empty())
          return std::make_pair(false, why);
      }
      const SchedulerStats& s = scheduler->stats();
      return std::make_pair(true, std::to_string(s.accepted_draft_tokens) + " of " +
                                      std::to_string(s.draft_tokens) + " draft tokens kept");
    });
  }
  // Core's decode asked for more than the cache holds stops for room.
  run("small cache", [&] { return one_at_a_time(kGreedy, kSmallCache, kRoomyCache); });
  return cases;
}

}  // namespace duet::cli
