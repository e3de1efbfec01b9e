#include "prompt_input.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "duet/app/utf8.h"
#include "duet/error.h"

namespace duet::cli {
namespace {

// Reads at most kMaxPromptBytes + 1 bytes of `in`.
std::string read_bounded(std::istream& in, const std::string& what) {
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxPromptBytes) {
      throw Error(ErrorKind::kInputRejected, what + " is larger than the limit of " +
                                                 std::to_string(kMaxPromptBytes >> 20) +
                                                 " MiB; give a shorter prompt");
    }
  }
  if (in.bad()) throw Error(ErrorKind::kUsage, what + ": read error");
  return text;
}

}  // namespace

void add_prompt_options(po::options_description& opts, const std::string& default_prompt) {
  auto prompt = po::value<std::string>();
  if (!default_prompt.empty()) prompt->default_value(default_prompt);
  opts.add_options()("prompt,p", prompt, "the prompt text; '-' reads it from standard input")(
      "prompt-file,f", po::value<std::string>(), "read the prompt from this file");
}

void require_utf8(std::string_view text, const std::string& what) {
  if (auto at = invalid_utf8_at(text)) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x",
                  static_cast<unsigned>(static_cast<unsigned char>(text[*at])));
    throw Error(ErrorKind::kInputRejected,
                what + " is not valid UTF-8: byte " + std::to_string(*at) + " (" + hex +
                    ") does not start a well-formed character; convert the text to "
                    "UTF-8 (e.g. iconv -t UTF-8)");
  }
}

std::string read_prompt(const po::variables_map& vm) {
  const bool from_file = vm.count("prompt-file") != 0;
  if (from_file && vm.count("prompt") && !vm["prompt"].defaulted()) {
    throw Error(ErrorKind::kUsage, "--prompt and --prompt-file both given; pass one of them");
  }
  std::string text, what;
  if (from_file) {
    const std::string path = vm["prompt-file"].as<std::string>();
    what = "--prompt-file " + path;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::kUsage, what + ": cannot open the file; check the path");
    text = read_bounded(in, what);
  } else if (vm.count("prompt") && vm["prompt"].as<std::string>() == "-") {
    what = "the prompt on standard input (--prompt -)";
    text = read_bounded(std::cin, what);
  } else if (vm.count("prompt")) {
    what = "--prompt";
    text = vm["prompt"].as<std::string>();
  } else {
    throw Error(ErrorKind::kUsage,
                "no prompt given; pass --prompt TEXT, --prompt - or --prompt-file FILE");
  }
  require_utf8(text, what);
  return text;
}

}  // namespace duet::cli
