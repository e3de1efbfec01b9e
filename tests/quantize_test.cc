// duet/app/quantize.h: llama-quantize's recipe (which type each tensor gets)
// and the files quantize_model writes. That the bytes equal llama.cpp's on a
// real model is checked by bench/quantize_vs_llama_cpp.py (it needs
// llama-cpp-python); the block quantizers themselves by quant_test.
#include "duet/app/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "duet/error.h"
#include "duet/quant.h"
#include "tiny_model.h"

namespace duet {
namespace {

using testing::make_temp_dir;

class Quantize : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("quantize"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A Llama-shaped f32 file: `layers` layers of width `embd` (ffn 2*embd),
  // an output matrix unless tied, random weights; `heads` query heads per
  // KV head when given (2 KV heads).
  std::filesystem::path llama_file(int layers, int embd, bool tied,
                                   const std::string& name = "in.gguf", int heads = 0) {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_uint32("llama.block_count", static_cast<uint32_t>(layers));
    if (heads > 0) {
      w.set_uint32("llama.attention.head_count", static_cast<uint32_t>(2 * heads));
      w.set_uint32("llama.attention.head_count_kv", 2);
    }
    w.set_float32("llama.rope.freq_base", 10000.0f);
    w.set_string_array("tokenizer.ggml.tokens", std::vector<std::string>{"a", "b"});
    w.set_alignment(64);
    auto add = [&](const std::string& n, const Shape& shape) {
      std::vector<float> data(static_cast<size_t>(shape.elements()));
      for (float& v : data) v = dist_(rng_);
      w.add_tensor(n, DType::kF32, shape, data.data(), data.size() * sizeof(float));
    };
    add("token_embd.weight", Shape{64, embd});
    add("output_norm.weight", Shape{embd});
    if (!tied) add("output.weight", Shape{64, embd});
    for (int l = 0; l < layers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      add(b + "attn_norm.weight", Shape{embd});
      add(b + "attn_q.weight", Shape{embd, embd});
      add(b + "attn_k.weight", Shape{embd / 2, embd});
      add(b + "attn_v.weight", Shape{embd / 2, embd});
      add(b + "attn_output.weight", Shape{embd, embd});
      add(b + "ffn_norm.weight", Shape{embd});
      add(b + "ffn_gate.weight", Shape{2 * embd, embd});
      add(b + "ffn_up.weight", Shape{2 * embd, embd});
      add(b + "ffn_down.weight", Shape{embd, 2 * embd});
    }
    const std::filesystem::path path = dir_ / name;
    w.write(path);
    return path;
  }

  static std::map<std::string, TensorPlan> by_name(const std::vector<TensorPlan>& plan) {
    std::map<std::string, TensorPlan> out;
    for (const TensorPlan& p : plan) out[p.name] = p;
    return out;
  }

  std::filesystem::path dir_;
  std::mt19937 rng_{3};
  std::uniform_real_distribution<float> dist_{-0.1f, 0.1f};
};

TEST_F(Quantize, FileTypeNamesRoundTripAndIgnoreCase) {
  for (FileType t : file_types()) EXPECT_EQ(file_type_from_name(file_type_name(t)), t);
  EXPECT_EQ(file_type_from_name("Q4_K_M"), FileType::kQ4_K_M);
  EXPECT_EQ(file_type_from_name("q4_k"), std::nullopt);  // llama-quantize has no plain q4_k
  EXPECT_EQ(file_type_from_name("q3_k"), std::nullopt);
  EXPECT_EQ(file_type_from_name("Q3_K_M"), FileType::kQ3_K_M);
  EXPECT_EQ(static_cast<uint32_t>(FileType::kQ4_K_M), 15u);  // llama.cpp's general.file_type
  EXPECT_EQ(static_cast<uint32_t>(FileType::kQ2_K), 10u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::kQ3_K_L), 13u);
}

// llama-quantize's q4_k_m on 16 layers: attn_v and ffn_down get q6_k in the
// "more bits" layers (first and last eighth, every third between:
// 0 1 4 7 10 13 14 15), the output matrix q6_k, everything else q4_k;
// norms stay f32.
TEST_F(Quantize, Q4KMGivesMoreBitsToTheLayersLlamaQuantizeChooses) {
  const GgufFile in = GgufFile::open(llama_file(16, 256, /*tied=*/false));
  const auto plan = by_name(plan_quantization(in, FileType::kQ4_K_M));
  const std::set<int> more = {0, 1, 4, 7, 10, 13, 14, 15};
  for (int l = 0; l < 16; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const DType rich = more.count(l) ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(plan.at(b + "attn_v.weight").to, rich) << l;
    EXPECT_EQ(plan.at(b + "ffn_down.weight").to, rich) << l;
    EXPECT_EQ(plan.at(b + "attn_q.weight").to, DType::kQ4_K) << l;
    EXPECT_EQ(plan.at(b + "ffn_up.weight").to, DType::kQ4_K) << l;
    EXPECT_FALSE(plan.at(b + "attn_norm.weight").converted) << l;
    EXPECT_EQ(plan.at(b + "attn_norm.weight").to, DType::kF32) << l;
  }
  EXPECT_EQ(plan.at("output.weight").to, DType::kQ6_K);
  EXPECT_EQ(plan.at("token_embd.weight").to, DType::kQ4_K);  // not tied: the base type
  for (const auto& [name, p] : plan) EXPECT_FALSE(p.fallback) << name;
}

TEST_F(Quantize, OtherRecipesFollowLlamaQuantize) {
  const GgufFile in = GgufFile::open(llama_file(16, 256, /*tied=*/true));
  auto q4ks = by_name(plan_quantization(in, FileType::kQ4_K_S));
  // q4_k_s: attn_v of the first four layers and ffn_down of the first
  // eighth get q5_k; tied embeddings are the output matrix: q6_k.
  for (int l = 0; l < 16; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(q4ks.at(b + "attn_v.weight").to, l < 4 ? DType::kQ5_K : DType::kQ4_K) << l;
    EXPECT_EQ(q4ks.at(b + "ffn_down.weight").to, l < 2 ? DType::kQ5_K : DType::kQ4_K) << l;
  }
  EXPECT_EQ(q4ks.at("token_embd.weight").to, DType::kQ6_K);
  auto q8 = by_name(plan_quantization(in, FileType::kQ8_0));
  EXPECT_EQ(q8.at("token_embd.weight").to, DType::kQ8_0);  // q8_0 keeps its output q8_0
  auto q4 = by_name(plan_quantization(in, FileType::kQ4_0));
  EXPECT_EQ(q4.at("token_embd.weight").to, DType::kQ6_K);
  EXPECT_EQ(q4.at("blk.3.ffn_down.weight").to, DType::kQ4_0);
  auto f16 = by_name(plan_quantization(in, FileType::kF16));
  EXPECT_EQ(f16.at("token_embd.weight").to, DType::kF16);  // no recipe for float types
  EXPECT_EQ(f16.at("blk.0.attn_v.weight").to, DType::kF16);
  EXPECT_EQ(f16.at("blk.0.ffn_norm.weight").to, DType::kF32);
}

// The 2- and 3-bit recipes (llama-quantize's, dense models): q2_k gives
// attn_v q4_k where four or more query heads share a KV head, else q3_k, and
// ffn_down and attn_output q3_k; q3_k_m gives attn_v of the first two layers
// q5_k (then q4_k), ffn_down of the first sixteenth q5_k (then q4_k),
// attn_output q4_k; q3_k_l gives all three q5_k; q3_k_s none. The output
// matrix is q6_k in each.
TEST_F(Quantize, TwoAndThreeBitRecipesFollowLlamaQuantize) {
  const GgufFile gqa4 = GgufFile::open(llama_file(16, 256, /*tied=*/false, "gqa4.gguf", 4));
  const GgufFile gqa2 = GgufFile::open(llama_file(16, 256, /*tied=*/false, "gqa2.gguf", 2));
  const auto q2 = by_name(plan_quantization(gqa4, FileType::kQ2_K));
  const auto q2_narrow = by_name(plan_quantization(gqa2, FileType::kQ2_K));
  const auto q3s = by_name(plan_quantization(gqa4, FileType::kQ3_K_S));
  const auto q3m = by_name(plan_quantization(gqa4, FileType::kQ3_K_M));
  const auto q3l = by_name(plan_quantization(gqa4, FileType::kQ3_K_L));
  for (int l = 0; l < 16; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(q2.at(b + "attn_v.weight").to, DType::kQ4_K) << l;
    EXPECT_EQ(q2_narrow.at(b + "attn_v.weight").to, DType::kQ3_K) << l;
    EXPECT_EQ(q2.at(b + "ffn_down.weight").to, DType::kQ3_K) << l;
    EXPECT_EQ(q2.at(b + "attn_output.weight").to, DType::kQ3_K) << l;
    EXPECT_EQ(q2.at(b + "attn_q.weight").to, DType::kQ2_K) << l;
    EXPECT_EQ(q2.at(b + "ffn_up.weight").to, DType::kQ2_K) << l;
    for (const char* t : {"attn_v", "ffn_down", "attn_output", "attn_q", "ffn_gate"}) {
      EXPECT_EQ(q3s.at(b + t + ".weight").to, DType::kQ3_K) << l << t;
    }
    EXPECT_EQ(q3m.at(b + "attn_q.weight").to, DType::kQ3_K) << l;
    EXPECT_EQ(q3l.at(b + "ffn_up.weight").to, DType::kQ3_K) << l;
    EXPECT_EQ(q3m.at(b + "attn_v.weight").to, l < 2 ? DType::kQ5_K : DType::kQ4_K) << l;
    EXPECT_EQ(q3m.at(b + "ffn_down.weight").to, l < 1 ? DType::kQ5_K : DType::kQ4_K) << l;
    EXPECT_EQ(q3m.at(b + "attn_output.weight").to, DType::kQ4_K) << l;
    EXPECT_EQ(q3l.at(b + "attn_v.weight").to, DType::kQ5_K) << l;
    EXPECT_EQ(q3l.at(b + "ffn_down.weight").to, DType::kQ5_K) << l;
    EXPECT_EQ(q3l.at(b + "attn_output.weight").to, DType::kQ5_K) << l;
  }
  for (const auto* plan : {&q2, &q3s, &q3m, &q3l}) {
    EXPECT_EQ(plan->at("output.weight").to, DType::kQ6_K);
    EXPECT_EQ(plan->at("token_embd.weight").to, plan == &q2 ? DType::kQ2_K : DType::kQ3_K);
  }
}

// attn_qkv (fused projections) takes attn_v's rule and counter; a 70B-type
// model (80 llama layers with grouped KV heads) gets q5_k where attn_v would
// get q3_k or q4_k.
TEST_F(Quantize, FusedQkvAndSeventyBFollowTheAttnVRule) {
  {
    GgufWriter w;
    w.set_string("general.architecture", "phi3");
    w.set_uint32("phi3.block_count", 4);
    std::vector<float> data(256 * 768, 0.25f);
    for (int l = 0; l < 4; ++l) {
      w.add_tensor("blk." + std::to_string(l) + ".attn_qkv.weight", DType::kF32, Shape({768, 256}),
                   data.data(), data.size() * 4);
    }
    w.write(dir_ / "qkv.gguf");
    const GgufFile in = GgufFile::open(dir_ / "qkv.gguf");
    const auto q3m = by_name(plan_quantization(in, FileType::kQ3_K_M));
    const auto q4ks = by_name(plan_quantization(in, FileType::kQ4_K_S));
    for (int l = 0; l < 4; ++l) {
      const std::string n = "blk." + std::to_string(l) + ".attn_qkv.weight";
      EXPECT_EQ(q3m.at(n).to, l < 2 ? DType::kQ5_K : DType::kQ4_K) << l;
      EXPECT_EQ(q4ks.at(n).to, DType::kQ5_K) << l;  // the first four
    }
  }
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 80);
  w.set_uint32("llama.attention.head_count", 64);
  w.set_uint32("llama.attention.head_count_kv", 8);
  std::vector<float> data(256 * 256, 0.25f);
  w.add_tensor("blk.0.attn_v.weight", DType::kF32, Shape({256, 256}), data.data(), data.size() * 4);
  w.add_tensor("blk.0.attn_q.weight", DType::kF32, Shape({256, 256}), data.data(), data.size() * 4);
  w.write(dir_ / "70b.gguf");
  const GgufFile in = GgufFile::open(dir_ / "70b.gguf");
  EXPECT_EQ(by_name(plan_quantization(in, FileType::kQ2_K)).at("blk.0.attn_v.weight").to,
            DType::kQ5_K);
  EXPECT_EQ(by_name(plan_quantization(in, FileType::kQ3_K_S)).at("blk.0.attn_v.weight").to,
            DType::kQ5_K);
  EXPECT_EQ(by_name(plan_quantization(in, FileType::kQ3_K_S)).at("blk.0.attn_q.weight").to,
            DType::kQ3_K);
  EXPECT_EQ(by_name(plan_quantization(in, FileType::kQ4_K_M)).at("blk.0.attn_v.weight").to,
            DType::kQ6_K);  // more bits already: q6_k stays
}

