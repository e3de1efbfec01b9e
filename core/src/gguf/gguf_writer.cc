// GGUF v3 writer. Values are encoded as they are set, so the writer holds the
// file's bytes (minus padding) and write() is a straight copy.
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "duet/app/gguf.h"
#include "duet/error.h"

namespace duet {
namespace {

constexpr uint32_t kVersion = 3;
constexpr std::string_view kAlignmentKey = "general.alignment";

template <typename T>
void append(std::vector<uint8_t>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

void append_string(std::vector<uint8_t>& out, std::string_view text) {
  append<uint64_t>(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
}

template <typename T>
std::vector<uint8_t> encode(GgufType type, T value) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, static_cast<uint32_t>(type));
  append<T>(out, value);
  return out;
}

uint64_t align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

// --- arrays ------------------------------------------------------------------

GgufArrayBuilder::GgufArrayBuilder(GgufType element_type) : element_type_(element_type) {
  if (static_cast<uint32_t>(element_type) > static_cast<uint32_t>(GgufType::kFloat64)) {
    throw std::invalid_argument("GgufArrayBuilder: " + gguf_type_name(element_type) +
                                " is not a GGUF metadata type");
  }
}

void GgufArrayBuilder::require(bool ok, std::string_view what) const {
  if (!ok) {
    throw std::invalid_argument("GgufArrayBuilder: cannot add " + std::string(what) +
                                " to an array of " + gguf_type_name(element_type_));
  }
}

GgufArrayBuilder& GgufArrayBuilder::add_uint(uint64_t value) {
  const std::string what = "unsigned value " + std::to_string(value);
  switch (element_type_) {
    case GgufType::kUint8:
      require(value <= std::numeric_limits<uint8_t>::max(), what);
      append<uint8_t>(payload_, static_cast<uint8_t>(value));
      break;
    case GgufType::kUint16:
      require(value <= std::numeric_limits<uint16_t>::max(), what);
      append<uint16_t>(payload_, static_cast<uint16_t>(value));
      break;
    case GgufType::kUint32:
      require(value <= std::numeric_limits<uint32_t>::max(), what);
      append<uint32_t>(payload_, static_cast<uint32_t>(value));
      break;
    case GgufType::kUint64:
      append<uint64_t>(payload_, value);
      break;
    default:
      require(false, what);
  }
  ++count_;
  return *this;
}

GgufArrayBuilder& GgufArrayBuilder::add_int(int64_t value) {
  const std::string what = "signed value " + std::to_string(value);
  switch (element_type_) {
    case GgufType::kInt8:
      require(value >= std::numeric_limits<int8_t>::min() &&
                  value <= std::numeric_limits<int8_t>::max(),
              what);
      append<int8_t>(payload_, static_cast<int8_t>(value));
      break;
    case GgufType::kInt16:
      require(value >= std::numeric_limits<int16_t>::min() &&
                  value <= std::numeric_limits<int16_t>::max(),
              what);
      append<int16_t>(payload_, static_cast<int16_t>(value));
      break;
    case GgufType::kInt32:
      require(value >= std::numeric_limits<int32_t>::min() &&
                  value <= std::numeric_limits<int32_t>::max(),
              what);
      append<int32_t>(payload_, static_cast<int32_t>(value));
      break;
    case GgufType::kInt64:
      append<int64_t>(payload_, value);
      break;
    default:
      require(false, what);
  }
  ++count_;
  return *this;
}

GgufArrayBuilder& GgufArrayBuilder::add_float(double value) {
  if (element_type_ == GgufType::kFloat32) {
    append<float>(payload_, static_cast<float>(value));
  } else {
    require(element_type_ == GgufType::kFloat64, "a float");
    append<double>(payload_, value);
  }
  ++count_;
  return *this;
}

GgufArrayBuilder& GgufArrayBuilder::add_bool(bool value) {
  require(element_type_ == GgufType::kBool, "a bool");
  append<uint8_t>(payload_, value ? 1 : 0);
  ++count_;
  return *this;
}

GgufArrayBuilder& GgufArrayBuilder::add_string(std::string_view value) {
  require(element_type_ == GgufType::kString, "a string");
  append_string(payload_, value);
  ++count_;
  return *this;
}

GgufArrayBuilder& GgufArrayBuilder::add_array(const GgufArrayBuilder& value) {
  require(element_type_ == GgufType::kArray, "an array");
  // A nested array is stored like a top-level one minus the outer type code.
  append<uint32_t>(payload_, static_cast<uint32_t>(value.element_type_));
  append<uint64_t>(payload_, value.count_);
  payload_.insert(payload_.end(), value.payload_.begin(), value.payload_.end());
  ++count_;
  return *this;
}

// --- metadata ----------------------------------------------------------------

void GgufWriter::put(std::string_view key, std::vector<uint8_t> encoded) {
  for (Entry& e : metadata_) {
    if (e.key == key) {
      e.encoded = std::move(encoded);
      return;
    }
  }
  metadata_.push_back({std::string(key), std::move(encoded)});
}

void GgufWriter::put_checked(std::string_view key, std::vector<uint8_t> encoded) {
  if (key == kAlignmentKey) {
    throw std::invalid_argument("GgufWriter: set general.alignment with set_alignment()");
  }
  put(key, std::move(encoded));
}

void GgufWriter::set_uint8(std::string_view key, uint8_t value) {
  put_checked(key, encode(GgufType::kUint8, value));
}
void GgufWriter::set_int8(std::string_view key, int8_t value) {
  put_checked(key, encode(GgufType::kInt8, value));
}
void GgufWriter::set_uint16(std::string_view key, uint16_t value) {
  put_checked(key, encode(GgufType::kUint16, value));
}
void GgufWriter::set_int16(std::string_view key, int16_t value) {
  put_checked(key, encode(GgufType::kInt16, value));
}
void GgufWriter::set_uint32(std::string_view key, uint32_t value) {
  put_checked(key, encode(GgufType::kUint32, value));
}
void GgufWriter::set_int32(std::string_view key, int32_t value) {
  put_checked(key, encode(GgufType::kInt32, value));
}
void GgufWriter::set_uint64(std::string_view key, uint64_t value) {
  put_checked(key, encode(GgufType::kUint64, value));
}
void GgufWriter::set_int64(std::string_view key, int64_t value) {
  put_checked(key, encode(GgufType::kInt64, value));
}
void GgufWriter::set_float32(std::string_view key, float value) {
  put_checked(key, encode(GgufType::kFloat32, value));
}
void GgufWriter::set_float64(std::string_view key, double value) {
  put_checked(key, encode(GgufType::kFloat64, value));
}
void GgufWriter::set_bool(std::string_view key, bool value) {
  put_checked(key, encode(GgufType::kBool, static_cast<uint8_t>(value)));
}

void GgufWriter::set_string(std::string_view key, std::string_view value) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, static_cast<uint32_t>(GgufType::kString));
  append_string(out, value);
  put_checked(key, std::move(out));
}

