#include "cli_options.h"

#include <iostream>

#include "duet/error.h"

namespace duet::cli {

bool parse_command_line(const std::string& command, const std::string& synopsis,
                        const po::options_description& visible,
                        const std::vector<std::string>& positional_names,
                        const std::vector<std::string>& args, po::variables_map& vm) {
  po::options_description all;
  all.add(visible);
  po::options_description hidden;
  po::positional_options_description positional;
  for (const auto& name : positional_names) {
    hidden.add_options()(name.c_str(), po::value<std::string>());
    positional.add(name.c_str(), 1);
  }
  all.add(hidden);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error(ErrorKind::kUsage,
                "duet " + command + ": " + e.what() + "; see 'duet " + command + " --help'");
  }
  if (vm.count("help")) {
    std::cout << "Usage: " << synopsis << "\n\n" << visible << "\n";
    return false;
  }
  for (const auto& name : positional_names) {
    if (!vm.count(name)) {
      throw Error(ErrorKind::kUsage,
                  "duet " + command + ": missing argument " + name + "; usage: " + synopsis);
    }
  }
  return true;
}

}  // namespace duet::cli
