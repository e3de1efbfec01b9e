#include "compare_run.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "duet/app/gguf.h"
#include "duet/app/pipeline_config.h"
#include "duet/error.h"
#include "duet/tokenizer.h"
#include "subprocess.h"

namespace duet::compare {
namespace {

std::string join(const std::vector<int32_t>& values) {
  std::string out;
  for (int32_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// Reads a child's JSON output (JSON is YAML's flow style); nullopt when it
// is not a map.
std::optional<YAML::Node> parse_json(const std::string& text) {
  try {
    YAML::Node node = YAML::Load(text);
    if (node.IsMap()) return node;
  } catch (const YAML::Exception&) {
  }
  return std::nullopt;
}

class Runner {
 public:
  Runner(const Experiment& e, std::string work_dir, const std::atomic<bool>& stop)
      : e_(e), work_dir_(std::move(work_dir)), stop_(stop), self_(self_executable()) {}

  CompareResult run() {
    CompareResult result;
    // The baseline runs first, so that its logits exist before the others
    // are compared with them.
    for (const Variant& v : e_.variants) {
      VariantResult r;
      r.variant = &v;
      result.variants.insert(
          v.name == e_.baseline ? result.variants.begin() : result.variants.end(), std::move(r));
    }
    if (!e_.speed.prompt_tokens.empty() || !e_.speed.gen_tokens.empty()) {
      for (int32_t round = 1; round <= e_.speed.rounds; ++round) {
        for (VariantResult& r : result.variants) run_speed(r, round, result);
      }
    }
    if (!e_.fidelity.text.empty()) {
      for (VariantResult& r : result.variants) run_fidelity(r, result.variants.front());
    }
    if (!e_.greedy.prompts.empty()) {
      for (VariantResult& r : result.variants) run_greedy(r, result.variants.front());
    }
    result.interrupted = stop_;
    if (result.interrupted) {
      for (VariantResult& r : result.variants) {
        if (r.status == "ok" && !complete(r)) r.status = "interrupted";
      }
    }
    return result;
  }

 private:
  bool complete(const VariantResult& r) const {
    const bool speed_done = (e_.speed.prompt_tokens.empty() && e_.speed.gen_tokens.empty()) ||
                            (!r.speed.empty() && r.speed.front().tokens_per_second.size() ==
                                                     static_cast<size_t>(e_.speed.rounds));
    const bool fidelity_done = e_.fidelity.text.empty() || r.fidelity.has_value();
    const bool greedy_done = r.greedy.size() == e_.greedy.prompts.size();
    return speed_done && fidelity_done && greedy_done;
  }

  bool runnable(const VariantResult& r) const { return r.status == "ok" && !stop_; }

  // Runs `duet ARGS... PIPELINE EXTRA... --set OVERRIDE...` for `r`; on
  // failure marks it failed (or interrupted) and returns nullopt.
  std::optional<ChildResult> child(VariantResult& r, const std::string& step,
                                   std::vector<std::string> args) {
    std::vector<std::string> argv{self_};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const auto& o : r.variant->overrides) {
      argv.push_back("--set");
      argv.push_back(o);
    }
    ChildResult c = run_child(argv);
    if (c.ok()) return c;
    if (stop_) {
      r.status = "interrupted";
    } else {
      r.status = "failed";
      r.failure = Failure{step, c.signal ? 128 + c.signal : c.exit_code, c.reason()};
      if (c.signal)
        r.failure->reason = c.status() + (c.reason() == c.status() ? "" : ": " + c.reason());
      std::cerr << "compare: " << r.variant->name << ": " << step << " failed (" << c.status()
                << "): " << r.failure->reason << "\n";
    }
    return std::nullopt;
  }

  // A child that exited 0 but whose output could not be read.
  void fail_output(VariantResult& r, const std::string& step, const std::string& what) {
    r.status = "failed";
    r.failure =
        Failure{step, 0, "duet " + what + " exited 0 but its output was not the JSON expected"};
    std::cerr << "compare: " << r.variant->name << ": " << step << " failed: " << r.failure->reason
              << "\n";
  }

  void run_speed(VariantResult& r, int32_t round, CompareResult& result) {
    if (!runnable(r)) return;
    std::vector<std::string> args{"bench", e_.pipeline.string(), "-r", "1", "--warmup", "1", "-o",
                                  "json"};
    std::string tests;
    if (!e_.speed.prompt_tokens.empty()) {
      args.insert(args.end(), {"-p", join(e_.speed.prompt_tokens)});
      tests = "pp";
    }
    if (!e_.speed.gen_tokens.empty()) {
      args.insert(args.end(), {"-n", join(e_.speed.gen_tokens), "--depth", join(e_.speed.depths)});
      tests += tests.empty() ? "tg" : ",tg";
    }
    args.insert(args.end(), {"--tests", tests});
    const auto c = child(r, "speed", args);
    if (!c) return;
    const auto json = parse_json(c->out);
    if (!json || !(*json)["results"].IsSequence()) return fail_output(r, "speed", "bench");
    r.backend = (*json)["backend"].as<std::string>("");
    r.load_seconds.push_back((*json)["load_seconds"].as<double>(0.0));
    r.peak_rss_bytes = std::max(r.peak_rss_bytes, c->peak_rss_bytes);
    if (const auto device = (*json)["device_memory_bytes"]; device && device.IsScalar()) {
      r.device_bytes = std::max(r.device_bytes.value_or(0), device.as<uint64_t>(0));
    }
    if (result.cpu_model.empty()) {
      result.cpu_model = (*json)["cpu_model"].as<std::string>("");
      for (const auto& f : (*json)["cpu_features"])
        result.cpu_features.push_back(f.as<std::string>(""));
    }
    std::ostringstream progress;
    progress << std::fixed << std::setprecision(1);
    for (const auto& test : (*json)["results"]) {
      const std::string name = test["test"].as<std::string>("");
      auto it = std::find_if(r.speed.begin(), r.speed.end(),
                             [&](const SpeedResult& s) { return s.test == name; });
      if (it == r.speed.end()) {
        SpeedResult fresh;
        fresh.test = name;
        it = r.speed.insert(r.speed.end(), std::move(fresh));
      }
      const double tps = test["tokens_per_second_median"].as<double>(0.0);
      it->tokens_per_second.push_back(tps);
      if (test["time_to_first_token_seconds"])
        it->ttft_seconds.push_back(test["time_to_first_token_seconds"].as<double>(0.0));
      progress << " " << name << " " << tps << " t/s";
    }
    std::cerr << "compare: round " << round << "/" << e_.speed.rounds << ", " << r.variant->name
              << " (" << r.backend << "):" << progress.str() << "\n";
  }

  void run_fidelity(VariantResult& r, const VariantResult& baseline) {
    if (!runnable(r)) return;
    const std::string base_file = work_dir_ + "/baseline.logits";
    std::vector<std::string> args{"perplexity",
                                  e_.pipeline.string(),
                                  e_.fidelity.text.string(),
                                  "--ctx",
                                  std::to_string(e_.fidelity.ctx),
                                  "--json"};
    const bool is_baseline = &r == &baseline;
    if (is_baseline) {
      // Its logits are the reference; then it is compared with them too, so
      // its row shows what run-to-run noise there is (none, for a
      // deterministic backend).
      std::vector<std::string> save = args;
      save.insert(save.end(), {"--save-logits", base_file});
      if (!child(r, "fidelity", save)) return;
    } else if (!baseline.fidelity) {
      return;  // no baseline logits: nothing to compare with
    }
    args.insert(args.end(), {"--kl-base", base_file});
    const auto c = child(r, "fidelity", args);
    if (!c) return;
    const auto json = parse_json(c->out);
    if (!json) return fail_output(r, "fidelity", "perplexity");
    std::map<std::string, double> figures;
    for (const auto& kv : *json) {
      if (kv.second.IsScalar() && kv.first.as<std::string>("") != "backend") {
        figures[kv.first.as<std::string>("")] = kv.second.as<double>(0.0);
      }
    }
    r.fidelity = figures;
    if (r.backend.empty()) r.backend = (*json)["backend"].as<std::string>("");
    std::cerr << "compare: fidelity, " << r.variant->name << ": perplexity "
              << figures["perplexity"] << ", mean KLD " << figures["kld_mean"] << "\n";
  }

  // load_experiment() has given every variant a decode stage when there are
  // greedy prompts.
  void run_greedy(VariantResult& r, const VariantResult& baseline) {
    const std::string stage = "stages." + std::to_string(r.variant->decode_stage) + ".decode.";
    for (const std::string& prompt : e_.greedy.prompts) {
      if (!runnable(r)) return;
      // Through a file, so that no prompt ("-", "-h") is taken for an option.
      const std::string prompt_file = work_dir_ + "/prompt.txt";
      {
        std::ofstream out(prompt_file, std::ios::binary | std::ios::trunc);
        out << prompt;
      }
      const auto c = child(r, "greedy",
                           {"run", e_.pipeline.string(), "--json", "--prompt-file", prompt_file,
                            "--set", "components.sampler.chain=[greedy]", "--set",
                            stage + "max_new_tokens=" + std::to_string(e_.greedy.tokens), "--set",
                            stage + "stop=[]"});
      if (!c) return;
      const auto json = parse_json(c->out);
      if (!json || !(*json)["generated_token_ids"].IsSequence())
        return fail_output(r, "greedy", "run");
      GreedyResult g;
      g.prompt = prompt;
      for (const auto& t : (*json)["generated_token_ids"]) g.tokens.push_back(t.as<int32_t>(-1));
      r.greedy.push_back(std::move(g));
    }
    if (&r != &baseline)
      compare_greedy(r, baseline);
    else
      compare_greedy(r, r);
  }

  // Fills matching_tokens, first_divergence and the continuations against
  // the baseline's answers to the same prompts.
  void compare_greedy(VariantResult& r, const VariantResult& baseline) {
    const Tokenizer& t = tokenizer();
    for (size_t i = 0; i < r.greedy.size() && i < baseline.greedy.size(); ++i) {
      GreedyResult& g = r.greedy[i];
      const std::vector<int32_t>& base = baseline.greedy[i].tokens;
      const auto [mine, theirs] =
          std::mismatch(g.tokens.begin(), g.tokens.end(), base.begin(), base.end());
      g.matching_tokens = static_cast<int32_t>(mine - g.tokens.begin());
      if (mine == g.tokens.end() && theirs == base.end()) continue;
      g.first_divergence = g.matching_tokens;
      g.continuation = t.decode(std::vector<int32_t>(mine, g.tokens.end()));
      g.baseline_continuation = t.decode(std::vector<int32_t>(theirs, base.end()));
    }
  }

  // The baseline's tokenizer, to show where greedy answers part.
  const Tokenizer& tokenizer() {
    if (!tokenizer_) {
      const Variant* base = nullptr;
      for (const Variant& v : e_.variants) {
        if (v.name == e_.baseline) base = &v;
      }
      const PipelineConfig config = load_pipeline_config(e_.pipeline, base->overrides);
      tokenizer_ = load_tokenizer(GgufFile::open(config.model.path));
    }
    return *tokenizer_;
  }

  const Experiment& e_;
  std::string work_dir_;
  const std::atomic<bool>& stop_;
  std::string self_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace

CompareResult run_experiment(const Experiment& e, const std::string& work_dir,
                             const std::atomic<bool>& stop) {
  return Runner(e, work_dir, stop).run();
}

}  // namespace duet::compare
