// duet/app/gguf.h — reading and writing GGUF model files.
//
// GgufFile maps a GGUF v2 or v3 file read-only and validates its whole header
// (metadata and tensor table) when it is opened. The file is treated as
// hostile: every count, length, offset, dimension and type code is checked
// against the bytes left in the file and against fixed limits before it is
// used, so a malformed file yields duet::Error(ErrorKind::kModelFile) whose
// one-line message names the file, the field, the bad value and what is
// accepted — never a crash, an assert or an allocation larger than a small
// multiple of the file size. Tensor data is not touched when opening; it is
// paged in from the mapping when read.
//
// Rules enforced beyond the GGUF spec, each reported by name:
//   * metadata keys and tensor names are unique;
//   * bool values are 0 or 1;
//   * arrays nest at most kGgufMaxArrayDepth levels;
//   * general.alignment is a nonzero power of two;
//   * tensors have 1..4 dimensions, each at least 1 (empty tensors are
//     rejected: no model needs one and they hide mistakes in converters);
//   * every tensor type code names a ggml type whose layout is known (types
//     Duet cannot compute with are still accepted, see GgufTensorInfo);
//   * each tensor's data lies inside the file at an aligned offset.
//
// GgufWriter produces GGUF v3 files; Duet uses it to build small models for
// tests and tools.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "duet/dtype.h"
#include "duet/export.h"
#include "duet/tensor.h"

namespace duet {

inline constexpr uint32_t kGgufDefaultAlignment = 32;
// Deepest array nesting the reader accepts (an array of arrays is depth 2).
inline constexpr int kGgufMaxArrayDepth = 4;

// Metadata value type codes, as stored in the file.
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint8", "string", "array", ...; "unknown(N)" for codes outside the enum.
DUET_API std::string gguf_type_name(GgufType type);

// Storage layout of any ggml tensor type code, whether or not Duet computes
// with it, so tensors of unsupported types can still be sized and checked.
struct DUET_API GgmlTypeLayout {
  int64_t block_size;   // elements per block
  int64_t block_bytes;  // bytes per block
};

// nullopt for codes no ggml version defines and for types ggml has removed.
DUET_API std::optional<GgmlTypeLayout> ggml_type_layout(uint32_t code) noexcept;

class GgufValue;

// An array stored in a mapped file. Elements are decoded on request, so an
// open file costs no memory per array element. Valid while its GgufFile lives.
class DUET_API GgufArray {
 public:
  GgufType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  // Decodes every element; nested arrays come back as GgufArray views.
  // Allocates size() values: call it for arrays you mean to walk.
  std::vector<GgufValue> elements() const;

 private:
  friend class GgufFile;
  friend class GgufParser;
  GgufArray(GgufType element_type, uint64_t count, const uint8_t* payload, size_t payload_bytes)
      : element_type_(element_type),
        count_(count),
        payload_(payload),
        payload_bytes_(payload_bytes) {}

  GgufType element_type_;
  uint64_t count_;
  const uint8_t* payload_;  // the encoded elements, already validated
  size_t payload_bytes_;
};

// One metadata value of a mapped file. Strings are views into the mapping;
// valid while its GgufFile lives. Each as_*() returns empty when the value is
// not of that kind, so callers decide how to report a type mismatch.
class DUET_API GgufValue {
 public:
  GgufType type() const { return type_; }
  // Any integer type holding a nonnegative value.
  std::optional<uint64_t> as_uint() const;
  // Any integer type whose value fits in int64_t.
  std::optional<int64_t> as_int() const;
  // float32 or float64.
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;
  // Points into this GgufValue; copy the GgufArray (a small view) to keep it
  // beyond the value's life.
  const GgufArray* as_array() const;

 private:
  friend class GgufParser;
  using Payload = std::variant<uint64_t, int64_t, double, bool, std::string_view, GgufArray>;
  GgufValue(GgufType type, Payload payload) : type_(type), payload_(payload) {}

