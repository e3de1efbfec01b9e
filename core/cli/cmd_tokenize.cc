// duet tokenize — the token ids and pieces of a text under a model's
// tokenizer, one token a line: "ID<TAB>PIECE", the piece escaped so that
// every token is one visible line.
#include <cstdio>
#include <iostream>

#include "duet/app/gguf.h"
#include "duet/error.h"
#include "duet/tokenizer.h"
#include "json_writer.h"
#include "prompt_input.h"
#include "subcommands.h"

namespace duet::cli {
namespace {

// The piece as C-like text: \n, \t, \r, \\ and \xNN for other control bytes
// (bytes of multi-byte UTF-8 characters are kept; a piece may hold part of
// one, which the terminal shows as it can).
std::string escaped(std::string_view piece) {
  std::string out;
  for (char ch : piece) {
    const auto b = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\\') {
      out += "\\\\";
    } else if (b < 0x20 || b == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(b));
      out += hex;
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help");
  add_prompt_options(opts, "");
  opts.add_options()("parse-special",
                     "parse control tokens such as <|im_start|> written in the text")(
      "no-bos", "leave out the beginning-of-sequence token the model asks for")(
      "ids", "print only the ids, as one JSON array")(
      "json", "print one JSON array of {id, piece} objects");
  po::variables_map vm;
  if (!parse_command_line(
          "tokenize",
          "duet tokenize MODEL.gguf (--prompt TEXT | --prompt - | --prompt-file FILE) "
          "[--parse-special] [--no-bos] [--ids | --json]",
          opts, {"model"}, args, vm)) {
    return 0;
  }
  if (vm.count("ids") && vm.count("json")) {
    throw Error(ErrorKind::kUsage, "--ids and --json both given; pass one of them");
  }
  const std::string text = read_prompt(vm);
  const GgufFile file = GgufFile::open(vm["model"].as<std::string>());
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(file);
  std::vector<int32_t> ids;
  if (!vm.count("no-bos") && tokenizer->add_bos() && tokenizer->bos_id())
    ids.push_back(*tokenizer->bos_id());
  const std::vector<int32_t> text_ids = tokenizer->encode(text, vm.count("parse-special") != 0);
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());

  if (vm.count("ids") || vm.count("json")) {
    JsonWriter j;
    j.begin_array();
    for (int32_t id : ids) {
      if (vm.count("ids")) {
        j.value(id);
        continue;
      }
      j.begin_object();
      j.field("id", id);
      j.field("piece", tokenizer->piece(id));
      j.end_object();
    }
    j.end_array();
    std::cout << j.str() << "\n";
    return 0;
  }
  for (int32_t id : ids) std::cout << id << "\t" << escaped(tokenizer->piece(id)) << "\n";
  std::cerr << ids.size() << " tokens\n";
  return 0;
}

}  // namespace duet::cli
