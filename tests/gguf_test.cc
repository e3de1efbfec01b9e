// GGUF writer -> reader round trips, the dtype table, and typed getters.
#include "duet/app/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "duet/app/model_summary.h"
#include "duet/error.h"
#include "gguf_test_util.h"

namespace duet::test {
namespace {

GgufFile open_bytes(const TempFile& file, const std::vector<uint8_t>& bytes) {
  file.write(bytes);
  return GgufFile::open(file.path());
}

// The message of the duet::Error that `f` throws; fails the test otherwise.
template <typename F>
std::string error_message(F&& f, ErrorKind kind = ErrorKind::kModelFile) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no duet::Error was thrown";
  return {};
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 7);
  return out;
}

// --- dtype and shape ---------------------------------------------------------

TEST(GgufDType, TraitsOfSupportedTypes) {
  struct Expect {
    DType type;
    std::string_view name;
    int64_t block_size;
    int64_t block_bytes;
  };
  const Expect expected[] = {
      {DType::kF32, "f32", 1, 4},       {DType::kF16, "f16", 1, 2},
      {DType::kBF16, "bf16", 1, 2},     {DType::kI32, "i32", 1, 4},
      {DType::kQ4_0, "q4_0", 32, 18},   {DType::kQ4_1, "q4_1", 32, 20},
      {DType::kQ8_0, "q8_0", 32, 34},   {DType::kQ5_0, "q5_0", 32, 22},
      {DType::kQ5_1, "q5_1", 32, 24},   {DType::kQ2_K, "q2_k", 256, 84},
      {DType::kQ3_K, "q3_k", 256, 110}, {DType::kQ4_K, "q4_k", 256, 144},
      {DType::kQ5_K, "q5_k", 256, 176}, {DType::kQ6_K, "q6_k", 256, 210},
      {DType::kQ8_K, "q8_k", 256, 292}, {DType::kIQ4_NL, "iq4_nl", 32, 18},
  };
  for (const Expect& e : expected) {
    const DTypeTraits& t = dtype_traits(e.type);
    EXPECT_EQ(t.type, e.type);
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.block_size, e.block_size);
    EXPECT_EQ(t.block_bytes, e.block_bytes);
    EXPECT_EQ(dtype_from_name(e.name), e.type);
    EXPECT_EQ(dtype_from_code(static_cast<uint32_t>(e.type)), e.type);
    EXPECT_EQ(dtype_name(e.type), e.name);
  }
  EXPECT_EQ(dtype_from_code(23), std::nullopt);  // iq4_xs: known to ggml, not to Duet
  EXPECT_EQ(dtype_from_code(1000), std::nullopt);
  EXPECT_EQ(dtype_from_name("iq4_xs"), std::nullopt);
  EXPECT_EQ(dtype_from_name("F32"), std::nullopt);
}

TEST(GgufDType, GgmlTypeNames) {
  EXPECT_EQ(ggml_type_name(0), "f32");
  EXPECT_EQ(ggml_type_name(3), "q4_1");
  EXPECT_EQ(ggml_type_name(6), "q5_0");
  EXPECT_EQ(ggml_type_name(10), "q2_k");
  EXPECT_EQ(ggml_type_name(12), "q4_k");
  EXPECT_EQ(ggml_type_name(14), "q6_k");
  EXPECT_EQ(ggml_type_name(23), "iq4_xs");
  EXPECT_EQ(ggml_type_name(28), "f64");
  EXPECT_EQ(ggml_type_name(29), "iq1_m");
  EXPECT_EQ(ggml_type_name(30), "bf16");
  EXPECT_EQ(ggml_type_name(34), "tq1_0");
  EXPECT_EQ(ggml_type_name(35), "tq2_0");
  EXPECT_EQ(ggml_type_name(39), "mxfp4");
  EXPECT_EQ(ggml_type_name(40), "unknown(40)");
  EXPECT_EQ(ggml_type_name(1000), "unknown(1000)");
}

