// duet/dtype.h — element types of tensors and their storage layout.
//
// The numeric codes equal GGUF's tensor type codes (ggml_type), so a type read
// from a file needs no translation. Block-quantized types store `block_size`
// elements in `block_bytes` bytes; a row of n elements (n a multiple of the
// block size) takes n / block_size * block_bytes bytes. Their layouts are
// defined in duet/block_formats.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "duet/export.h"

namespace duet {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,     // 32 elements, 4-bit q: x = d * (q - 8)
  kQ4_1 = 3,     // 32 elements, 4-bit q: x = d * q + m
  kQ5_0 = 6,     // 32 elements, 5-bit q: x = d * (q - 16)
  kQ5_1 = 7,     // 32 elements, 5-bit q: x = d * q + m
  kQ8_0 = 8,     // 32 elements, int8 q: x = d * q
  kQ2_K = 10,    // 256 elements, 2-bit q, 4-bit scales and mins per 16
  kQ3_K = 11,    // 256 elements, 3-bit q, 6-bit scales per 16
  kQ4_K = 12,    // 256 elements, 4-bit q, 6-bit scales and mins per 32
  kQ5_K = 13,    // 256 elements, 5-bit q, 6-bit scales and mins per 32
  kQ6_K = 14,    // 256 elements, 6-bit q, int8 scales per 16
  kQ8_K = 15,    // 256 elements, int8 q, f32 scale: the activations of K-quant dot products
  kIQ4_NL = 20,  // 32 elements, 4-bit index q into 16 fixed int8 levels: x = d * level[q]
  kI32 = 26,
  kBF16 = 30,
};

struct DUET_API DTypeTraits {
  DType type;
  std::string_view name;  // "f32", "q4_1", ...
  int64_t block_size;     // elements per block (1 for scalar types)
  int64_t block_bytes;    // bytes per block
};

// Traits of a supported type.
DUET_API const DTypeTraits& dtype_traits(DType type);

// Looks up a GGUF/ggml type code. Returns nullopt for codes Duet does not
// support (the caller reports them by name with ggml_type_name()).
DUET_API std::optional<DType> dtype_from_code(uint32_t code) noexcept;

// Name of any ggml type code, supported or not ("q5_k", ...); "unknown(N)"
// for codes that no ggml version defines.
DUET_API std::string ggml_type_name(uint32_t code);

// Looks up a type by its lower-case name ("f32", "q8_0"); nullopt if unknown.
DUET_API std::optional<DType> dtype_from_name(std::string_view name) noexcept;

inline std::string_view dtype_name(DType t) { return dtype_traits(t).name; }

// Whether `t` stores blocks of several elements (q4_0 ... q8_k) rather than
// one value per element (f32, f16, bf16, i32).
inline bool is_block_quantized(DType t) { return dtype_traits(t).block_size > 1; }

// Bytes taken by `n` elements. REQUIRES: n is a multiple of the block size.
// Returns nullopt if n is not a multiple of the block size or on overflow.
DUET_API std::optional<uint64_t> dtype_row_bytes(DType t, uint64_t n) noexcept;

}  // namespace duet
