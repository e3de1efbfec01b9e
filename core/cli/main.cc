// duet — the command-line front end. Dispatches to a subcommand and turns
// every error into one line on stderr and a documented exit code.
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "duet/error.h"
#include "subcommands.h"

namespace {

constexpr const char* kUsage =
    "Usage: duet COMMAND [options]\n"
    "\n"
    "Commands:\n"
    "  run PIPELINE.yaml       run a pipeline (prefill, then the decode loop)\n"
    "  chat PIPELINE.yaml      chat in the terminal, the conversation kept in the KV cache\n"
    "  validate PIPELINE.yaml  check a pipeline file, its model and its plugins\n"
    "  plugins                 list the plugins found, loaded and refused\n"
    "  inspect MODEL.gguf      show a model file's metadata and tensors\n"
    "  tokenize MODEL.gguf     show the token ids and pieces of a text\n"
    "  perplexity PIPELINE.yaml TEXT_FILE\n"
    "                          score a text with the pipeline's model and backend\n"
    "  bench PIPELINE.yaml     measure prompt-processing and generation tokens/s\n"
    "  compare EXPERIMENT.yaml compare pipeline variants: speed, memory, fidelity\n"
    "  serve PIPELINE.yaml     an OpenAI-compatible HTTP server on the batching scheduler\n"
    "  quantize IN.gguf OUT.gguf --type TYPE\n"
    "                          write a model again with its weights in another format\n"
    "  conformance --plugin FILE\n"
    "                          check a plugin's components against the reference\n"
    "\n"
    "\n"
    "run, chat, validate, perplexity, bench and serve also take a MODEL.gguf in\n"
    "place of PIPELINE.yaml: they build the default pipeline for it (fastest\n"
    "backend, the model's chat template); --save-pipeline FILE.yaml writes it out.\n"
    "'duet COMMAND --help' describes a command's options.\n"
    "Exit codes: 0 ok, 2 usage or config, 3 model file, 4 plugin or backend,\n"
    "5 out of memory, 6 input rejected, 70 internal error.\n";

// Prints each line of a (possibly multi-line) message with the prefix.
void print_error(const std::string& message) {
  size_t start = 0;
  while (start < message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    std::cerr << "duet: error: " << message.substr(start, end - start) << "\n";
    start = end + 1;
  }
}

int dispatch(const std::string& command, const std::vector<std::string>& args) {
  using namespace duet::cli;
  if (command == "run") return cmd_run(args);
  if (command == "chat") return cmd_chat(args);
  if (command == "tokenize") return cmd_tokenize(args);
  if (command == "validate") return cmd_validate(args);
  if (command == "plugins") return cmd_plugins(args);
  if (command == "inspect") return cmd_inspect(args);
  if (command == "perplexity") return cmd_perplexity(args);
  if (command == "bench") return cmd_bench(args);
  if (command == "compare") return cmd_compare(args);
  if (command == "serve") return cmd_serve(args);
  if (command == "quantize") return cmd_quantize(args);
  if (command == "conformance") return cmd_conformance(args);
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "duet " DUET_VERSION "\n";
    return 0;
  }
  throw duet::Error(duet::ErrorKind::kUsage,
                    "unknown command '" + command +
                        "'; commands: run, chat, validate, plugins, "
                        "inspect, tokenize, perplexity, bench, compare, serve, quantize, "
                        "conformance");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_error("no command given; see 'duet --help' for the commands");
    return static_cast<int>(duet::ExitCode::kUsageOrConfig);
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return dispatch(argv[1], args);
  } catch (const duet::Error& e) {
    print_error(e.what());
    return static_cast<int>(e.exit_code());
  } catch (const std::bad_alloc&) {
    print_error("out of host memory");
    return static_cast<int>(duet::ExitCode::kOutOfMemory);
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what() + " (please report this)");
    return static_cast<int>(duet::ExitCode::kInternal);
  }
}