TEST(GgufDType, GgmlLayouts) {
  EXPECT_EQ(ggml_type_layout(12)->block_size, 256);  // q4_k
  EXPECT_EQ(ggml_type_layout(12)->block_bytes, 144);
  EXPECT_EQ(ggml_type_layout(14)->block_bytes, 210);  // q6_k
  EXPECT_EQ(ggml_type_layout(4), std::nullopt);       // q4_2, removed
  EXPECT_EQ(ggml_type_layout(40), std::nullopt);
}

TEST(GgufDType, RowBytes) {
  EXPECT_EQ(dtype_row_bytes(DType::kF32, 3), 12u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_1, 64), 40u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ8_0, 32), 34u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0, 33), std::nullopt);
  EXPECT_EQ(dtype_row_bytes(DType::kF32, std::numeric_limits<uint64_t>::max()), std::nullopt);
}

TEST(GgufShape, Basics) {
  const Shape s{49152, 576};
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.elements(), 49152 * 576);
  EXPECT_EQ(s.innermost(), 576);
  EXPECT_EQ(s.rows(), 49152);
  EXPECT_EQ(s.str(), "[49152, 576]");
  EXPECT_EQ(s, (Shape{49152, 576}));
  EXPECT_FALSE(s == (Shape{576, 49152}));
  EXPECT_FALSE(s == (Shape{49152, 576, 1}));
  EXPECT_EQ(Shape{}.elements(), 1);
  EXPECT_EQ(Shape{}.str(), "[]");

  TensorView v;
  v.dtype = DType::kQ4_1;
  v.shape = Shape{3, 64};
  EXPECT_EQ(v.bytes(), 3u * 40u);
}

// --- metadata round trips ----------------------------------------------------

