// gguf_test_util.h — helpers shared by the GGUF tests: temporary files, a
// small valid file to mutate, and byte patching.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "duet/app/gguf.h"

namespace duet::test {

// A file under the test temp dir, removed when the object dies. Names are
// unique per process and per object, so tests may run in parallel.
class TempFile {
 public:
  explicit TempFile(std::string_view stem);
  TempFile(std::string_view stem, const std::vector<uint8_t>& bytes);
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();

  const std::filesystem::path& path() const { return path_; }
  void write(const std::vector<uint8_t>& bytes) const;

 private:
  std::filesystem::path path_;
};

// The writer behind small_valid_gguf(), for tests that add to it. Contents,
// which the corrupt-file tests patch by finding these names in the bytes:
//   metadata: general.architecture = "test", dup.key1 = uint32 1,
//             dup.key2 = uint32 2, test.strings = ["alpha", "beta", "gamma"],
//             test.nested = [[1, 2], [3]] (int32), test.flag = true,
//             general.alignment = 64
//   tensors:  dup.t1 f32 {2, 4}, dup.t2 q8_0 {2, 32}, test.q4 q4_0 {1, 64}
GgufWriter small_valid_writer();
std::vector<uint8_t> small_valid_gguf();

// Offset of the only occurrence of `needle` in `bytes`; fails the test (and
// returns SIZE_MAX) when it occurs zero or several times.
size_t find_unique(const std::vector<uint8_t>& bytes, std::string_view needle);

void put_u32(std::vector<uint8_t>& bytes, size_t offset, uint32_t value);
void put_u64(std::vector<uint8_t>& bytes, size_t offset, uint64_t value);
uint32_t get_u32(const std::vector<uint8_t>& bytes, size_t offset);
uint64_t get_u64(const std::vector<uint8_t>& bytes, size_t offset);

// Offsets of the fields of a tensor entry, found by its (unique) name.
struct TensorEntry {
  size_t n_dims;  // uint32
  size_t dims;    // n_dims uint64, innermost first
  size_t type;    // uint32
  size_t offset;  // uint64
};
TensorEntry tensor_entry(const std::vector<uint8_t>& bytes, std::string_view name);

// Offset of the value type code that follows a (unique) metadata key.
size_t value_type_offset(const std::vector<uint8_t>& bytes, std::string_view key);

// Success when opening `bytes` as a file throws Error(kModelFile) with a
// one-line message that names the file and contains `substring`.
::testing::AssertionResult rejects(const std::vector<uint8_t>& bytes, std::string_view substring);

}  // namespace duet::test
