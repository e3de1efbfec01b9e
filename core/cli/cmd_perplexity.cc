// duet perplexity — how well a pipeline's model predicts a text file: one
// prefill over the whole text with every position's logits kept.
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "duet/error.h"
#include "duet/perplexity.h"
#include "duet/pipeline.h"
#include "pipeline_loading.h"

namespace duet::cli {
namespace {

std::string read_text(const std::string& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, ec) || !in) {
    throw Error(ErrorKind::kUsage, "cannot read text file '" + path + "'; give a readable regular file");
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int cmd_perplexity(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")("json", "print one JSON object instead of text");
  add_pipeline_options(opts);
  po::variables_map vm;
  if (!parse_command_line("perplexity", "duet perplexity PIPELINE.yaml TEXT_FILE [--set key.path=value]...",
                          opts, {"pipeline", "text"}, args, vm)) {
    return 0;
  }
  PluginHost& host = cli_plugin_host();
  // The text is scored as written: no chat template, every logit kept, and
  // nothing generated after it.
  PipelineConfig config = load_pipeline(vm, host, {"model.chat=false"});
  config.stages.clear();
  StageConfig prefill{"prefill", Options("stages[0].prefill"), {}, {}};
  prefill.options.set("all_logits", "true");
  config.stages.push_back(prefill);
  auto pipeline = Pipeline::build(config, host);

  const std::vector<int32_t> ids = pipeline->tokenize_prompt(read_text(vm["text"].as<std::string>()));
  if (ids.size() < 2) {
    throw Error(ErrorKind::kInputRejected, "the text has " + std::to_string(ids.size()) +
                                               " token; perplexity needs at least 2");
  }
  NullSink sink;
  RunResult r = pipeline->run_tokens(ids, sink);
  const double ppl = perplexity(r.prompt_logits, ids, pipeline->check().hparams.n_vocab);
  if (vm.count("json")) {
    std::cout << std::setprecision(9) << "{\"tokens\":" << ids.size() << ",\"perplexity\":" << ppl
              << ",\"backend\":\"" << pipeline->check().backend << "\"}\n";
  } else {
    std::cout << std::fixed << std::setprecision(4) << "perplexity " << ppl << " over " << ids.size()
              << " tokens (backend " << pipeline->check().backend << ")\n";
  }
  return 0;
}

}  // namespace duet::cli