// iq4_nl (llama-quantize's IQ4_NL, file type 25): attn_v q5_k where four or
// more query heads share a KV head, ffn_down of the first eighth q5_k, the
// output matrix q6_k, everything else iq4_nl.
TEST_F(Quantize, Iq4NlRecipeFollowsLlamaQuantize) {
  const GgufFile gqa4 = GgufFile::open(llama_file(16, 256, /*tied=*/false, "gqa4.gguf", 4));
  const GgufFile gqa2 = GgufFile::open(llama_file(16, 256, /*tied=*/false, "gqa2.gguf", 2));
  const auto wide = by_name(plan_quantization(gqa4, FileType::kIQ4_NL));
  const auto narrow = by_name(plan_quantization(gqa2, FileType::kIQ4_NL));
  for (int l = 0; l < 16; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(wide.at(b + "attn_v.weight").to, DType::kQ5_K) << l;
    EXPECT_EQ(narrow.at(b + "attn_v.weight").to, DType::kIQ4_NL) << l;
    EXPECT_EQ(wide.at(b + "ffn_down.weight").to, l < 2 ? DType::kQ5_K : DType::kIQ4_NL) << l;
    EXPECT_EQ(wide.at(b + "attn_q.weight").to, DType::kIQ4_NL) << l;
  }
  EXPECT_EQ(wide.at("output.weight").to, DType::kQ6_K);
  EXPECT_EQ(wide.at("token_embd.weight").to, DType::kIQ4_NL);
  EXPECT_EQ(file_type_from_name("IQ4_NL"), FileType::kIQ4_NL);
}

