#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

#include "duet/app/chat_template.h"
#include "duet/app/gguf.h"
#include "duet/app/pipeline_config.h"
#include "duet/error.h"

namespace duet {

bool is_model_path(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".gguf";
}

std::string default_pipeline_yaml(const std::filesystem::path& model) {
  const GgufFile file = GgufFile::open(model);
  const std::string arch(file.find_string("general.architecture").value_or(""));
  const uint64_t context = file.find_uint(arch + ".context_length").value_or(2048);
  const uint64_t capacity = std::clamp<uint64_t>(context, 1, 4096);
  // Blocks of 16 slots, so that the batching scheduler (duet serve, run
  // --prompts-file, bench --batch) gives each sequence blocks of its own; a
  // cache of one block would refuse them. A capacity that is not a multiple
  // of 16 (a context that short) stays one block.
  constexpr uint64_t kBlockTokens = 16;
  const std::string blocks =
      capacity % kBlockTokens == 0 ? ", block_tokens: " + std::to_string(kBlockTokens) : "";
  // Chat when the file has a template Duet can apply (ChatTemplate); a file
  // of another family gets raw prompts.
  bool chat = false;
  if (file.find("tokenizer.chat_template") != nullptr) {
    try {
      ChatTemplate::from_model(file, "");
      chat = true;
    } catch (const Error&) {
    }
  }
  return "# The default pipeline for " + model.filename().string() +
         " (duet run MODEL.gguf): the fastest\n"
         "# backend that loads, greedy decoding until the model's end-of-generation token.\n"
         "model:\n"
         "  path: " +
         yaml_quoted(std::filesystem::absolute(model).lexically_normal().string()) +
         "\n"
         "  chat: " +
         (chat ? "true" : "false") +
         "\n"
         "backend:\n"
         "  plugin: [cuda, onednn, reference]\n"
         "components:\n"
         "  kv_cache: {capacity_tokens: " +
         std::to_string(capacity) + blocks +
         ", dtype: f16}\n"
         "  sampler: {seed: 42, chain: [greedy]}\n"
         "stages:\n"
         "  - prefill: {chunk_tokens: 512}\n"
         "  - decode: {max_new_tokens: 256}\n";
}

}  // namespace duet