void GgufWriter::set_array(std::string_view key, const GgufArrayBuilder& value) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, static_cast<uint32_t>(GgufType::kArray));
  append<uint32_t>(out, static_cast<uint32_t>(value.element_type_));
  append<uint64_t>(out, value.count_);
  out.insert(out.end(), value.payload_.begin(), value.payload_.end());
  put_checked(key, std::move(out));
}

void GgufWriter::set_string_array(std::string_view key, std::span<const std::string> values) {
  GgufArrayBuilder array(GgufType::kString);
  for (const std::string& v : values) array.add_string(v);
  set_array(key, array);
}

void GgufWriter::set_int32_array(std::string_view key, std::span<const int32_t> values) {
  GgufArrayBuilder array(GgufType::kInt32);
  for (int32_t v : values) array.add_int(v);
  set_array(key, array);
}

void GgufWriter::set_float32_array(std::string_view key, std::span<const float> values) {
  GgufArrayBuilder array(GgufType::kFloat32);
  for (float v : values) array.add_float(v);
  set_array(key, array);
}

namespace {

// A builder holding the elements of `array`, with its element type.
GgufArrayBuilder copy_array(const GgufArray& array) {
  GgufArrayBuilder out(array.element_type());
  for (const GgufValue& v : array.elements()) {
    switch (array.element_type()) {
      case GgufType::kUint8:
      case GgufType::kUint16:
      case GgufType::kUint32:
      case GgufType::kUint64:
        out.add_uint(*v.as_uint());
        break;
      case GgufType::kInt8:
      case GgufType::kInt16:
      case GgufType::kInt32:
      case GgufType::kInt64:
        out.add_int(*v.as_int());
        break;
      case GgufType::kFloat32:
      case GgufType::kFloat64:
        out.add_float(*v.as_float());
        break;
      case GgufType::kBool:
        out.add_bool(*v.as_bool());
        break;
      case GgufType::kString:
        out.add_string(*v.as_string());
        break;
      case GgufType::kArray:
        out.add_array(copy_array(*v.as_array()));
        break;
    }
  }
  return out;
}

}  // namespace

