// duet perplexity — how well a pipeline's model predicts a text file, whole
// or in llama-perplexity's windows (--ctx), and, against logits saved from a
// baseline run (--save-logits, then --kl-base), how closely its next-token
// distributions follow the baseline's.
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "duet/app/perplexity.h"
#include "duet/app/pipeline.h"
#include "duet/error.h"
#include "duet/tokenizer.h"
#include "json_writer.h"
#include "logits_file.h"
#include "pipeline_loading.h"
#include "prompt_input.h"
#include "subcommands.h"

namespace duet::cli {
namespace {

std::string read_text(const std::string& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, ec) || !in) {
    throw Error(ErrorKind::kUsage,
                "cannot read text file '" + path + "'; give a readable regular file");
  }
  std::stringstream s;
  s << in.rdbuf();
  require_utf8(s.str(), "text file '" + path + "'");
  return s.str();
}

// The windows to score, or an error naming the sizes and the fix.
std::vector<ScoringWindow> windows_for(int64_t n_tokens, int32_t ctx, int64_t capacity,
                                       const std::string& path) {
  const std::string tokens = std::to_string(n_tokens) + " token" + (n_tokens == 1 ? "" : "s");
  if (ctx > capacity) {
    throw Error(ErrorKind::kUsage,
                "--ctx " + std::to_string(ctx) + " is larger than the KV cache (" +
                    std::to_string(capacity) +
                    " tokens); use a smaller --ctx or raise components.kv_cache.capacity_tokens");
  }
  if (ctx == 0 && n_tokens > capacity) {
    throw Error(
        ErrorKind::kInputRejected,
        "text file '" + path + "' has " + tokens + " but the KV cache holds " +
            std::to_string(capacity) +
            "; score it in windows with --ctx N (llama-perplexity's default is 512) or raise "
            "components.kv_cache.capacity_tokens");
  }
  std::vector<ScoringWindow> windows = scoring_windows(n_tokens, ctx);
  if (windows.empty()) {
    throw Error(ErrorKind::kInputRejected,
                "text file '" + path + "' has " + tokens + "; perplexity needs at least " +
                    (ctx == 0 ? std::string("2") : std::to_string(ctx) + " (one window of --ctx)") +
                    "; give a longer text" + (ctx == 0 ? "" : " or a smaller --ctx"));
  }
  return windows;
}

void print_text(const Fidelity& f, bool with_base, size_t tokens, size_t windows,
                const std::string& backend) {
  std::cout << std::fixed << std::setprecision(4) << "perplexity " << f.perplexity << " over "
            << f.positions << " scored positions of " << tokens << " tokens in " << windows
            << " window" << (windows == 1 ? "" : "s") << " (backend " << backend << ")\n";
  if (!with_base) return;
  std::cout << "base perplexity " << f.perplexity_base << ", ratio " << std::setprecision(6)
            << f.perplexity_ratio << "\n"
            << std::scientific << std::setprecision(4) << "KL divergence mean " << f.kld_mean
            << ", median " << f.kld_median << ", 99% " << f.kld_p99 << ", max " << f.kld_max << "\n"
            << std::fixed << std::setprecision(3) << "top-1 agreement " << f.top1_agreement * 100
            << "%, RMS dp " << f.rms_delta_p * 100 << "%, " << std::scientific
            << std::setprecision(4) << "logits NMSE " << f.logits_nmse << "\n";
}

std::string json_result(const Fidelity& f, bool with_base, size_t tokens, size_t windows,
                        int32_t ctx, const std::string& backend) {
  JsonWriter j;
  j.begin_object();
  j.field("backend", backend);
  j.field("tokens", static_cast<int64_t>(tokens));
  j.field("ctx", static_cast<int64_t>(ctx));
  j.field("windows", static_cast<int64_t>(windows));
  j.field("positions", f.positions);
  j.field("perplexity", f.perplexity);
  if (with_base) {
    j.field("perplexity_base", f.perplexity_base);
    j.field("perplexity_ratio", f.perplexity_ratio);
    j.field("kld_mean", f.kld_mean);
    j.field("kld_median", f.kld_median);
    j.field("kld_p99", f.kld_p99);
    j.field("kld_max", f.kld_max);
    j.field("top1_agreement", f.top1_agreement);
    j.field("rms_delta_p", f.rms_delta_p);
    j.field("logits_nmse", f.logits_nmse);
  }
  j.end_object();
  return j.str();
}

}  // namespace

