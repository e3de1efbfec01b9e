// duet validate — prove a pipeline can run, without running it.
#include <iostream>

#include "pipeline_loading.h"
#include "subcommands.h"

namespace duet::cli {

int cmd_validate(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")("quiet,q", "print nothing on success");
  add_pipeline_options(opts);
  po::variables_map vm;
  if (!parse_command_line("validate",
                          "duet validate PIPELINE.yaml|MODEL.gguf [--set key.path=value]...", opts,
                          {"pipeline"}, args, vm)) {
    return 0;
  }
  PluginHost& host = cli_plugin_host();
  PipelineConfig config = load_pipeline(vm, host);
  PipelineCheck check = check_pipeline(config, host);
  if (!vm.count("quiet")) {
    std::cout << describe(config) << "\n"
              << summarize(config, check) << "valid: " << config.source.string() << "\n";
  }
  return 0;
}

}  // namespace duet::cli