void GgufWriter::set_value(std::string_view key, const GgufValue& value) {
  if (key == kAlignmentKey) {
    const std::optional<uint64_t> a = value.as_uint();
    if (!a || *a > std::numeric_limits<uint32_t>::max()) {
      throw std::invalid_argument("GgufWriter: general.alignment must be a uint32 power of two");
    }
    set_alignment(static_cast<uint32_t>(*a));
    return;
  }
  switch (value.type()) {
    case GgufType::kUint8:
      return set_uint8(key, static_cast<uint8_t>(*value.as_uint()));
    case GgufType::kInt8:
      return set_int8(key, static_cast<int8_t>(*value.as_int()));
    case GgufType::kUint16:
      return set_uint16(key, static_cast<uint16_t>(*value.as_uint()));
    case GgufType::kInt16:
      return set_int16(key, static_cast<int16_t>(*value.as_int()));
    case GgufType::kUint32:
      return set_uint32(key, static_cast<uint32_t>(*value.as_uint()));
    case GgufType::kInt32:
      return set_int32(key, static_cast<int32_t>(*value.as_int()));
    case GgufType::kUint64:
      return set_uint64(key, *value.as_uint());
    case GgufType::kInt64:
      return set_int64(key, *value.as_int());
    case GgufType::kFloat32:
      return set_float32(key, static_cast<float>(*value.as_float()));
    case GgufType::kFloat64:
      return set_float64(key, *value.as_float());
    case GgufType::kBool:
      return set_bool(key, *value.as_bool());
    case GgufType::kString:
      return set_string(key, *value.as_string());
    case GgufType::kArray:
      return set_array(key, copy_array(*value.as_array()));
  }
}

void GgufWriter::set_alignment(uint32_t alignment) {
  if (!std::has_single_bit(alignment)) {
    throw std::invalid_argument("GgufWriter: alignment " + std::to_string(alignment) +
                                " is not a nonzero power of two");
  }
  alignment_ = alignment;
  put(kAlignmentKey, encode(GgufType::kUint32, alignment));
}

// --- tensors -----------------------------------------------------------------

void GgufWriter::add_tensor(std::string_view name, DType type, const Shape& shape, const void* data,
                            size_t bytes) {
  add_tensor(name, static_cast<uint32_t>(type), shape, data, bytes);
}

void GgufWriter::add_tensor(std::string_view name, uint32_t ggml_type_code, const Shape& shape,
                            const void* data, size_t bytes) {
  const auto* begin = static_cast<const uint8_t*>(data);
  add_tensor(name, ggml_type_code, shape, std::vector<uint8_t>(begin, begin + bytes));
}

