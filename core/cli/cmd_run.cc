// duet run — run a pipeline: prefill, then the decode loop.
#include <iostream>

#include "commands.h"
#include "duet/error.h"
#include "pipeline_loading.h"

namespace duet::cli {

int cmd_run(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")(
      "prompt", po::value<std::string>()->default_value("What is the capital of France?"),
      "the prompt text");
  add_pipeline_options(opts);
  po::variables_map vm;
  if (!parse_command_line("run", "duet run PIPELINE.yaml [--prompt TEXT] [--set key.path=value]...",
                          opts, {"pipeline"}, args, vm)) {
    return 0;
  }
  PluginHost host;
  PipelineConfig config;
  PipelineCheck check = load_and_check(vm, host, config);
  std::cerr << summarize(config, check);
  // The pipeline is valid; what cannot run yet is generation itself.
  throw Error(ErrorKind::kInternal,
              "generation is not implemented yet: the tokenizer and the Llama forward pass come with "
              "issue #3; the pipeline above is valid ('duet validate' checks pipelines)");
}

}  // namespace duet::cli