// q2_k and q3_k rows that are not whole super-blocks fall back to q4_0, as
// today's llama-quantize does (b4747 wrote iq4_nl).
TEST_F(Quantize, TwoAndThreeBitRowsThatAreNotWholeSuperBlocksFallBackToQ4_0) {
  const GgufFile in = GgufFile::open(llama_file(2, 576, /*tied=*/true, "in.gguf", 3));
  const auto q2 = by_name(plan_quantization(in, FileType::kQ2_K));
  EXPECT_EQ(q2.at("blk.0.attn_q.weight").to, DType::kQ4_0);
  EXPECT_TRUE(q2.at("blk.0.attn_q.weight").fallback);
  EXPECT_EQ(q2.at("blk.0.ffn_down.weight").to, DType::kQ4_0);  // q3_k's fallback
  EXPECT_EQ(q2.at("token_embd.weight").to, DType::kQ8_0);      // the tied output matrix
  const auto q3m = by_name(plan_quantization(in, FileType::kQ3_K_M));
  EXPECT_EQ(q3m.at("blk.1.attn_output.weight").to, DType::kQ5_0);  // q4_k's fallback
  EXPECT_EQ(q3m.at("blk.1.ffn_up.weight").to, DType::kQ4_0);
  EXPECT_EQ(type_for_rows(DType::kQ3_K, 576), DType::kQ4_0);
  EXPECT_EQ(type_for_rows(DType::kQ2_K, 48), DType::kF16);  // not even 32 divides 48
  EXPECT_EQ(type_for_rows(DType::kQ3_K, 512), DType::kQ3_K);
}