TEST(Gguf, RoundTripsEveryScalarType) {
  GgufWriter w;
  w.set_uint8("u8", 255);
  w.set_int8("i8", -128);
  w.set_uint16("u16", 65535);
  w.set_int16("i16", -32768);
  w.set_uint32("u32", std::numeric_limits<uint32_t>::max());
  w.set_int32("i32", std::numeric_limits<int32_t>::min());
  w.set_uint64("u64", std::numeric_limits<uint64_t>::max());
  w.set_int64("i64", std::numeric_limits<int64_t>::min());
  w.set_float32("f32", 1e-5f);
  w.set_float64("f64", std::numbers::pi);
  w.set_bool("yes", true);
  w.set_bool("no", false);
  w.set_string("s", std::string_view("h\xc3\xa9llo\0x", 8));
  w.set_string("empty", "");

  TempFile file("scalars");
  const GgufFile f = open_bytes(file, w.to_bytes());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.find("u8")->type(), GgufType::kUint8);
  EXPECT_EQ(f.get_uint("u8"), 255u);
  EXPECT_EQ(f.find("i8")->type(), GgufType::kInt8);
  EXPECT_EQ(f.get_int("i8"), -128);
  EXPECT_EQ(f.find("u16")->type(), GgufType::kUint16);
  EXPECT_EQ(f.get_uint("u16"), 65535u);
  EXPECT_EQ(f.find("i16")->type(), GgufType::kInt16);
  EXPECT_EQ(f.get_int("i16"), -32768);
  EXPECT_EQ(f.find("u32")->type(), GgufType::kUint32);
  EXPECT_EQ(f.get_uint("u32"), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(f.get_int("u32"), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(f.find("i32")->type(), GgufType::kInt32);
  EXPECT_EQ(f.get_int("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f.find("u64")->type(), GgufType::kUint64);
  EXPECT_EQ(f.get_uint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.find("i64")->type(), GgufType::kInt64);
  EXPECT_EQ(f.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.find("f32")->type(), GgufType::kFloat32);
  EXPECT_EQ(f.get_float("f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(f.find("f64")->type(), GgufType::kFloat64);
  EXPECT_EQ(f.get_float("f64"), std::numbers::pi);
  EXPECT_EQ(f.find("yes")->type(), GgufType::kBool);
  EXPECT_TRUE(f.get_bool("yes"));
  EXPECT_FALSE(f.get_bool("no"));
  EXPECT_EQ(f.find("s")->type(), GgufType::kString);
  EXPECT_EQ(f.get_string("s"), std::string_view("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(f.get_string("empty"), "");
  EXPECT_EQ(f.find("missing"), nullptr);
}

TEST(Gguf, RoundTripsArraysOfEveryElementType) {
  GgufWriter w;
  w.set_array("u8", GgufArrayBuilder(GgufType::kUint8).add_uint(0).add_uint(255));
  w.set_array("i8", GgufArrayBuilder(GgufType::kInt8).add_int(-128).add_int(127));
  w.set_array("u16", GgufArrayBuilder(GgufType::kUint16).add_uint(65535));
  w.set_array("i16", GgufArrayBuilder(GgufType::kInt16).add_int(-32768));
  w.set_array("u32", GgufArrayBuilder(GgufType::kUint32).add_uint(4000000000u));
  w.set_array("i32", GgufArrayBuilder(GgufType::kInt32).add_int(-2000000000));
  w.set_array("u64", GgufArrayBuilder(GgufType::kUint64).add_uint(1ull << 63));
  w.set_array("i64", GgufArrayBuilder(GgufType::kInt64).add_int(-(1ll << 62)));
  w.set_array("f64", GgufArrayBuilder(GgufType::kFloat64).add_float(0.1).add_float(-2.5));
  w.set_array("bool", GgufArrayBuilder(GgufType::kBool).add_bool(true).add_bool(false));
  w.set_array("empty", GgufArrayBuilder(GgufType::kString));
  const std::vector<std::string> strings = {"a", "", "\xe2\x96\x81the"};
  w.set_string_array("str", strings);
  const std::vector<int32_t> ints = {-1, 0, 7};
  w.set_int32_array("i32s", ints);
  const std::vector<float> floats = {0.5f, -1.25f};
  w.set_float32_array("f32", floats);

  TempFile file("arrays");
  const GgufFile f = open_bytes(file, w.to_bytes());
  const auto elements = [&](std::string_view key, GgufType element) {
    const GgufArray* a = f.find(key)->as_array();
    EXPECT_NE(a, nullptr) << key;
    EXPECT_EQ(a->element_type(), element) << key;
    return a->elements();
  };
  EXPECT_EQ(elements("u8", GgufType::kUint8)[1].as_uint(), 255u);
  EXPECT_EQ(elements("i8", GgufType::kInt8)[0].as_int(), -128);
  EXPECT_EQ(elements("u16", GgufType::kUint16)[0].as_uint(), 65535u);
  EXPECT_EQ(elements("i16", GgufType::kInt16)[0].as_int(), -32768);
  EXPECT_EQ(elements("u32", GgufType::kUint32)[0].as_uint(), 4000000000u);
  EXPECT_EQ(elements("i32", GgufType::kInt32)[0].as_int(), -2000000000);
  EXPECT_EQ(elements("u64", GgufType::kUint64)[0].as_uint(), 1ull << 63);
  EXPECT_EQ(elements("u64", GgufType::kUint64)[0].as_int(), std::nullopt);
  EXPECT_EQ(elements("i64", GgufType::kInt64)[0].as_int(), -(1ll << 62));
  EXPECT_EQ(elements("f64", GgufType::kFloat64)[0].as_float(), 0.1);
  EXPECT_EQ(elements("bool", GgufType::kBool)[0].as_bool(), true);
  EXPECT_EQ(elements("bool", GgufType::kBool)[1].as_bool(), false);
  EXPECT_TRUE(elements("empty", GgufType::kString).empty());

  EXPECT_EQ(f.get_string_array("str"), (std::vector<std::string_view>{"a", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(f.get_int_array("i32s"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(f.get_int_array("u8"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(f.get_float_array("f32"), floats);
  EXPECT_EQ(f.get_float_array("f64"), (std::vector<float>{0.1f, -2.5f}));
  EXPECT_TRUE(f.get_string_array("empty").empty());
}

TEST(Gguf, RoundTripsNestedArrays) {
  GgufArrayBuilder words(GgufType::kString);
  words.add_string("x").add_string("yz");
  GgufArrayBuilder numbers(GgufType::kFloat32);
  numbers.add_float(1.5);
  GgufArrayBuilder mixed(GgufType::kArray);  // arrays of different element types
  mixed.add_array(words).add_array(numbers).add_array(GgufArrayBuilder(GgufType::kUint8));

  // kGgufMaxArrayDepth levels: the deepest the reader accepts.
  GgufArrayBuilder deep(GgufType::kInt16);
  deep.add_int(-3);
  for (int depth = 1; depth < kGgufMaxArrayDepth; ++depth) {
    GgufArrayBuilder outer(GgufType::kArray);
    outer.add_array(deep);
    deep = outer;
  }

  GgufWriter w;
  w.set_array("mixed", mixed);
  w.set_array("deep", deep);
  TempFile file("nested");
  const GgufFile f = open_bytes(file, w.to_bytes());

  const std::vector<GgufValue> outer = f.find("mixed")->as_array()->elements();
  ASSERT_EQ(outer.size(), 3u);
  const std::vector<GgufValue> first = outer[0].as_array()->elements();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[1].as_string(), "yz");
  EXPECT_EQ(outer[1].as_array()->element_type(), GgufType::kFloat32);
  EXPECT_EQ(outer[1].as_array()->elements()[0].as_float(), 1.5);
  EXPECT_EQ(outer[2].as_array()->size(), 0u);

  // A GgufArray is a small view: copies stay valid while the file lives.
  GgufArray level = *f.find("deep")->as_array();
  for (int depth = 1; depth < kGgufMaxArrayDepth; ++depth) {
    ASSERT_EQ(level.element_type(), GgufType::kArray);
    level = *level.elements()[0].as_array();
  }
  EXPECT_EQ(level.elements()[0].as_int(), -3);
}

TEST(Gguf, KeepsInsertionOrderAndReplacesInPlace) {
  GgufWriter w;
  w.set_uint32("b", 1);
  w.set_string("a", "x");
  w.set_uint32("c", 2);
  w.set_string("b", "replaced");
  TempFile file("order");
  const GgufFile f = open_bytes(file, w.to_bytes());
  ASSERT_EQ(f.metadata().size(), 3u);
  EXPECT_EQ(f.metadata()[0].key, "b");
  EXPECT_EQ(f.metadata()[1].key, "a");
  EXPECT_EQ(f.metadata()[2].key, "c");
  EXPECT_EQ(f.get_string("b"), "replaced");
}

TEST(Gguf, TypedGettersNameKeyAndExpectedType) {
  GgufWriter w;
  w.set_string("llama.block_count", "thirty");
  w.set_int32("neg", -5);
  w.set_uint64("big", std::numeric_limits<uint64_t>::max());
  w.set_int32("int", 3);
  w.set_float32("float", 1.0f);
  const std::vector<int32_t> ints = {1, 2};
  w.set_int32_array("ints", ints);
  w.set_array("big_array", GgufArrayBuilder(GgufType::kUint64).add_uint(1).add_uint(~0ull));
  TempFile file("getters");
  const GgufFile f = open_bytes(file, w.to_bytes());
  const std::string path = file.path().string();

  std::string m = error_message([&] { f.get_uint("llama.block_count"); });
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("metadata key 'llama.block_count' is string; expected a nonnegative integer"),
            std::string::npos)
      << m;

  m = error_message([&] { f.get_uint("llama.block_cout"); });
  EXPECT_NE(m.find("metadata key 'llama.block_cout' is missing (expected a nonnegative "
                   "integer); did you mean 'llama.block_count'?"),
            std::string::npos)
      << m;

  m = error_message([&] { f.get_uint("neg"); });
  EXPECT_NE(m.find("metadata key 'neg' is int32 -5; expected a nonnegative integer"),
            std::string::npos)
      << m;
  m = error_message([&] { f.get_int("big"); });
  EXPECT_NE(m.find("'big' is uint64 18446744073709551615; expected an integer that fits int64"),
            std::string::npos)
      << m;
  m = error_message([&] { f.get_float("int"); });
  EXPECT_NE(m.find("'int' is int32 3; expected a float32 or float64"), std::string::npos) << m;
  m = error_message([&] { f.get_string("float"); });
  EXPECT_NE(m.find("'float' is float32; expected a string"), std::string::npos) << m;
  m = error_message([&] { f.get_bool("int"); });
  EXPECT_NE(m.find("'int' is int32 3; expected a bool"), std::string::npos) << m;
  m = error_message([&] { f.get_string_array("ints"); });
  EXPECT_NE(m.find("'ints' is array of int32; expected an array of string"), std::string::npos)
      << m;
  m = error_message([&] { f.get_float_array("ints"); });
  EXPECT_NE(m.find("expected an array of float32 or float64"), std::string::npos) << m;
  m = error_message([&] { f.get_int_array("int"); });
  EXPECT_NE(m.find("'int' is int32 3; expected an array of integers"), std::string::npos) << m;
  m = error_message([&] { f.get_int_array("big_array"); });
  EXPECT_NE(m.find("'big_array' element 1 is 18446744073709551615"), std::string::npos) << m;

  EXPECT_EQ(f.find_uint("absent"), std::nullopt);
  EXPECT_EQ(f.find_string("absent"), std::nullopt);
  EXPECT_EQ(f.find_int("int"), 3);
  EXPECT_EQ(f.find_float("float"), 1.0);
  EXPECT_EQ(f.find_bool("absent"), std::nullopt);
  m = error_message([&] { f.find_string("int"); });
  EXPECT_NE(m.find("'int' is int32 3; expected a string"), std::string::npos) << m;
}

// --- tensors -----------------------------------------------------------------

TEST(Gguf, RoundTripsTensorsOfEverySupportedType) {
  struct Case {
    std::string name;
    DType type;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"f32", DType::kF32, Shape{3, 5}},      {"f16", DType::kF16, Shape{7}},
      {"bf16", DType::kBF16, Shape{2, 2, 3}}, {"i32", DType::kI32, Shape{1, 1, 1, 9}},
      {"q4_0", DType::kQ4_0, Shape{2, 64}},   {"q4_1", DType::kQ4_1, Shape{3, 32}},
      {"q8_0", DType::kQ8_0, Shape{1, 96}},
  };
  GgufWriter w;
  std::vector<std::vector<uint8_t>> data;
  for (const Case& c : cases) {
    TensorView view;
    view.dtype = c.type;
    view.shape = c.shape;
    data.push_back(pattern(static_cast<size_t>(view.bytes()), static_cast<uint8_t>(data.size())));
    w.add_tensor(c.name, c.type, c.shape, data.back().data(), data.back().size());
  }
  TempFile file("tensors");
  const GgufFile f = open_bytes(file, w.to_bytes());
  ASSERT_EQ(f.tensors().size(), cases.size());
  EXPECT_EQ(f.alignment(), kGgufDefaultAlignment);
  EXPECT_EQ(f.data_offset() % kGgufDefaultAlignment, 0u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(cases[i].name);
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_TRUE(t.supported());
    EXPECT_EQ(t.dtype, cases[i].type);
    EXPECT_EQ(t.type_code, static_cast<uint32_t>(cases[i].type));
    EXPECT_EQ(t.type_name(), dtype_name(cases[i].type));
    EXPECT_EQ(t.shape, cases[i].shape);
    EXPECT_EQ(t.bytes, data[i].size());
    EXPECT_EQ((t.offset - f.data_offset()) % kGgufDefaultAlignment, 0u);
    EXPECT_EQ(std::memcmp(t.data(), data[i].data(), data[i].size()), 0);
    EXPECT_EQ(&f.tensor(cases[i].name), &t);
    EXPECT_EQ(f.find_tensor(cases[i].name), &t);
  }
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(Gguf, StoresDimensionsInnermostFirst) {
  GgufWriter w;
  const std::vector<uint8_t> data(3 * 20, 0);
  w.add_tensor("m", DType::kQ4_1, Shape{3, 32}, data.data(), data.size());
  const std::vector<uint8_t> bytes = w.to_bytes();
  const TensorEntry e = tensor_entry(bytes, "m");
  EXPECT_EQ(get_u32(bytes, e.n_dims), 2u);
  EXPECT_EQ(get_u64(bytes, e.dims), 32u);  // ne[0]: the innermost
  EXPECT_EQ(get_u64(bytes, e.dims + 8), 3u);
  TempFile file("dims");
  const GgufFile f = open_bytes(file, bytes);
  EXPECT_EQ(f.tensor("m").shape, (Shape{3, 32}));
}

TEST(Gguf, HonoursAlignment) {
  GgufWriter w = small_valid_writer();
  w.set_alignment(128);
  TempFile file("aligned");
  const GgufFile f = open_bytes(file, w.to_bytes());
  EXPECT_EQ(f.alignment(), 128u);
  EXPECT_EQ(f.get_uint("general.alignment"), 128u);
  EXPECT_EQ(f.data_offset() % 128, 0u);
  for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % 128, 0u) << t.name;
}

TEST(Gguf, AcceptsVersion2) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, 4, 2);
  TempFile file("v2");
  EXPECT_EQ(open_bytes(file, bytes).version(), 2u);
}

TEST(Gguf, ListsUnsupportedTypesByName) {
  GgufWriter w;
  const std::vector<uint8_t> iq4_xs(2 * 136, 0);
  w.add_tensor("blk.0.ffn_down.weight", 23u, Shape{2, 256}, iq4_xs.data(), iq4_xs.size());
  TempFile file("iq4xs");
  const GgufFile f = open_bytes(file, w.to_bytes());
  const GgufTensorInfo& t = f.tensor("blk.0.ffn_down.weight");
  EXPECT_FALSE(t.supported());
  EXPECT_EQ(t.type_code, 23u);
  EXPECT_EQ(t.type_name(), "iq4_xs");
  EXPECT_EQ(t.bytes, 272u);
  EXPECT_EQ(t.shape, (Shape{2, 256}));
  const std::string m = error_message([&] { t.data(); });
  EXPECT_NE(m.find(file.path().string()), std::string::npos) << m;
  EXPECT_NE(m.find("tensor 'blk.0.ffn_down.weight' has type iq4_xs, which Duet does not support "
                   "(supported: f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, "
                   "q6_k, q8_k, iq4_nl, i32, bf16)"),
            std::string::npos)
      << m;
}

TEST(Gguf, MissingTensorSuggestsName) {
  TempFile file("suggest");
  const GgufFile f = open_bytes(file, small_valid_gguf());
  const std::string m = error_message([&] { f.tensor("test.q5"); });
  EXPECT_NE(m.find("has no tensor 'test.q5'; did you mean 'test.q4'?"), std::string::npos) << m;
}

TEST(Gguf, MovedFileKeepsViewsValid) {
  TempFile file("moved");
  GgufFile f = open_bytes(file, small_valid_gguf());
  const std::string_view arch = f.get_string("general.architecture");
  const void* data = f.tensor("dup.t1").data();
  GgufFile g = std::move(f);
  EXPECT_EQ(g.get_string("general.architecture"), arch);
  EXPECT_EQ(g.tensor("dup.t1").data(), data);
  EXPECT_EQ(static_cast<const float*>(data)[7], 8.0f);
}

// --- writer ------------------------------------------------------------------

TEST(GgufWriter, WriteMatchesToBytes) {
  const GgufWriter w = small_valid_writer();
  TempFile file("written");
  w.write(file.path());
  std::ifstream in(file.path(), std::ios::binary);
  const std::vector<uint8_t> written((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
  EXPECT_EQ(written, w.to_bytes());
  EXPECT_EQ(written.size() % 64, 0u);  // the last tensor is padded too
}

TEST(GgufWriter, RejectsMisuse) {
  GgufWriter w;
  const std::vector<uint8_t> data(64, 0);
  EXPECT_THROW(w.add_tensor("t", DType::kF32, Shape{4}, data.data(), 15), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", DType::kQ8_0, Shape{16}, data.data(), 17), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", DType::kF32, Shape{}, data.data(), 4), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", DType::kF32, Shape{0, 4}, data.data(), 0), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", 4u, Shape{32}, data.data(), 18), std::invalid_argument);
  w.add_tensor("t", DType::kF32, Shape{4}, data.data(), 16);
  EXPECT_THROW(w.add_tensor("t", DType::kF32, Shape{4}, data.data(), 16), std::invalid_argument);
  EXPECT_THROW(w.set_uint32("general.alignment", 64), std::invalid_argument);
  EXPECT_THROW(w.set_alignment(0), std::invalid_argument);
  EXPECT_THROW(w.set_alignment(48), std::invalid_argument);
  GgufArrayBuilder bytes(GgufType::kUint8);
  EXPECT_THROW(bytes.add_uint(256), std::invalid_argument);
  EXPECT_THROW(bytes.add_int(1), std::invalid_argument);
  EXPECT_THROW(bytes.add_string("x"), std::invalid_argument);
  EXPECT_THROW(GgufArrayBuilder(GgufType::kInt8).add_int(128), std::invalid_argument);
  EXPECT_THROW(GgufArrayBuilder(static_cast<GgufType>(13)), std::invalid_argument);
}

TEST(GgufWriter, ReportsUnwritablePath) {
  const GgufWriter w = small_valid_writer();
  const std::string m = error_message([&] { w.write("/nonexistent-dir/x.gguf"); });
  EXPECT_NE(m.find("cannot write model file '/nonexistent-dir/x.gguf'"), std::string::npos) << m;
}

// --- summary -----------------------------------------------------------------

TEST(GgufModelSummary, PrintsSectionsAndMissingKeysAsDash) {
  GgufWriter w = small_valid_writer();
  const std::vector<std::string> tokens = {"<s>", "</s>", "hi\nthere"};
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_uint32("tokenizer.ggml.eos_token_id", 2);
  w.set_uint32("test.block_count", 30);
  w.set_float32("test.attention.layer_norm_rms_epsilon", 1e-5f);
  const std::vector<uint8_t> iq4_xs(136, 0);
  w.add_tensor("exotic", 23u, Shape{256}, iq4_xs.data(), iq4_xs.size());
  TempFile file("summary");
  const GgufFile f = open_bytes(file, w.to_bytes());

  std::ostringstream brief;
  print_model_summary(brief, f, false);
  const std::string s = brief.str();
  const auto has = [&](std::string_view text) { return s.find(text) != std::string::npos; };
  EXPECT_TRUE(has("gguf version     3")) << s;
  EXPECT_TRUE(has("architecture     test")) << s;
  EXPECT_TRUE(has("name             -")) << s;
  EXPECT_TRUE(has("hyperparameters (test.*)")) << s;
  EXPECT_TRUE(has("block_count                        30")) << s;
  EXPECT_TRUE(has("context_length                     -")) << s;
  EXPECT_TRUE(has("attention.layer_norm_rms_epsilon   1e-05")) << s;
  EXPECT_TRUE(has("vocab_size                         3 (tokens in tokenizer.ggml.tokens)")) << s;
  EXPECT_TRUE(has("model            gpt2")) << s;
  EXPECT_TRUE(has("tokens           3")) << s;
  EXPECT_TRUE(has("merges           -")) << s;
  EXPECT_TRUE(has("bos token        -")) << s;
  EXPECT_TRUE(has("eos token        2 'hi\\nthere'")) << s;
  EXPECT_TRUE(has("chat template    absent")) << s;
  EXPECT_TRUE(has("iq4_xs (unsupported)     1 tensor        136 B  (136 bytes)")) << s;
  EXPECT_TRUE(has("q8_0                     1 tensor         68 B  (68 bytes)")) << s;
  // The architecture's other keys are listed with its hyperparameters.
  EXPECT_TRUE(has("  strings                            [array of 3 string]")) << s;
  EXPECT_TRUE(has("  flag                               true")) << s;
  EXPECT_FALSE(has("tensors (shape is outermost first)")) << s;

  std::ostringstream full;
  print_model_summary(full, f, true);
  EXPECT_NE(full.str().find("tensors (shape is outermost first)"), std::string::npos);
  EXPECT_NE(full.str().find("dup.t2   q8_0    [2, 32]            68"), std::string::npos)
      << full.str();
}

}  // namespace
}  // namespace duet::test
