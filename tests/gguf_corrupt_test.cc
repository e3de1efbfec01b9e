// Corrupt and hostile GGUF files: each is made from the valid bytes of
// small_valid_gguf() with one field patched, and must be rejected with
// Error(kModelFile) and a one-line message naming the field.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "duet/app/gguf.h"
#include "duet/error.h"
#include "gguf_test_util.h"

namespace duet::test {
namespace {

constexpr uint64_t kHuge = uint64_t{1} << 62;

// Reads every byte through a volatile pointer, so the reads really happen.
void touch(const void* data, uint64_t bytes) {
  const volatile auto* p = static_cast<const volatile uint8_t*>(data);
  for (uint64_t i = 0; i < bytes; ++i) static_cast<void>(p[i]);
}

TEST(GgufCorrupt, SmallValidFileOpens) {
  TempFile file("valid", small_valid_gguf());
  const GgufFile gguf = GgufFile::open(file.path());
  EXPECT_EQ(gguf.tensors().size(), 3u);
  EXPECT_EQ(gguf.alignment(), 64u);
}

TEST(GgufCorrupt, BadMagic) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  bytes[3] = 'X';
  EXPECT_TRUE(rejects(bytes, "is not a GGUF file: it starts with 'GGUX' instead of 'GGUF'"));
}

TEST(GgufCorrupt, Version1) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, 4, 1);
  EXPECT_TRUE(rejects(bytes, "GGUF version 1 is not supported (accepted: 2, 3)"));
}

TEST(GgufCorrupt, Version99) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, 4, 99);
  EXPECT_TRUE(rejects(bytes, "GGUF version 99 is not supported (accepted: 2, 3)"));
}

TEST(GgufCorrupt, BigEndianFile) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, 4, 0x03000000);
  EXPECT_TRUE(rejects(bytes, "big-endian"));
}

TEST(GgufCorrupt, EmptyFile) { EXPECT_TRUE(rejects({}, "is empty")); }

TEST(GgufCorrupt, TruncatedHeader) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  bytes.resize(10);
  EXPECT_TRUE(rejects(bytes, "truncated: header tensor count at offset 8 needs 8 bytes"));
}

// Cutting the file anywhere before the end of the last tensor's data must be
// caught; this walks every cut of the small file.
TEST(GgufCorrupt, EveryTruncationPointIsRejected) {
  const std::vector<uint8_t> bytes = small_valid_gguf();
  uint64_t required = 0;
  {
    TempFile file("full", bytes);
    const GgufFile gguf = GgufFile::open(file.path());
    for (const GgufTensorInfo& t : gguf.tensors())
      required = std::max(required, t.offset + t.bytes);
  }
  ASSERT_GT(required, 200u);
  for (size_t cut = 0; cut < required; ++cut) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(cut));
    ASSERT_TRUE(rejects(prefix, "")) << "cut at " << cut;
  }
}

TEST(GgufCorrupt, HugeKeyLength) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u64(bytes, find_unique(bytes, "dup.key1") - 8, kHuge);
  EXPECT_TRUE(rejects(bytes, "metadata entry #1 key length 4611686018427387904 exceeds the"));
}

TEST(GgufCorrupt, HugeStringValueLength) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  // general.architecture's value: type code, then the string length.
  put_u64(bytes, value_type_offset(bytes, "general.architecture") + 4, kHuge);
  EXPECT_TRUE(rejects(bytes,
                      "metadata key 'general.architecture' string length "
                      "4611686018427387904 exceeds the"));
}

TEST(GgufCorrupt, HugeArrayCount) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u64(bytes, value_type_offset(bytes, "test.strings") + 8, kHuge);
  EXPECT_TRUE(rejects(bytes,
                      "metadata key 'test.strings' array length 4611686018427387904 of "
                      "string (at least 8 bytes each) exceeds the"));
}

TEST(GgufCorrupt, HugeNestedArrayCount) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  // test.nested: type, element type, count, then the first inner array's
  // element type and count.
  put_u64(bytes, value_type_offset(bytes, "test.nested") + 16 + 4, kHuge);
  EXPECT_TRUE(rejects(bytes, "metadata key 'test.nested'[0] array length 4611686018427387904"));
}

TEST(GgufCorrupt, HugeTensorCount) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u64(bytes, 8, uint64_t{1} << 60);
  EXPECT_TRUE(rejects(bytes, "header tensor count 1152921504606846976 is impossible"));
}

TEST(GgufCorrupt, HugeMetadataCount) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u64(bytes, 16, std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(rejects(bytes, "header metadata count 18446744073709551615 is impossible"));
}