// SmolLM2's width, 576, is not a multiple of 256: q4_k falls back to q5_0,
// q6_k to q8_0, and the tied output matrix goes straight to q8_0, as
// llama-quantize does; ffn_down (rows of 1152 = 4.5 super-blocks) too.
TEST_F(Quantize, RowsThatAreNotWholeSuperBlocksFallBack) {
  const GgufFile in = GgufFile::open(llama_file(8, 576, /*tied=*/true));
  const auto plan = by_name(plan_quantization(in, FileType::kQ4_K_M));
  EXPECT_EQ(plan.at("token_embd.weight").to, DType::kQ8_0);
  EXPECT_FALSE(plan.at("token_embd.weight").fallback);
  EXPECT_EQ(plan.at("blk.2.attn_q.weight").to, DType::kQ5_0);
  EXPECT_TRUE(plan.at("blk.2.attn_q.weight").fallback);
  EXPECT_EQ(plan.at("blk.0.attn_v.weight").to, DType::kQ8_0);  // q6_k's fallback
  EXPECT_EQ(plan.at("blk.2.attn_v.weight").to, DType::kQ5_0);
  EXPECT_EQ(plan.at("blk.0.ffn_down.weight").to, DType::kQ8_0);
  const auto q5km = by_name(plan_quantization(in, FileType::kQ5_K_M));
  EXPECT_EQ(q5km.at("blk.2.attn_q.weight").to, DType::kQ5_1);  // q5_k's fallback
}