  GgufType type_;
  Payload payload_;
};

struct DUET_API GgufMetadataEntry {
  std::string_view key;  // view into the mapping
  GgufValue value;
};

// One entry of the tensor table. Valid while its GgufFile lives.
class DUET_API GgufTensorInfo {
 public:
  std::string_view name;       // view into the mapping
  uint32_t type_code = 0;      // the ggml type code stored in the file
  std::optional<DType> dtype;  // nullopt when Duet cannot compute with type_code
  Shape shape;                 // outermost first: GGUF's ne[] reversed
  uint64_t offset = 0;         // absolute offset of the data in the file
  uint64_t bytes = 0;          // size of the data

  bool supported() const { return dtype.has_value(); }
  std::string type_name() const { return ggml_type_name(type_code); }
  // The tensor's data in the read-only mapping (host memory). Throws
  // Error(kModelFile) naming the file, the tensor, its type and the supported
  // types when !supported().
  const void* data() const;

 private:
  friend class GgufParser;
  const void* data_ = nullptr;
  const std::filesystem::path* file_ = nullptr;
};

// A validated, memory-mapped GGUF file.
//
// Ownership: owns the mapping; every view it hands out (strings, arrays,
// tensor infos, tensor data) points into it and dies with it. Movable, not
// copyable; a moved-from GgufFile may only be destroyed or assigned to.
// Threading: immutable after open(); all const methods may be called from
// any number of threads at once.
// The file must not be truncated or rewritten while it is open: like any
// mapping, reading a page the file no longer has raises SIGBUS.
class DUET_API GgufFile {
 public:
  // Maps and validates `path`. Throws Error(kModelFile) if the file cannot be
  // opened or mapped, or is not a well-formed GGUF v2/v3 file.
  static GgufFile open(const std::filesystem::path& path);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::filesystem::path& path() const;
  uint64_t file_size() const;
  uint32_t version() const;
  // general.alignment, or kGgufDefaultAlignment when the key is absent.
  uint64_t alignment() const;
  // Absolute offset where the tensor data section starts.
  uint64_t data_offset() const;

  // All metadata in file order.
  const std::vector<GgufMetadataEntry>& metadata() const;
  // nullptr when the key is absent.
  const GgufValue* find(std::string_view key) const;

  // Typed getters. Each throws Error(kModelFile) naming the file, the key and
  // the expected type when the key is absent or holds another type (with a
  // "did you mean" for near-miss keys).
  std::string_view get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;  // any nonnegative integer
  int64_t get_int(std::string_view key) const;    // any integer fitting int64_t
  double get_float(std::string_view key) const;   // float32 or float64
  bool get_bool(std::string_view key) const;
  // Arrays: the views point into the mapping.
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;  // float32/float64 elements
  std::vector<int64_t> get_int_array(std::string_view key) const;  // any integer elements

