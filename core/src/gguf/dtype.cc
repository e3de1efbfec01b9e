#include "duet/dtype.h"

#include <array>
#include <string>

#include "duet/app/gguf.h"
#include "duet/block_formats.h"
#include "duet/error.h"

namespace duet {
namespace {

// One row per ggml type code, in code order, so the table is indexed by code.
// The types Duet reads take their layouts from duet/block_formats.h; the
// others' come from ggml's block structs (QK_K = 256). Codes that ggml has
// removed keep their historical name and a block size of 0: their layout is
// no longer defined anywhere, so no file using them can be bound-checked.
struct GgmlTypeRow {
  std::string_view name;
  int64_t block_size;
  int64_t block_bytes;
};

constexpr std::array<GgmlTypeRow, 40> kGgmlTypes = {{
    {"f32", 1, 4},                                         // 0
    {"f16", 1, 2},                                         // 1
    {"q4_0", blocks::kQK, sizeof(blocks::BlockQ4_0)},      // 2
    {"q4_1", blocks::kQK, sizeof(blocks::BlockQ4_1)},      // 3
    {"q4_2", 0, 0},                                        // 4, removed
    {"q4_3", 0, 0},                                        // 5, removed
    {"q5_0", blocks::kQK, sizeof(blocks::BlockQ5_0)},      // 6
    {"q5_1", blocks::kQK, sizeof(blocks::BlockQ5_1)},      // 7
    {"q8_0", blocks::kQK, sizeof(blocks::BlockQ8_0)},      // 8
    {"q8_1", 32, 36},                                      // 9
    {"q2_k", blocks::kQK_K, sizeof(blocks::BlockQ2_K)},    // 10
    {"q3_k", blocks::kQK_K, sizeof(blocks::BlockQ3_K)},    // 11
    {"q4_k", blocks::kQK_K, sizeof(blocks::BlockQ4_K)},    // 12
    {"q5_k", blocks::kQK_K, sizeof(blocks::BlockQ5_K)},    // 13
    {"q6_k", blocks::kQK_K, sizeof(blocks::BlockQ6_K)},    // 14
    {"q8_k", blocks::kQK_K, sizeof(blocks::BlockQ8_K)},    // 15
    {"iq2_xxs", 256, 66},                                  // 16
    {"iq2_xs", 256, 74},                                   // 17
    {"iq3_xxs", 256, 98},                                  // 18
    {"iq1_s", 256, 50},                                    // 19
    {"iq4_nl", blocks::kQK, sizeof(blocks::BlockIQ4_NL)},  // 20
    {"iq3_s", 256, 110},                                   // 21
    {"iq2_s", 256, 82},                                    // 22
    {"iq4_xs", 256, 136},                                  // 23
    {"i8", 1, 1},                                          // 24
    {"i16", 1, 2},                                         // 25
    {"i32", 1, 4},                                         // 26
    {"i64", 1, 8},                                         // 27
    {"f64", 1, 8},                                         // 28
    {"iq1_m", 256, 56},                                    // 29
    {"bf16", 1, 2},                                        // 30
    {"q4_0_4_4", 0, 0},                                    // 31, removed
    {"q4_0_4_8", 0, 0},                                    // 32, removed
    {"q4_0_8_8", 0, 0},                                    // 33, removed
    {"tq1_0", 256, 54},                                    // 34
    {"tq2_0", 256, 66},                                    // 35
    {"iq4_nl_4_4", 0, 0},                                  // 36, removed
    {"iq4_nl_4_8", 0, 0},                                  // 37, removed
    {"iq4_nl_8_8", 0, 0},                                  // 38, removed
    {"mxfp4", 32, 17},                                     // 39
}};

constexpr DTypeTraits traits_of(DType t) {
  const GgmlTypeRow& row = kGgmlTypes[static_cast<uint32_t>(t)];
  return DTypeTraits{t, row.name, row.block_size, row.block_bytes};
}

// The types Duet computes with; their traits are derived from the ggml table
// so the two can never disagree.
constexpr std::array<DTypeTraits, 16> kSupported = {
    traits_of(DType::kF32),    traits_of(DType::kF16),  traits_of(DType::kBF16),
    traits_of(DType::kI32),    traits_of(DType::kQ4_0), traits_of(DType::kQ4_1),
    traits_of(DType::kQ5_0),   traits_of(DType::kQ5_1), traits_of(DType::kQ8_0),
    traits_of(DType::kQ2_K),   traits_of(DType::kQ3_K), traits_of(DType::kQ4_K),
    traits_of(DType::kQ5_K),   traits_of(DType::kQ6_K), traits_of(DType::kQ8_K),
    traits_of(DType::kIQ4_NL),
};

}  // namespace

const DTypeTraits& dtype_traits(DType type) {
  for (const DTypeTraits& t : kSupported) {
    if (t.type == type) return t;
  }
  // Only a cast from an unchecked code can get here; dtype_from_code guards
  // every code that comes from outside.
  throw Error(ErrorKind::kInternal, "dtype_traits: DType code " +
                                        std::to_string(static_cast<uint32_t>(type)) +
                                        " is not a supported type");
}

std::optional<DType> dtype_from_code(uint32_t code) noexcept {
  for (const DTypeTraits& t : kSupported) {
    if (static_cast<uint32_t>(t.type) == code) return t.type;
  }
  return std::nullopt;
}

std::string ggml_type_name(uint32_t code) {
  if (code < kGgmlTypes.size()) return std::string(kGgmlTypes[code].name);
  return "unknown(" + std::to_string(code) + ")";
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const DTypeTraits& t : kSupported) {
    if (t.name == name) return t.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> dtype_row_bytes(DType t, uint64_t n) noexcept {
  for (const DTypeTraits& traits : kSupported) {
    if (traits.type != t) continue;
    const auto block = static_cast<uint64_t>(traits.block_size);
    if (n % block != 0) return std::nullopt;
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(n / block, static_cast<uint64_t>(traits.block_bytes), &bytes)) {
      return std::nullopt;
    }
    return bytes;
  }
  return std::nullopt;
}

std::optional<GgmlTypeLayout> ggml_type_layout(uint32_t code) noexcept {
  if (code >= kGgmlTypes.size() || kGgmlTypes[code].block_size == 0) return std::nullopt;
  return GgmlTypeLayout{kGgmlTypes[code].block_size, kGgmlTypes[code].block_bytes};
}

}  // namespace duet
