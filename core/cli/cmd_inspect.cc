// duet inspect — a GGUF file's metadata and tensor table, or its chat template.
#include <iostream>

#include "cli_options.h"
#include "duet/app/chat_template.h"
#include "duet/app/gguf.h"
#include "duet/app/model_summary.h"
#include "duet/error.h"
#include "subcommands.h"

namespace duet::cli {

int cmd_inspect(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")("tensors,t", "also list every tensor")(
      "chat-template",
      "print only the model's chat template (tokenizer.chat_template), as stored, and on "
      "stderr the format Duet applies (its fallback when the file has none)");
  po::variables_map vm;
  if (!parse_command_line("inspect", "duet inspect MODEL.gguf [--tensors | --chat-template]", opts,
                          {"model"}, args, vm)) {
    return 0;
  }
  GgufFile file = GgufFile::open(vm["model"].as<std::string>());
  if (vm.count("chat-template")) {
    std::optional<std::string_view> text = file.find_string("tokenizer.chat_template");
    std::optional<ChatTemplate> format;
    try {
      format = ChatTemplate::from_model(file, "");
    } catch (const Error& e) {
      if (!text) {
        throw Error(ErrorKind::kModelFile,
                    file.path().string() +
                        ": the model has no chat template (no tokenizer.chat_template "
                        "string) and no format Duet knows fits its vocabulary; a pipeline can "
                        "name one with model.chat_template");
      }
      std::cerr << "duet: " << e.what() << "\n";
    }
    if (text) {
      std::cout << *text;
      if (!text->empty() && text->back() != '\n') std::cout << "\n";
    }
    if (format) {
      std::cerr << "duet applies: " << format->name() << " ("
                << (text ? "the model's tokenizer.chat_template, run as Jinja" : format->origin())
                << ")\n";
      const char* tools = "none (duet serve refuses tools with this template)";
      if (format->tool_syntax() == ChatTemplate::ToolSyntax::kHermes) {
        tools = "hermes (the template lists them; the model writes <tool_call> blocks)";
      } else if (format->tool_syntax() == ChatTemplate::ToolSyntax::kLlama3) {
        tools = "llama3 (the template lists them; the model answers {\"name\", \"parameters\"})";
      } else if (format->tool_syntax() == ChatTemplate::ToolSyntax::kJson) {
        tools = "json (Duet lists them in the system message; the model answers a JSON object)";
      }
      std::cerr << "tools: " << tools << "\n";
    }
    return 0;
  }
  print_model_summary(std::cout, file, vm.count("tensors") != 0);
  return 0;
}

}  // namespace duet::cli