  // Optional variants: nullopt when the key is absent; throw like the getters
  // when it is present with another type (that is a malformed file).
  std::optional<std::string_view> find_string(std::string_view key) const;
  std::optional<uint64_t> find_uint(std::string_view key) const;
  std::optional<int64_t> find_int(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;

  // The tensor table in file order.
  const std::vector<GgufTensorInfo>& tensors() const;
  // nullptr when there is no tensor of that name.
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Throws Error(kModelFile) naming the file and the tensor (with a "did you
  // mean") when there is no tensor of that name.
  const GgufTensorInfo& tensor(std::string_view name) const;

 private:
  friend class GgufParser;
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  const GgufValue& require(std::string_view key, std::string_view expected) const;
  [[noreturn]] void type_mismatch(std::string_view key, const GgufValue& value,
                                  std::string_view expected) const;
  const GgufArray& require_array(std::string_view key, std::string_view expected) const;

  std::unique_ptr<Impl> impl_;
};

// An array value under construction for GgufWriter::set_array. Elements are
// encoded as they are added. Each add_*() throws std::invalid_argument when
// the element does not suit element_type() (a string for a uint8 array, 300
// for a uint8, ...). Arrays may nest to any depth here; the reader accepts at
// most kGgufMaxArrayDepth.
class DUET_API GgufArrayBuilder {
 public:
  explicit GgufArrayBuilder(GgufType element_type);

  GgufType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }

  GgufArrayBuilder& add_uint(uint64_t value);  // uint8/16/32/64 arrays
  GgufArrayBuilder& add_int(int64_t value);    // int8/16/32/64 arrays
  GgufArrayBuilder& add_float(double value);   // float32/64 arrays
  GgufArrayBuilder& add_bool(bool value);
  GgufArrayBuilder& add_string(std::string_view value);
  GgufArrayBuilder& add_array(const GgufArrayBuilder& value);

 private:
  friend class GgufWriter;
  void require(bool ok, std::string_view what) const;

  GgufType element_type_;
  uint64_t count_ = 0;
  std::vector<uint8_t> payload_;  // encoded elements
};

// Builds a GGUF v3 file in memory and writes it out.
//
// Metadata keeps insertion order; setting a key again replaces its value in
// place. Tensor data is copied, so the caller's buffers may die after
// add_tensor(). Misuse (a bad shape, a byte count that does not match the
// shape, a duplicate tensor name) throws std::invalid_argument; failing to
// write the file throws Error(kModelFile). Not thread-safe.
class DUET_API GgufWriter {
 public:
  void set_uint8(std::string_view key, uint8_t value);
  void set_int8(std::string_view key, int8_t value);
  void set_uint16(std::string_view key, uint16_t value);
  void set_int16(std::string_view key, int16_t value);
  void set_uint32(std::string_view key, uint32_t value);
  void set_int32(std::string_view key, int32_t value);
  void set_uint64(std::string_view key, uint64_t value);
  void set_int64(std::string_view key, int64_t value);
  void set_float32(std::string_view key, float value);
  void set_float64(std::string_view key, double value);
  void set_bool(std::string_view key, bool value);
  void set_string(std::string_view key, std::string_view value);
  void set_array(std::string_view key, const GgufArrayBuilder& value);
  void set_string_array(std::string_view key, std::span<const std::string> values);
  void set_int32_array(std::string_view key, std::span<const int32_t> values);
  void set_float32_array(std::string_view key, std::span<const float> values);
  // Copies a value read from a GgufFile, arrays (nested too) included, with
  // its stored type; general.alignment is taken as set_alignment() takes it
  // (std::invalid_argument unless it is a nonzero power of two).
  void set_value(std::string_view key, const GgufValue& value);

  // Sets the data alignment and records it as general.alignment (uint32).
  // `alignment` must be a nonzero power of two. Setting general.alignment
  // through the other setters throws, so the key and the layout agree.
  void set_alignment(uint32_t alignment);

  // Adds a tensor. `shape` is outermost first (it is stored reversed);
  // `bytes` must equal the size the type and shape imply.
  void add_tensor(std::string_view name, DType type, const Shape& shape, const void* data,
                  size_t bytes);
  // The same for any ggml type code with a known layout, including types Duet
  // cannot compute with (iq4_xs, ...).
  void add_tensor(std::string_view name, uint32_t ggml_type_code, const Shape& shape,
                  const void* data, size_t bytes);
  // The same, taking the bytes over instead of copying them.
  void add_tensor(std::string_view name, uint32_t ggml_type_code, const Shape& shape,
                  std::vector<uint8_t> data);

  // Writes the file, replacing any existing one.
  void write(const std::filesystem::path& path) const;
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Entry {
    std::string key;
    std::vector<uint8_t> encoded;  // type code followed by the value
  };
  struct Tensor {
    std::string name;
    uint32_t type_code;
    Shape shape;
    std::vector<uint8_t> data;
  };
  using Sink = std::function<void(const void* data, size_t bytes)>;

  void put(std::string_view key, std::vector<uint8_t> encoded);
  void put_checked(std::string_view key, std::vector<uint8_t> encoded);
  void emit(const Sink& sink) const;

  uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<Entry> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace duet