// Rows that no block of the recipe's type (or its fallback) divides are
// stored as f16, as llama-quantize stores them.
TEST_F(Quantize, RowsThatFitNoBlockBecomeF16) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<float> data(40 * 8, 0.5f);
  w.add_tensor("blk.0.attn_q.weight", DType::kF32, Shape({8, 40}), data.data(), data.size() * 4);
  w.write(dir_ / "odd.gguf");
  const GgufFile in = GgufFile::open(dir_ / "odd.gguf");
  for (FileType t : {FileType::kQ8_0, FileType::kQ4_0, FileType::kQ4_K_M, FileType::kQ2_K}) {
    const TensorPlan p = plan_quantization(in, t)[0];
    EXPECT_EQ(p.to, DType::kF16) << file_type_name(t);
    EXPECT_TRUE(p.fallback) << file_type_name(t);
  }
  EXPECT_EQ(type_for_rows(DType::kQ8_0, 40), DType::kF16);
  EXPECT_EQ(type_for_rows(DType::kQ8_0, 64), DType::kQ8_0);
}

// The written file: metadata copied with its types, llama-quantize's two
// keys, each tensor's bytes as quantize_row makes them from the input.
TEST_F(Quantize, WritesTheRecipeAndCopiesEverythingElse) {
  const GgufFile in = GgufFile::open(llama_file(4, 256, /*tied=*/false));
  QuantizeOptions o;
  o.type = FileType::kQ4_K_M;
  o.threads = 3;
  int seen = 0;
  o.on_tensor = [&](const TensorPlan&) { ++seen; };
  const QuantizeResult r = quantize_model(in, dir_ / "out.gguf", o);
  EXPECT_EQ(seen, static_cast<int>(in.tensors().size()));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out.gguf.partial"));
  const GgufFile out = GgufFile::open(dir_ / "out.gguf");
  EXPECT_EQ(out.get_uint("general.file_type"), 15u);
  EXPECT_EQ(out.get_uint("general.quantization_version"), 2u);
  EXPECT_EQ(out.alignment(), 64u);
  EXPECT_EQ(out.find("llama.rope.freq_base")->type(), GgufType::kFloat32);
  EXPECT_EQ(out.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(out.get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string_view>{"a", "b"}));
  ASSERT_EQ(out.tensors().size(), in.tensors().size());
  uint64_t bytes_out = 0;
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const GgufTensorInfo& a = in.tensors()[i];
    const GgufTensorInfo& b = out.tensors()[i];
    ASSERT_EQ(a.name, b.name);
    EXPECT_EQ(a.shape, b.shape) << a.name;
    EXPECT_EQ(b.dtype, r.plan[i].to) << a.name;
    std::vector<uint8_t> want(b.bytes);
    quantize_row(*b.dtype, static_cast<const float*>(a.data()), want.data(), a.shape.elements());
    EXPECT_EQ(std::memcmp(want.data(), b.data(), b.bytes), 0) << a.name;
    bytes_out += b.bytes;
  }
  EXPECT_EQ(r.bytes_out, bytes_out);
}

