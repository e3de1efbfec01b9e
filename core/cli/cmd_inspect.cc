// duet inspect — a GGUF file's metadata and tensor table.
#include <iostream>

#include "cli_options.h"
#include "commands.h"
#include "duet/gguf.h"
#include "duet/model_summary.h"

namespace duet::cli {

int cmd_inspect(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")("tensors,t", "also list every tensor");
  po::variables_map vm;
  if (!parse_command_line("inspect", "duet inspect MODEL.gguf [--tensors]", opts, {"model"}, args, vm)) {
    return 0;
  }
  GgufFile file = GgufFile::open(vm["model"].as<std::string>());
  print_model_summary(std::cout, file, vm.count("tensors") != 0);
  return 0;
}

}  // namespace duet::cli
