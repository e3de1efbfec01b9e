// subcommands.h — the `duet` subcommands. Each takes the arguments after its
// name, prints to stdout/stderr, returns an exit code (see duet/error.h) and
// reports failures by throwing duet::Error.
#pragma once

#include <string>
#include <vector>

namespace duet::cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_chat(const std::vector<std::string>& args);
int cmd_tokenize(const std::vector<std::string>& args);
int cmd_validate(const std::vector<std::string>& args);
int cmd_plugins(const std::vector<std::string>& args);
int cmd_inspect(const std::vector<std::string>& args);
int cmd_perplexity(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_compare(const std::vector<std::string>& args);
int cmd_serve(const std::vector<std::string>& args);
int cmd_quantize(const std::vector<std::string>& args);
int cmd_conformance(const std::vector<std::string>& args);

}  // namespace duet::cli
