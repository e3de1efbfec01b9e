// Two-turn chats on Gemma 3 270M Q4_K_M, the real file, which has no
// template: Duet's built-in Gemma format against llama.cpp's built-in
// "gemma" (chat_turns.h says what is compared). The first answer is greedy
// and must equal llama.cpp's greedy answer on the file.
#include "chat_turns.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "duet/app/pipeline.h"
#include "duet/app/pipeline_config.h"
#include "model_files.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using testing::check_two_turns;
using testing::expected;
using testing::Expected;

TEST(ChatTurns, Gemma3TwoTurnsEqualLlamaCppsGemmaTemplate) {
  const fs::path model = testing::gemma_path();
  ASSERT_TRUE(fs::exists(model)) << testing::missing_model_message(model);
  const Expected want = expected("gemma3");
  PipelineConfig config = parse_pipeline_config(
      default_pipeline_yaml(model), "default pipeline", "",
      {"model.chat=true", "backend.plugin=onednn", "backend.options.threads=2",
       "stages.1.decode.max_new_tokens=" + std::to_string(want.max_new_tokens)});
  check_two_turns(std::move(config), want);
}

}  // namespace
}  // namespace duet
