// duet chat — an interactive multi-turn chat in the terminal. The
// conversation stays in the KV cache (duet/app/conversation.h), so each message
// prefills only its own tokens. Messages are lines of standard input; a line
// ending in '\' continues on the next. /reset starts a new conversation,
// /exit or the end of input ends it.
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "duet/app/conversation.h"
#include "duet/error.h"
#include "pipeline_loading.h"
#include "prompt_input.h"
#include "subcommands.h"

namespace duet::cli {
namespace {

constexpr const char* kHelp =
    "/reset starts a new conversation, /exit or /quit (or the end of input) ends the chat, /help "
    "shows this";

// One message: a line, or several joined where a line ends in '\'. Returns
// false at the end of input with nothing read.
bool read_message(bool interactive, std::string& message) {
  message.clear();
  std::string line;
  bool any = false;
  while (true) {
    if (interactive) std::cout << (any ? ". " : "> ") << std::flush;
    if (!std::getline(std::cin, line)) return any;
    any = true;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file with CRLF line ends
    if (!line.empty() && line.back() == '\\') {
      line.back() = '\n';
      message += line;
      continue;
    }
    message += line;
    return true;
  }
}

std::string turn_stats(const RunResult& r, const Conversation& c) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << "[turn " << c.turns() << ": prefill "
    << r.stats.prompt_tokens << " tokens, time to first token "
    << r.stats.first_token_seconds * 1000 << " ms, generated " << r.stats.generated_tokens
    << " tokens at " << r.stats.decode_tokens_per_second() << " tok/s; cache " << c.cached_tokens()
    << "/" << c.capacity_tokens() << " tokens]";
  return s.str();
}

std::string cache_full_advice(const Conversation& c) {
  return "type /reset to start a new conversation, or run again with a larger cache, e.g. --set "
         "components.kv_cache.capacity_tokens=" +
         std::to_string(c.capacity_tokens() * 2);
}

}  // namespace

int cmd_chat(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")("system", po::value<std::string>(),
                                                 "system message for the chat template")(
      "stats",
      "after each answer, print its token counts, time to first token and speed on stderr");
  add_pipeline_options(opts);
  po::variables_map vm;
  if (!parse_command_line(
          "chat",
          "duet chat PIPELINE.yaml|MODEL.gguf [--system TEXT] [--stats] [--set key.path=value]...",
          opts, {"pipeline"}, args, vm)) {
    return 0;
  }
  std::vector<std::string> extra{"model.chat=true"};
  if (vm.count("system")) {
    require_utf8(vm["system"].as<std::string>(), "--system");
    extra.push_back("model.system=" + yaml_quoted(vm["system"].as<std::string>()));
  }
  PluginHost& host = cli_plugin_host();
  PipelineConfig config = load_pipeline(vm, host, extra);
  auto pipeline = Pipeline::build(config, host);
  const bool interactive = isatty(STDIN_FILENO) != 0;
  const bool stats = vm.count("stats") != 0;

  StdoutSink out;
  Conversation chat(*pipeline, out);
  if (interactive) {
    std::cerr << "duet chat on backend " << pipeline->check().backend << ", KV cache of "
              << chat.capacity_tokens() << " tokens; " << kHelp << ".\n";
  }
  std::string message;
  while (read_message(interactive, message)) {
    if (message == "/exit" || message == "/quit") break;
    if (message == "/reset") {
      chat.reset();
      std::cerr << "[new conversation]\n";
      continue;
    }
    if (message == "/help") {
      std::cerr << "[" << kHelp << "]\n";
      continue;
    }
    if (message.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    const int32_t turns_before = chat.turns();
    try {
      require_utf8(message, "this message");
      RunResult r = chat.say(message);
      std::cout << std::endl;
      if (stats) std::cerr << turn_stats(r, chat) << "\n";
      if (chat.full()) {
        std::cerr << "[the answer stopped because the KV cache is full (" << chat.capacity_tokens()
                  << " tokens); " << cache_full_advice(chat) << "]\n";
      }
    } catch (const ConversationFull& e) {
      std::cerr << "duet: the KV cache is full: " << e.what() << "\n"
                << "duet: " << cache_full_advice(chat) << "\n";
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInputRejected) throw;
      // An error from a turn that ran ends the conversation (Conversation::say).
      const bool ended = turns_before > 0 && chat.turns() == 0;
      std::cerr << "duet: " << e.what()
                << (ended ? "\n[the conversation ended with it: new conversation]\n"
                          : "; nothing was sent\n");
    }
  }
  return 0;
}

}  // namespace duet::cli