TEST(GgufCorrupt, CountsTooLargeTogether) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  // Each count alone fits the file; both together cannot.
  const uint64_t left = bytes.size() - 24;
  put_u64(bytes, 8, left / 32);
  put_u64(bytes, 16, left / 13);
  EXPECT_TRUE(rejects(bytes, "need more than the"));
}

TEST(GgufCorrupt, BadValueTypeCode) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, value_type_offset(bytes, "dup.key1"), 13);
  EXPECT_TRUE(rejects(bytes,
                      "metadata key 'dup.key1' value type 13 is not a GGUF metadata type "
                      "(accepted: 0..12)"));
}

TEST(GgufCorrupt, BadArrayElementTypeCode) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, value_type_offset(bytes, "test.strings") + 4, 0xffffffff);
  EXPECT_TRUE(rejects(bytes,
                      "metadata key 'test.strings' array element type 4294967295 is not a "
                      "GGUF metadata type"));
}

TEST(GgufCorrupt, BoolOtherThanZeroOrOne) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  bytes[value_type_offset(bytes, "test.flag") + 4] = 2;
  EXPECT_TRUE(rejects(bytes, "metadata key 'test.flag' bool value 2 is not 0 or 1"));
}

TEST(GgufCorrupt, ArraysNestedTooDeep) {
  GgufArrayBuilder level(GgufType::kUint8);
  level.add_uint(1);
  for (int depth = 1; depth <= kGgufMaxArrayDepth; ++depth) {
    GgufArrayBuilder outer(GgufType::kArray);
    outer.add_array(level);
    level = outer;
  }
  GgufWriter w;
  w.set_array("deep", level);  // kGgufMaxArrayDepth + 1 levels
  EXPECT_TRUE(rejects(w.to_bytes(), "metadata key 'deep'[0][0][0] nests arrays deeper than 4"));
}

TEST(GgufCorrupt, DuplicateMetadataKey) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  bytes[find_unique(bytes, "dup.key2") + 7] = '1';
  EXPECT_TRUE(rejects(bytes, "duplicate metadata key 'dup.key1' (entries #1 and #2)"));
}

TEST(GgufCorrupt, AlignmentZero) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, value_type_offset(bytes, "general.alignment") + 4, 0);
  EXPECT_TRUE(
      rejects(bytes, "general.alignment 0 is not accepted (accepted: a nonzero power of two"));
}

TEST(GgufCorrupt, AlignmentNotPowerOfTwo) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, value_type_offset(bytes, "general.alignment") + 4, 3);
  EXPECT_TRUE(rejects(bytes, "general.alignment 3 is not accepted"));
}

TEST(GgufCorrupt, AlignmentOfWrongType) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, value_type_offset(bytes, "general.alignment"),
          static_cast<uint32_t>(GgufType::kFloat32));
  EXPECT_TRUE(
      rejects(bytes, "'general.alignment' has type float32; expected a nonnegative integer"));
}

TEST(GgufCorrupt, UnknownTensorTypeCode) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, tensor_entry(bytes, "dup.t1").type, 1000);
  EXPECT_TRUE(rejects(bytes,
                      "tensor 'dup.t1' has unknown type code 1000 (accepted: ggml type "
                      "codes 0..39)"));
}

TEST(GgufCorrupt, RemovedTensorType) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, tensor_entry(bytes, "dup.t1").type, 4);
  EXPECT_TRUE(rejects(bytes, "tensor 'dup.t1' has type q4_2 (code 4), which ggml has removed"));
}

TEST(GgufCorrupt, ZeroDimensions) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, tensor_entry(bytes, "dup.t1").n_dims, 0);
  EXPECT_TRUE(rejects(bytes, "tensor 'dup.t1' has 0 dimensions (accepted: 1 to 4)"));
}

TEST(GgufCorrupt, FiveDimensions) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u32(bytes, tensor_entry(bytes, "dup.t1").n_dims, 5);
  EXPECT_TRUE(rejects(bytes, "tensor 'dup.t1' has 5 dimensions (accepted: 1 to 4)"));
}

TEST(GgufCorrupt, DimensionOfZero) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u64(bytes, tensor_entry(bytes, "dup.t1").dims + 8, 0);
  EXPECT_TRUE(
      rejects(bytes, "tensor 'dup.t1' shape [0, 4] (outermost first) has a zero dimension"));
}

TEST(GgufCorrupt, DimensionProductOverflows) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  const TensorEntry e = tensor_entry(bytes, "dup.t1");
  put_u64(bytes, e.dims, uint64_t{1} << 40);
  put_u64(bytes, e.dims + 8, uint64_t{1} << 40);
  EXPECT_TRUE(rejects(bytes,
                      "tensor 'dup.t1' shape [1099511627776, 1099511627776] (outermost "
                      "first) has more elements than fit in 64 bits"));
}

