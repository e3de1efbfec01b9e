#include "gguf_test_util.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>

#include "duet/error.h"

namespace duet::test {
namespace {

std::filesystem::path unique_path(std::string_view stem) {
  static std::atomic<int> counter{0};
  return std::filesystem::path(::testing::TempDir()) /
         ("duet_gguf_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
          std::string(stem) + ".gguf");
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  std::iota(out.begin(), out.end(), seed);
  return out;
}

}  // namespace

TempFile::TempFile(std::string_view stem) : path_(unique_path(stem)) {}

TempFile::TempFile(std::string_view stem, const std::vector<uint8_t>& bytes) : TempFile(stem) {
  write(bytes);
}

TempFile::~TempFile() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

void TempFile::write(const std::vector<uint8_t>& bytes) const {
  std::ofstream out(path_, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path_;
}

GgufWriter small_valid_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "test");
  w.set_uint32("dup.key1", 1);
  w.set_uint32("dup.key2", 2);
  const std::vector<std::string> strings = {"alpha", "beta", "gamma"};
  w.set_string_array("test.strings", strings);
  GgufArrayBuilder inner1(GgufType::kInt32);
  inner1.add_int(1).add_int(2);
  GgufArrayBuilder inner2(GgufType::kInt32);
  inner2.add_int(3);
  GgufArrayBuilder nested(GgufType::kArray);
  nested.add_array(inner1).add_array(inner2);
  w.set_array("test.nested", nested);
  w.set_bool("test.flag", true);
  w.set_alignment(64);

  const std::vector<float> t1 = {1, 2, 3, 4, 5, 6, 7, 8};
  w.add_tensor("dup.t1", DType::kF32, Shape{2, 4}, t1.data(), t1.size() * sizeof(float));
  const std::vector<uint8_t> t2 = pattern(2 * 34, 1);
  w.add_tensor("dup.t2", DType::kQ8_0, Shape{2, 32}, t2.data(), t2.size());
  const std::vector<uint8_t> t3 = pattern(2 * 18, 7);
  w.add_tensor("test.q4", DType::kQ4_0, Shape{1, 64}, t3.data(), t3.size());
  return w;
}

std::vector<uint8_t> small_valid_gguf() { return small_valid_writer().to_bytes(); }

size_t find_unique(const std::vector<uint8_t>& bytes, std::string_view needle) {
  const std::string_view haystack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const size_t first = haystack.find(needle);
  if (first == std::string_view::npos) {
    ADD_FAILURE() << "'" << needle << "' not found in the file";
    return SIZE_MAX;
  }
  if (haystack.find(needle, first + 1) != std::string_view::npos) {
    ADD_FAILURE() << "'" << needle << "' occurs more than once in the file";
    return SIZE_MAX;
  }
  return first;
}

void put_u32(std::vector<uint8_t>& bytes, size_t offset, uint32_t value) {
  ASSERT_LE(offset + sizeof(value), bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(value));
}

void put_u64(std::vector<uint8_t>& bytes, size_t offset, uint64_t value) {
  ASSERT_LE(offset + sizeof(value), bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(value));
}

uint32_t get_u32(const std::vector<uint8_t>& bytes, size_t offset) {
  uint32_t value = 0;
  if (offset + sizeof(value) <= bytes.size())
    std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

uint64_t get_u64(const std::vector<uint8_t>& bytes, size_t offset) {
  uint64_t value = 0;
  if (offset + sizeof(value) <= bytes.size())
    std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

TensorEntry tensor_entry(const std::vector<uint8_t>& bytes, std::string_view name) {
  TensorEntry e{};
  e.n_dims = find_unique(bytes, name) + name.size();
  e.dims = e.n_dims + 4;
  e.type = e.dims + 8 * get_u32(bytes, e.n_dims);
  e.offset = e.type + 4;
  return e;
}

size_t value_type_offset(const std::vector<uint8_t>& bytes, std::string_view key) {
  return find_unique(bytes, key) + key.size();
}

::testing::AssertionResult rejects(const std::vector<uint8_t>& bytes, std::string_view substring) {
  TempFile file("corrupt", bytes);
  try {
    GgufFile::open(file.path());
  } catch (const Error& e) {
    const std::string message = e.what();
    if (e.kind() != ErrorKind::kModelFile) {
      return ::testing::AssertionFailure()
             << "kind is " << error_kind_name(e.kind()) << ", not model file: " << message;
    }
    if (message.find('\n') != std::string::npos) {
      return ::testing::AssertionFailure() << "message spans several lines: " << message;
    }
    if (message.find(file.path().string()) == std::string::npos) {
      return ::testing::AssertionFailure() << "message does not name the file: " << message;
    }
    if (message.find(substring) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << substring << "': " << message;
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-duet exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "the file was accepted";
}

}  // namespace duet::test
