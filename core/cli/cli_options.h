// cli_options.h — shared Boost.Program_options plumbing for subcommands.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace duet::cli {

namespace po = boost::program_options;

// Parses `args` for subcommand `command` with visible options `visible` and
// the named positional arguments (each taken once, in order). Turns every
// Program_options error into duet::Error(kUsage) that points at --help.
// Returns false when --help was given (after printing usage to stdout).
bool parse_command_line(const std::string& command, const std::string& synopsis,
                        const po::options_description& visible,
                        const std::vector<std::string>& positional_names,
                        const std::vector<std::string>& args, po::variables_map& vm);

}  // namespace duet::cli