int cmd_perplexity(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")(
      "ctx,c", po::value<int32_t>()->default_value(0),
      "score windows of N tokens as llama-perplexity does (the second half of each); 0 = the whole "
      "text at once")("save-logits", po::value<std::string>(),
                      "save the scored logits to FILE, a baseline for --kl-base")(
      "kl-base", po::value<std::string>(),
      "compare with the logits saved in FILE: KL divergence, top-1 agreement, RMS dp, logits NMSE")(
      "json", "print one JSON object instead of text");
  add_pipeline_options(opts);
  po::variables_map vm;
  if (!parse_command_line("perplexity",
                          "duet perplexity PIPELINE.yaml|MODEL.gguf TEXT_FILE [--ctx N] "
                          "[--save-logits FILE | --kl-base FILE] "
                          "[--json] [--set key.path=value]...",
                          opts, {"pipeline", "text"}, args, vm)) {
    return 0;
  }
  const int32_t ctx = vm["ctx"].as<int32_t>();
  if (ctx != 0 && ctx < 4) {
    throw Error(ErrorKind::kUsage,
                "--ctx " + std::to_string(ctx) + " is too small; use 0 (whole text) or at least 4");
  }
  const std::string path = vm["text"].as<std::string>();
  const std::string text = read_text(path);
  if (text.empty()) {
    throw Error(ErrorKind::kInputRejected,
                "text file '" + path + "' is empty; perplexity needs a text to score");
  }
  PluginHost& host = cli_plugin_host();
  // The text is scored as written: no chat template, every logit kept, and
  // nothing generated after it, on the backend of the pipeline's first stage.
  PipelineConfig config = load_pipeline(vm, host, {"model.chat=false"});
  const std::string backend = config.stages.front().backend;
  config.stages.clear();
  StageConfig prefill{"prefill", Options("stages[0].prefill"), {}, {}, backend};
  prefill.options.set("all_logits", "true");
  config.stages.push_back(prefill);
  auto pipeline = Pipeline::build(config, host);

  const std::vector<int32_t> ids = pipeline->tokenize_prompt(text);
  const std::vector<ScoringWindow> windows = windows_for(
      static_cast<int64_t>(ids.size()), ctx, pipeline->check().kv_cache.capacity_tokens, path);
  int64_t positions = 0;
  for (const ScoringWindow& w : windows) positions += w.length - 1 - w.first_scored;

  const int32_t n_vocab = pipeline->check().hparams.n_vocab;
  const auto vocab = static_cast<size_t>(n_vocab);
  std::optional<LogitsWriter> save;
  std::optional<LogitsReader> base;
  if (vm.count("kl-base"))
    base.emplace(vm["kl-base"].as<std::string>(), n_vocab, ctx, ids, positions);
  if (vm.count("save-logits")) {
    std::error_code ec;
    if (vm.count("kl-base") &&
        std::filesystem::equivalent(vm["kl-base"].as<std::string>(),
                                    vm["save-logits"].as<std::string>(), ec)) {
      throw Error(ErrorKind::kUsage,
                  "--save-logits and --kl-base name the same file, which saving "
                  "would overwrite; save to another file");
    }
    save.emplace(vm["save-logits"].as<std::string>(), n_vocab, ctx, ids);
  }

  const Tokenizer& tokenizer = pipeline->tokenizer();
  FidelityAccumulator acc(n_vocab);
  NullSink sink;
  for (size_t w = 0; w < windows.size(); ++w) {
    const ScoringWindow& window = windows[w];
    std::vector<int32_t> tokens(ids.begin() + window.begin,
                                ids.begin() + window.begin + window.length);
    // As llama-perplexity: each window starts with BOS where the model wants one.
    if (ctx > 0 && tokenizer.add_bos() && tokenizer.bos_id()) tokens.front() = *tokenizer.bos_id();
    const RunResult r = pipeline->run_tokens(tokens, sink);
    for (int32_t pos = window.first_scored; pos + 1 < window.length; ++pos) {
      std::span<const float> row(r.prompt_logits.data() + static_cast<size_t>(pos) * vocab, vocab);
      const int32_t next = tokens[static_cast<size_t>(pos) + 1];
      if (base) {
        acc.add(row, base->next(), next);
      } else {
        acc.add(row, next);
      }
      if (save) save->add(row);
    }
    if (windows.size() > 1) {
      std::cerr << "[" << w + 1 << "/" << windows.size() << "] perplexity so far " << std::fixed
                << std::setprecision(4) << acc.perplexity() << "\n";
    }
  }
  if (save) save->finish();
  const Fidelity f = acc.result();
  if (vm.count("json")) {
    std::cout << json_result(f, base.has_value(), ids.size(), windows.size(), ctx,
                             pipeline->check().backend)
              << "\n";
  } else {
    print_text(f, base.has_value(), ids.size(), windows.size(), pipeline->check().backend);
  }
  return 0;
}

}  // namespace duet::cli
