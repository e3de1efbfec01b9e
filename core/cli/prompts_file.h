// prompts_file.h — one line of a `duet run --prompts-file` JSONL file as a
// request: its prompt or chat messages and its own settings (see
// docs/batching.md for the format).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat_messages.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/scheduler.h"

namespace duet::cli {

struct PromptLine {
  int64_t line = 0;                   // 1-based line number in the file
  nlohmann::json id;                  // as given (string or integer), else the line number
  std::optional<std::string> prompt;  // exactly one of prompt and messages is set
  std::vector<serve::ChatMessage> messages;
  RequestSettings settings;
  std::string error;  // why the line is refused; empty when it is a request
};

// Reads line `line` (its text without the newline). Never throws for bad
// input: a line that is not a JSON object, a value of the wrong type, an
// unknown key (with the closest known one suggested), both or neither of
// prompt and messages, or a sampler setting for a link the pipeline's
// sampler `chain` lacks sets `error`, keeping the id when it could be read.
// `temperature`, `top_k`, `top_p` and `min_p` set the primary option of the
// chain's link of that name, under the key its YAML uses ("value" for the
// shorthand `- top_k: 40`, else the link's own name for it such as "k").
PromptLine read_prompt_line(std::string_view text, int64_t line,
                            const std::vector<SamplerLink>& chain);

}  // namespace duet::cli