void GgufWriter::add_tensor(std::string_view name, uint32_t ggml_type_code, const Shape& shape,
                            std::vector<uint8_t> data) {
  const size_t bytes = data.size();
  const std::string label = "GgufWriter: tensor '" + std::string(name) + "'";
  const std::optional<GgmlTypeLayout> layout = ggml_type_layout(ggml_type_code);
  if (!layout) {
    throw std::invalid_argument(label + " has type " + ggml_type_name(ggml_type_code) +
                                ", whose layout is unknown");
  }
  if (shape.rank < 1 || shape.rank > kMaxDims) {
    throw std::invalid_argument(label + " has rank " + std::to_string(shape.rank) +
                                "; accepted: 1 to " + std::to_string(kMaxDims));
  }
  for (int d = 0; d < shape.rank; ++d) {
    if (shape[d] < 1) {
      throw std::invalid_argument(label + " shape " + shape.str() + " has a dimension below 1");
    }
  }
  uint64_t expected = 0;
  if (shape.innermost() % layout->block_size != 0 ||
      __builtin_mul_overflow(static_cast<uint64_t>(shape.elements() / layout->block_size),
                             static_cast<uint64_t>(layout->block_bytes), &expected)) {
    throw std::invalid_argument(label + " shape " + shape.str() + " does not fit type " +
                                ggml_type_name(ggml_type_code));
  }
  if (bytes != expected) {
    throw std::invalid_argument(label + " has " + std::to_string(bytes) + " bytes; " +
                                ggml_type_name(ggml_type_code) + " " + shape.str() + " takes " +
                                std::to_string(expected));
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) throw std::invalid_argument(label + " was already added");
  }
  tensors_.push_back({std::string(name), ggml_type_code, shape, std::move(data)});
}

// --- output ------------------------------------------------------------------

void GgufWriter::emit(const Sink& sink) const {
  std::vector<uint8_t> header;
  header.insert(header.end(), {'G', 'G', 'U', 'F'});
  append<uint32_t>(header, kVersion);
  append<uint64_t>(header, tensors_.size());
  append<uint64_t>(header, metadata_.size());
  for (const Entry& e : metadata_) {
    append_string(header, e.key);
    header.insert(header.end(), e.encoded.begin(), e.encoded.end());
  }
  uint64_t offset = 0;  // relative to the data section
  for (const Tensor& t : tensors_) {
    append_string(header, t.name);
    append<uint32_t>(header, static_cast<uint32_t>(t.shape.rank));
    for (int d = t.shape.rank - 1; d >= 0; --d) {  // GGUF stores innermost first
      append<uint64_t>(header, static_cast<uint64_t>(t.shape[d]));
    }
    append<uint32_t>(header, t.type_code);
    append<uint64_t>(header, offset);
    offset = align_up(offset + t.data.size(), alignment_);
  }
  header.resize(align_up(header.size(), alignment_), 0);
  sink(header.data(), header.size());

  // Every tensor is padded to the alignment, the last one included, as ggml does.
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (const Tensor& t : tensors_) {
    sink(t.data.data(), t.data.size());
    sink(zeros.data(), align_up(t.data.size(), alignment_) - t.data.size());
  }
}

void GgufWriter::write(const std::filesystem::path& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    throw Error(ErrorKind::kModelFile,
                "cannot write model file '" + path.string() + "': " + std::strerror(errno));
  }
  emit([&](const void* data, size_t bytes) {
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  });
  out.close();
  if (!out) {
    throw Error(ErrorKind::kModelFile,
                "cannot write model file '" + path.string() + "': " + std::strerror(errno));
  }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  emit([&](const void* data, size_t bytes) {
    const auto* begin = static_cast<const uint8_t*>(data);
    out.insert(out.end(), begin, begin + bytes);
  });
  return out;
}

}  // namespace duet
