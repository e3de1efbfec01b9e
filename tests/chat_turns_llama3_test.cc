// Two-turn chats on a tiny Llama-3-style file (tests/tiny_model.h, chat
// "llama3") whose template is Meta-Llama-3-8B-Instruct's, run as Jinja by
// Duet and recognised as "llama3" by llama.cpp (chat_turns.h says what is
// compared). Its weights are random, so its answers are made empty
// (<|eot_id|> first, by a logit bias). Needs no downloaded model: a unit
// test, so it also runs under the sanitizers.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "chat_turns.h"
#include "duet/app/pipeline.h"
#include "duet/app/pipeline_config.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using testing::check_two_turns;
using testing::expected;
using testing::Expected;

TEST(ChatTurns, ALlama3StyleFileTwoTurnsEqualLlamaCppsLlama3Template) {
  const fs::path dir = fs::path(DUET_BUILD_DIR) / "chat_turns";
  fs::create_directories(dir);
  testing::TinyLlama shape;
  shape.chat = "llama3";
  testing::write_tiny_llama(dir / "llama3.gguf", shape);  // the fixture script reads it too
  const Expected want = expected("llama3");
  const std::string yaml =
      "model: {path: llama3.gguf, chat: true}\n"
      "backend: {plugin: reference}\n"
      "components:\n"
      "  kv_cache: {capacity_tokens: 256}\n"
      "  sampler: {seed: 1, chain: [{logit_bias: {\"4\": 100}}, greedy]}\n"
      "stages:\n"
      "  - prefill: {}\n"
      "  - decode: {max_new_tokens: " +
      std::to_string(want.max_new_tokens) + "}\n";
  PipelineConfig config = parse_pipeline_config(yaml, "llama3.yaml", dir, {});
  check_two_turns(std::move(config), want);
}

}  // namespace
}  // namespace duet
