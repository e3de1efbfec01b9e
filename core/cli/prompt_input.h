// prompt_input.h — where a command's text comes from: --prompt TEXT,
// --prompt - (standard input) or --prompt-file FILE, always checked to be
// UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cli_options.h"

namespace duet::cli {

// Prompts larger than this are refused before they are read whole.
inline constexpr uint64_t kMaxPromptBytes = 16u << 20;

// Adds --prompt (with `default_prompt` when not empty) and --prompt-file.
void add_prompt_options(po::options_description& opts, const std::string& default_prompt);

// The prompt the options name. Throws duet::Error(kUsage) when both are
// given or the file cannot be read, and kInputRejected (exit 6) when the
// text is not valid UTF-8 or larger than kMaxPromptBytes.
std::string read_prompt(const po::variables_map& vm);

// Throws duet::Error(kInputRejected) naming `what`, the offset and the byte
// when `text` is not valid UTF-8.
void require_utf8(std::string_view text, const std::string& what);

}  // namespace duet::cli