TEST(GgufCorrupt, DimensionAboveInt64) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u64(bytes, tensor_entry(bytes, "dup.t1").dims + 8, std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(rejects(bytes, "has more elements than fit in 64 bits"));
}

TEST(GgufCorrupt, ByteSizeOverflows) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  const TensorEntry e = tensor_entry(bytes, "dup.t1");  // f32: 2^62 elements take 2^64 bytes
  put_u64(bytes, e.dims, uint64_t{1} << 31);
  put_u64(bytes, e.dims + 8, uint64_t{1} << 31);
  EXPECT_TRUE(rejects(bytes, "takes more bytes than fit in 64 bits"));
}

TEST(GgufCorrupt, InnermostNotMultipleOfBlockSize) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u64(bytes, tensor_entry(bytes, "dup.t2").dims, 16);
  EXPECT_TRUE(rejects(bytes,
                      "tensor 'dup.t2' innermost dimension 16 is not a multiple of the "
                      "q8_0 block size 32"));
}

TEST(GgufCorrupt, MisalignedOffset) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  const size_t at = tensor_entry(bytes, "dup.t2").offset;
  ASSERT_EQ(get_u64(bytes, at), 64u);
  put_u64(bytes, at, 65);
  EXPECT_TRUE(rejects(bytes, "tensor 'dup.t2' offset 65 is not a multiple of alignment 64"));
}

TEST(GgufCorrupt, TensorDataOutOfBounds) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  put_u64(bytes, tensor_entry(bytes, "test.q4").offset, 64 * 1024);
  EXPECT_TRUE(rejects(bytes, "tensor 'test.q4' data (offset 65536, 36 bytes, data section at"));
}

TEST(GgufCorrupt, TensorOffsetOverflows) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  // Aligned to 64, and data_offset + offset wraps past 2^64.
  put_u64(bytes, tensor_entry(bytes, "test.q4").offset, std::numeric_limits<uint64_t>::max() - 63);
  EXPECT_TRUE(rejects(bytes, "lies outside the file"));
}

TEST(GgufCorrupt, DuplicateTensorName) {
  std::vector<uint8_t> bytes = small_valid_gguf();
  bytes[find_unique(bytes, "dup.t2") + 5] = '1';
  EXPECT_TRUE(rejects(bytes, "duplicate tensor 'dup.t1' (tensors #0 and #1)"));
}

TEST(GgufCorrupt, HostileNameStaysOnOneLine) {
  GgufWriter w;
  const std::vector<float> data(4, 0.0f);
  w.add_tensor("evil\nname", DType::kF32, Shape{4}, data.data(), 16);
  std::vector<uint8_t> bytes = w.to_bytes();
  put_u32(bytes, tensor_entry(bytes, "evil\nname").type, 1000);
  EXPECT_TRUE(rejects(bytes, "tensor 'evil\\x0aname' has unknown type code 1000"));
}

TEST(GgufCorrupt, MissingFile) {
  const TempFile never_written("missing");
  try {
    GgufFile::open(never_written.path());
    FAIL() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kModelFile);
    EXPECT_NE(std::string(e.what()).find("cannot open: No such file or directory"),
              std::string::npos)
        << e.what();
  }
}

TEST(GgufCorrupt, Directory) {
  try {
    GgufFile::open(::testing::TempDir());
    FAIL() << "opened a directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kModelFile);
    EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
  }
}

// Random byte changes must never crash the reader: each mutated file either
// opens, and then every value and supported tensor can be walked, or is
// rejected with Error(kModelFile).
TEST(GgufCorrupt, RandomMutationsNeverCrash) {
  const std::vector<uint8_t> valid = small_valid_gguf();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> position(0, valid.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> edits(1, 4);
  TempFile file("mutated");
  int accepted = 0;
  for (int round = 0; round < 1000; ++round) {
    std::vector<uint8_t> bytes = valid;
    for (int n = edits(rng); n > 0; --n) bytes[position(rng)] = static_cast<uint8_t>(byte(rng));
    file.write(bytes);
    try {
      const GgufFile gguf = GgufFile::open(file.path());
      ++accepted;
      for (const GgufMetadataEntry& e : gguf.metadata()) {
        if (const GgufArray* a = e.value.as_array()) {
          for (const GgufValue& v : a->elements()) {
            if (const GgufArray* inner = v.as_array()) inner->elements();
          }
        }
      }
      for (const GgufTensorInfo& t : gguf.tensors()) {
        if (t.supported()) touch(t.data(), t.bytes);
      }
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::kModelFile) << e.what();
      ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  // Most edits land in tensor data or string bytes and leave a valid file.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace duet::test