// Dequantizing is exact, so any file goes to f32 without --allow-requantize
// and back to its own type unchanged; quantizing quantized weights again
// needs the option.
TEST_F(Quantize, F32IsExactAndRequantizingNeedsConsent) {
  testing::write_tiny_llama(dir_ / "tiny.gguf");  // q4_1 matrices
  const GgufFile tiny = GgufFile::open(dir_ / "tiny.gguf");
  QuantizeOptions o;
  o.type = FileType::kF32;
  quantize_model(tiny, dir_ / "f32.gguf", o);
  const GgufFile f32 = GgufFile::open(dir_ / "f32.gguf");
  o.type = FileType::kQ4_1;
  try {
    quantize_model(tiny, dir_ / "again.gguf", o);
    ADD_FAILURE() << "requantized without consent";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kModelFile);
    EXPECT_NE(std::string(e.what()).find("already quantized (q4_1)"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-requantize"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "again.gguf"));
  // From the exact f32 copy, q4_1 blocks come back to within 1e-6: each
  // block's min is stored exactly and its step rounds back to f16.
  quantize_model(f32, dir_ / "back.gguf", o);
  const GgufFile back = GgufFile::open(dir_ / "back.gguf");
  int compared = 0;
  for (size_t i = 0; i < tiny.tensors().size(); ++i) {
    const GgufTensorInfo& a = tiny.tensors()[i];
    const GgufTensorInfo& b = back.tensors()[i];
    if (a.dtype != DType::kQ4_1 || b.dtype != DType::kQ4_1) continue;  // token_embd: q8_0
    ++compared;
    std::vector<float> fa(static_cast<size_t>(a.shape.elements())), fb(fa.size());
    dequantize_row(DType::kQ4_1, a.data(), fa.data(), a.shape.elements());
    dequantize_row(*b.dtype, b.data(), fb.data(), b.shape.elements());
    for (size_t j = 0; j < fa.size(); ++j) ASSERT_NEAR(fa[j], fb[j], 1e-6f) << a.name << " " << j;
  }
  EXPECT_EQ(compared, 14);  // 7 matrices in each of 2 layers
}

TEST_F(Quantize, NonFiniteWeightsAreRefusedWithTheirPlace) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<float> data(256 * 4, 0.25f);
  data[256 * 2 + 17] = std::numeric_limits<float>::quiet_NaN();
  w.add_tensor("blk.0.attn_q.weight", DType::kF32, Shape({4, 256}), data.data(), data.size() * 4);
  w.write(dir_ / "nan.gguf");
  const GgufFile in = GgufFile::open(dir_ / "nan.gguf");
  QuantizeOptions o;
  o.type = FileType::kQ4_K_M;
  try {
    quantize_model(in, dir_ / "out.gguf", o);
    ADD_FAILURE() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kModelFile);
    EXPECT_NE(std::string(e.what()).find("'blk.0.attn_q.weight' row 2 column 17 holds nan"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out.gguf.partial"));
}

}  // namespace
}  // namespace duet
