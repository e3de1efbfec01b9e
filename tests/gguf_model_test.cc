// Reads the real models (label: model): SmolLM2-135M-Instruct Q4_1, and
// every tensor of it and of Gemma 3 270M Q4_K_M against gguf-py. The files
// are not in git: a missing file fails the test with the command that
// fetches it.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/app/model_summary.h"
#include "duet/quant.h"
#include "model_files.h"

namespace duet {
namespace {

using testing::model_path;

class GgufSmolLM2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::filesystem::path path = model_path();
    if (!std::filesystem::exists(path)) {
      missing_ = testing::missing_model_message(path);
      return;
    }
    file_.emplace(GgufFile::open(path));
  }
  static void TearDownTestSuite() { file_.reset(); }
  void SetUp() override { ASSERT_TRUE(file_.has_value()) << missing_; }

  static const GgufFile& model() { return *file_; }

 private:
  static inline std::optional<GgufFile> file_;
  static inline std::string missing_;
};

TEST_F(GgufSmolLM2, Header) {
  EXPECT_EQ(model().version(), 3u);
  EXPECT_EQ(model().alignment(), 32u);
  EXPECT_EQ(model().file_size(), std::filesystem::file_size(model_path()));
  EXPECT_EQ(model().data_offset() % model().alignment(), 0u);
}

TEST_F(GgufSmolLM2, Hyperparameters) {
  const GgufFile& f = model();
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 30u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 576u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 9u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(f.get_uint("llama.context_length"), 8192u);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 100000.0);
  EXPECT_NEAR(f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
}

TEST_F(GgufSmolLM2, Tokenizer) {
  const GgufFile& f = model();
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  const std::vector<std::string_view> tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 49152u);
  EXPECT_EQ(tokens[f.get_uint("tokenizer.ggml.bos_token_id")], "<|im_start|>");
  EXPECT_EQ(tokens[f.get_uint("tokenizer.ggml.eos_token_id")], "<|im_end|>");
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type").size(), 49152u);
  EXPECT_EQ(f.find("tokenizer.ggml.merges")->as_array()->size(), 48900u);
  EXPECT_TRUE(f.find_string("tokenizer.chat_template").has_value());
}

TEST_F(GgufSmolLM2, TensorTable) {
  const GgufFile& f = model();
  const GgufTensorInfo& embd = f.tensor("token_embd.weight");
  EXPECT_EQ(embd.shape, (Shape{49152, 576}));
  EXPECT_EQ(f.tensor("output_norm.weight").shape, (Shape{576}));

  const char* const per_layer[] = {
      "attn_norm.weight", "attn_q.weight",      "attn_k.weight",
      "attn_v.weight",    "attn_output.weight", "ffn_norm.weight",
      "ffn_gate.weight",  "ffn_up.weight",      "ffn_down.weight",
  };
  for (int layer = 0; layer < 30; ++layer) {
    for (const char* suffix : per_layer) {
      const std::string name = "blk." + std::to_string(layer) + "." + suffix;
      EXPECT_NE(f.find_tensor(name), nullptr) << name;
    }
  }
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").shape, (Shape{576, 576}));
  EXPECT_EQ(f.tensor("blk.0.attn_k.weight").shape, (Shape{192, 576}));  // 3 kv heads of 64
  EXPECT_EQ(f.tensor("blk.29.ffn_down.weight").shape, (Shape{576, 1536}));
  EXPECT_EQ(f.find_tensor("blk.30.attn_q.weight"), nullptr);

  const std::set<std::string> expected_types = {"q4_1", "q8_0", "f32"};
  for (const GgufTensorInfo& t : f.tensors()) {
    EXPECT_TRUE(t.supported()) << t.name << " " << t.type_name();
    EXPECT_TRUE(expected_types.count(t.type_name())) << t.name << " " << t.type_name();
    EXPECT_LE(t.offset + t.bytes, f.file_size()) << t.name;
  }
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").dtype, DType::kQ4_1);
  EXPECT_EQ(f.tensor("blk.0.attn_norm.weight").dtype, DType::kF32);
}

TEST_F(GgufSmolLM2, Summary) {
  std::ostringstream out;
  print_model_summary(out, model(), true);
  const std::string s = out.str();
  const auto has = [&](std::string_view text) { return s.find(text) != std::string::npos; };
  EXPECT_TRUE(has("architecture     llama")) << s;
  EXPECT_TRUE(has("block_count                        30")) << s;
  EXPECT_TRUE(has("rope.freq_base                     100000")) << s;
  EXPECT_TRUE(has("bos token        1 '<|im_start|>'")) << s;
  EXPECT_TRUE(has("q4_1                   210 tensors")) << s;
  EXPECT_TRUE(has("tensors (shape is outermost first)")) << s;
  EXPECT_TRUE(has("token_embd.weight")) << s;
}

// ---- every tensor against gguf-py ---------------------------------------------

// tests/tensor_checksums.py's checksum of a tensor's f32 values: the sum of
// bits(x_i) * (2 i + 1) over its elements, modulo 2^64.
uint64_t dequantized_checksum(const GgufTensorInfo& t) {
  const int64_t cols = t.shape.innermost();
  const int64_t rows = t.shape.rows();
  const uint64_t row_bytes = *dtype_row_bytes(*t.dtype, static_cast<uint64_t>(cols));
  std::vector<float> row(static_cast<size_t>(cols));
  uint64_t sum = 0;
  uint64_t i = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(*t.dtype, static_cast<const uint8_t*>(t.data()) + r * row_bytes, row.data(),
                   cols);
    for (float v : row) sum += uint64_t{std::bit_cast<uint32_t>(v)} * (2 * i++ + 1);
  }
  return sum;
}

// Every tensor of each real file dequantizes to gguf-py's values, bit for
// bit: the checksums the fixture test tensor_checksums wrote.
TEST(GgufRealFiles, EveryTensorDequantizesAsGgufPyDoes) {
  const std::filesystem::path sums =
      std::filesystem::path(DUET_BUILD_DIR) / "tensor_checksums.json";
  std::ifstream in(sums);
  ASSERT_TRUE(in) << sums << " is missing: run ctest, whose fixture tensor_checksums writes it";
  const nlohmann::json expected = nlohmann::json::parse(in);
  std::set<std::string> types;
  for (const std::filesystem::path& path : {testing::model_path(), testing::gemma_path()}) {
    ASSERT_TRUE(std::filesystem::exists(path)) << testing::missing_model_message(path);
    const GgufFile file = GgufFile::open(path);
    const nlohmann::json& want = expected.at(path.filename().string());
    ASSERT_EQ(want.size(), file.tensors().size()) << path;
    for (const GgufTensorInfo& t : file.tensors()) {
      const nlohmann::json& w = want.at(std::string(t.name));
      ASSERT_TRUE(t.supported()) << path.filename() << ": " << t.name << " " << t.type_name();
      EXPECT_EQ(t.type_name(), w[0].get<std::string>()) << t.name;
      EXPECT_EQ(t.shape.elements(), w[1].get<int64_t>()) << t.name;
      EXPECT_EQ(std::to_string(dequantized_checksum(t)), w[2].get<std::string>())
          << path.filename() << ": " << t.name << " (" << t.type_name() << ")";
      types.insert(t.type_name());
    }
  }
  EXPECT_EQ(types, (std::set<std::string>{"f32", "q4_1", "q4_k", "q5_0", "q6_k", "q8_0"}));
}

}  // namespace
}  // namespace duet
