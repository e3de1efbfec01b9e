// GGUF reader: maps the file and validates the whole header before anything
// is handed out. Every number read from the file is checked against the bytes
// that remain before it sizes a loop, an allocation or a pointer.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "duet/app/gguf.h"
#include "duet/app/suggest.h"
#include "duet/error.h"

namespace duet {

static_assert(std::endian::native == std::endian::little,
              "GGUF files are little-endian and are read in place");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kLastTypeCode = static_cast<uint32_t>(GgufType::kFloat64);
// Smallest possible records, used to bound counts before looping over them:
// a metadata entry is a key length, a type code and at least one value byte;
// a tensor entry is a name length, a dimension count, one dimension, a type
// code and an offset.
constexpr uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorEntryBytes = 8 + 4 + 8 + 4 + 8;
constexpr size_t kMaxQuotedChars = 96;
// ggml type codes are 0..39 today; codes below this with no layout were removed.
constexpr uint32_t kGgmlTypeCodes = 40;

// Names and keys come from the file: quote them so a message stays one line
// and a hostile name cannot fake the rest of it.
std::string printable(std::string_view text) {
  std::string out = "'";
  const size_t n = std::min(text.size(), kMaxQuotedChars);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > n) out += "...";
  return out + "'";
}

std::string file_prefix(const std::filesystem::path& path) {
  return "model file " + printable(path.string()) + ": ";
}

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorKind::kModelFile, message); }

// Where in the file a value sits, rendered only when something is wrong:
// "metadata key 'x'" for a record, "metadata key 'x'[3][0]" inside arrays.
struct Where {
  std::string_view record;
  const Where* parent = nullptr;
  uint64_t index = 0;

  Where child(uint64_t i) const { return Where{{}, this, i}; }
  std::string str() const {
    if (parent == nullptr) return std::string(record);
    return parent->str() + "[" + std::to_string(index) + "]";
  }
};

class Cursor {
 public:
  Cursor(const uint8_t* begin, size_t size) : begin_(begin), size_(size) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return begin_ + pos_; }

  void need(uint64_t n, const Where& where, std::string_view what) const {
    if (n > remaining()) {
      fail("truncated: " + where.str() + " " + std::string(what) + " at offset " +
           std::to_string(pos_) + " needs " + std::to_string(n) + " bytes but only " +
           std::to_string(remaining()) + " remain");
    }
  }

  void skip(uint64_t n, const Where& where, std::string_view what) {
    need(n, where, what);
    pos_ += static_cast<size_t>(n);
  }

  template <typename T>
  T read(const Where& where, std::string_view what) {
    need(sizeof(T), where, what);
    T value;
    std::memcpy(&value, begin_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string_view read_string(const Where& where, std::string_view what) {
    const auto length = read<uint64_t>(where, std::string(what) + " length");
    if (length > remaining()) {
      fail(where.str() + " " + std::string(what) + " length " + std::to_string(length) +
           " exceeds the " + std::to_string(remaining()) + " bytes left in the file");
    }
    std::string_view text(reinterpret_cast<const char*>(here()), static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return text;
  }

 private:
  const uint8_t* begin_;
  size_t size_;
  size_t pos_ = 0;
};

// Bytes of one element of a fixed-size type; 0 for strings and arrays.
uint64_t fixed_size(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

// Fewest bytes one element can take: a string is at least its length field,
// an array at least its element type and count.
uint64_t min_encoded_size(GgufType type) {
  if (type == GgufType::kString) return 8;
  if (type == GgufType::kArray) return 4 + 8;
  return fixed_size(type);
}

std::string supported_type_names() {
  std::string out;
  for (uint32_t code = 0; code < kGgmlTypeCodes; ++code) {
    if (!dtype_from_code(code)) continue;
    if (!out.empty()) out += ", ";
    out += ggml_type_name(code);
  }
  return out;
}

class Mapping {
 public:
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (addr_ != nullptr) munmap(addr_, size_);
  }

  void reset(void* addr, size_t size) {
    addr_ = addr;
    size_ = size;
  }
  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  size_t size() const { return size_; }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

struct DUET_LOCAL GgufFile::Impl {
  std::filesystem::path path;
  Mapping mapping;
  uint32_t version = 0;
  uint64_t alignment = kGgufDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<GgufMetadataEntry> metadata;
  std::unordered_map<std::string_view, size_t> key_index;
  std::vector<GgufTensorInfo> tensors;
  std::unordered_map<std::string_view, size_t> tensor_index;
};

// Decodes and validates; a friend of the value types so it can build them.
class GgufParser {
 public:
  static void parse(GgufFile::Impl& file);

  // Calls f(value) for each element of a validated array.
  template <typename F>
  static void for_each_element(const GgufArray& array, F&& f) {
    Cursor cursor(array.payload_, array.payload_bytes_);
    const Where where{"array"};
    for (uint64_t i = 0; i < array.count_; ++i) {
      f(read_value(cursor, array.element_type_, where.child(i), 1));
    }
  }

 private:
  static GgufType read_type(Cursor& c, const Where& where, std::string_view what);
  // `depth` is the nesting level of an array value (1 for a top-level one).
  static GgufValue read_value(Cursor& c, GgufType type, const Where& where, int depth);
  static GgufArray read_array(Cursor& c, const Where& where, int depth);
  static void parse_header(GgufFile::Impl& file, Cursor& c, uint64_t& tensor_count,
                           uint64_t& kv_count);
  static void parse_metadata(GgufFile::Impl& file, Cursor& c, uint64_t kv_count);
  static void parse_alignment(GgufFile::Impl& file);
  static void parse_tensor_table(GgufFile::Impl& file, Cursor& c, uint64_t tensor_count);
  static void place_tensors(GgufFile::Impl& file, uint64_t header_end);
};

GgufType GgufParser::read_type(Cursor& c, const Where& where, std::string_view what) {
  const auto code = c.read<uint32_t>(where, what);
  if (code > kLastTypeCode) {
    fail(where.str() + " " + std::string(what) + " " + std::to_string(code) +
         " is not a GGUF metadata type (accepted: 0.." + std::to_string(kLastTypeCode) + ")");
  }
  return static_cast<GgufType>(code);
}

GgufValue GgufParser::read_value(Cursor& c, GgufType type, const Where& where, int depth) {
  switch (type) {
    case GgufType::kUint8:
      return {type, uint64_t{c.read<uint8_t>(where, "value")}};
    case GgufType::kUint16:
      return {type, uint64_t{c.read<uint16_t>(where, "value")}};
    case GgufType::kUint32:
      return {type, uint64_t{c.read<uint32_t>(where, "value")}};
    case GgufType::kUint64:
      return {type, c.read<uint64_t>(where, "value")};
    case GgufType::kInt8:
      return {type, int64_t{c.read<int8_t>(where, "value")}};
    case GgufType::kInt16:
      return {type, int64_t{c.read<int16_t>(where, "value")}};
    case GgufType::kInt32:
      return {type, int64_t{c.read<int32_t>(where, "value")}};
    case GgufType::kInt64:
      return {type, c.read<int64_t>(where, "value")};
    case GgufType::kFloat32:
      return {type, double{c.read<float>(where, "value")}};
    case GgufType::kFloat64:
      return {type, c.read<double>(where, "value")};
    case GgufType::kBool: {
      const auto byte = c.read<uint8_t>(where, "value");
      if (byte > 1) {
        fail(where.str() + " bool value " + std::to_string(byte) + " is not 0 or 1");
      }
      return {type, byte == 1};
    }
    case GgufType::kString:
      return {type, c.read_string(where, "string")};
    case GgufType::kArray:
      return {type, read_array(c, where, depth)};
  }
  fail(where.str() + " has an invalid value type");  // read_type admits no other code
}

GgufArray GgufParser::read_array(Cursor& c, const Where& where, int depth) {
  const GgufType element = read_type(c, where, "array element type");
  const auto count = c.read<uint64_t>(where, "array length");
  const uint64_t min_size = min_encoded_size(element);
  if (count > c.remaining() / min_size) {
    fail(where.str() + " array length " + std::to_string(count) + " of " + gguf_type_name(element) +
         " (at least " + std::to_string(min_size) + " bytes each) exceeds the " +
         std::to_string(c.remaining()) + " bytes left in the file");
  }
  if (element == GgufType::kArray && depth >= kGgufMaxArrayDepth) {
    fail(where.str() + " nests arrays deeper than " + std::to_string(kGgufMaxArrayDepth) +
         " levels (accepted: at most " + std::to_string(kGgufMaxArrayDepth) + ")");
  }
  const uint8_t* payload = c.here();
  const size_t start = c.offset();
  if (element == GgufType::kBool) {
    for (uint64_t i = 0; i < count; ++i) read_value(c, element, where.child(i), depth);
  } else if (const uint64_t size = fixed_size(element); size != 0) {
    c.skip(count * size, where, "array data");  // count * size <= remaining: no overflow
  } else {
    // Strings and arrays are walked once here so that decoding later cannot
    // fail; the walk is linear in the bytes it covers.
    for (uint64_t i = 0; i < count; ++i) {
      const Where item = where.child(i);
      if (element == GgufType::kString) {
        c.read_string(item, "string");
      } else {
        read_array(c, item, depth + 1);
      }
    }
  }
  return GgufArray(element, count, payload, c.offset() - start);
}

void GgufParser::parse_header(GgufFile::Impl& file, Cursor& c, uint64_t& tensor_count,
                              uint64_t& kv_count) {
  const Where header{"header"};
  if (file.mapping.size() < 4 || std::memcmp(file.mapping.data(), &kMagic, sizeof(kMagic)) != 0) {
    const size_t n = std::min<size_t>(file.mapping.size(), 4);
    fail("is not a GGUF file: it starts with " +
         printable({reinterpret_cast<const char*>(file.mapping.data()), n}) + " instead of 'GGUF'");
  }
  c.skip(4, header, "magic");
  const auto version = c.read<uint32_t>(header, "version");
  if (version == 1) {
    fail(
        "GGUF version 1 is not supported (accepted: 2, 3); re-convert the model with a "
        "current llama.cpp");
  }
  if (version == 0x02000000 || version == 0x03000000) {  // 2 or 3 written big-endian
    fail("is a big-endian GGUF file (its version field reads " + std::to_string(version) +
         " little-endian); only little-endian files are supported");
  }
  if (version != 2 && version != 3) {
    fail("GGUF version " + std::to_string(version) + " is not supported (accepted: 2, 3)");
  }
  file.version = version;
  tensor_count = c.read<uint64_t>(header, "tensor count");
  kv_count = c.read<uint64_t>(header, "metadata count");
  const uint64_t left = c.remaining();
  if (tensor_count > left / kMinTensorEntryBytes) {
    fail("header tensor count " + std::to_string(tensor_count) + " is impossible: each " +
         "tensor entry takes at least " + std::to_string(kMinTensorEntryBytes) + " bytes and " +
         std::to_string(left) + " bytes follow the header (accepted: at most " +
         std::to_string(left / kMinTensorEntryBytes) + ")");
  }
  if (kv_count > left / kMinMetadataEntryBytes) {
    fail("header metadata count " + std::to_string(kv_count) + " is impossible: each " +
         "metadata entry takes at least " + std::to_string(kMinMetadataEntryBytes) + " bytes and " +
         std::to_string(left) + " bytes follow the header (accepted: at most " +
         std::to_string(left / kMinMetadataEntryBytes) + ")");
  }
  // Both counts are bounded above, so the sum cannot overflow.
  if (tensor_count * kMinTensorEntryBytes + kv_count * kMinMetadataEntryBytes > left) {
    fail("header counts (" + std::to_string(tensor_count) + " tensors, " +
         std::to_string(kv_count) + " metadata entries) need more than the " +
         std::to_string(left) + " bytes that follow the header");
  }
}

void GgufParser::parse_metadata(GgufFile::Impl& file, Cursor& c, uint64_t kv_count) {
  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string entry_label = "metadata entry #" + std::to_string(i);
    const std::string_view key = c.read_string(Where{entry_label}, "key");
    const std::string key_label = "metadata key " + printable(key);
    const Where where{key_label};
    if (auto it = file.key_index.find(key); it != file.key_index.end()) {
      fail("duplicate " + key_label + " (entries #" + std::to_string(it->second) + " and #" +
           std::to_string(i) + "); keys must be unique");
    }
    const GgufType type = read_type(c, where, "value type");
    file.key_index.emplace(key, file.metadata.size());
    file.metadata.push_back({key, read_value(c, type, where, 1)});
  }
}

void GgufParser::parse_alignment(GgufFile::Impl& file) {
  const auto it = file.key_index.find("general.alignment");
  if (it == file.key_index.end()) return;
  const GgufValue& value = file.metadata[it->second].value;
  const std::optional<uint64_t> alignment = value.as_uint();
  if (!alignment) {
    fail("metadata key 'general.alignment' has type " + gguf_type_name(value.type()) +
         "; expected a nonnegative integer");
  }
  if (*alignment == 0 || !std::has_single_bit(*alignment)) {
    fail("general.alignment " + std::to_string(*alignment) +
         " is not accepted (accepted: a nonzero power of two, usually 32)");
  }
  file.alignment = *alignment;
}

void GgufParser::parse_tensor_table(GgufFile::Impl& file, Cursor& c, uint64_t tensor_count) {
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const std::string entry_label = "tensor #" + std::to_string(i);
    const std::string_view name = c.read_string(Where{entry_label}, "name");
    const std::string label = "tensor " + printable(name);
    const Where where{label};

    const auto n_dims = c.read<uint32_t>(where, "dimension count");
    if (n_dims < 1 || n_dims > static_cast<uint32_t>(kMaxDims)) {
      fail(label + " has " + std::to_string(n_dims) + " dimensions (accepted: 1 to " +
           std::to_string(kMaxDims) + ")");
    }
    std::array<uint64_t, kMaxDims> ne{};  // innermost first, as stored
    for (uint32_t d = 0; d < n_dims; ++d) ne[d] = c.read<uint64_t>(where, "dimension");
    const auto type_code = c.read<uint32_t>(where, "type");
    const auto offset = c.read<uint64_t>(where, "data offset");

    if (auto it = file.tensor_index.find(name); it != file.tensor_index.end()) {
      fail("duplicate " + label + " (tensors #" + std::to_string(it->second) + " and #" +
           std::to_string(i) + "); tensor names must be unique");
    }

    GgufTensorInfo info;
    info.name = name;
    info.type_code = type_code;
    info.dtype = dtype_from_code(type_code);
    info.offset = offset;  // relative until place_tensors()
    info.shape.rank = static_cast<int>(n_dims);
    std::string shape_text = "[";
    for (uint32_t d = 0; d < n_dims; ++d) {
      shape_text += (d == 0 ? "" : ", ") + std::to_string(ne[n_dims - 1 - d]);
    }
    shape_text += "] (outermost first)";
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      if (ne[d] == 0) {
        fail(label + " shape " + shape_text + " has a zero dimension (accepted: every " +
             "dimension at least 1)");
      }
      if (ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(elements, static_cast<int64_t>(ne[d]), &elements)) {
        fail(label + " shape " + shape_text + " has more elements than fit in 64 bits");
      }
      info.shape.dims[n_dims - 1 - d] = static_cast<int64_t>(ne[d]);
    }

    const std::optional<GgmlTypeLayout> layout = ggml_type_layout(type_code);
    if (!layout) {
      if (type_code < kGgmlTypeCodes) {
        fail(label + " has type " + ggml_type_name(type_code) + " (code " +
             std::to_string(type_code) + "), which ggml has removed; re-convert the model");
      }
      fail(label + " has unknown type code " + std::to_string(type_code) +
           " (accepted: ggml type codes 0.." + std::to_string(kGgmlTypeCodes - 1) + ")");
    }
    const auto block_size = static_cast<uint64_t>(layout->block_size);
    if (ne[0] % block_size != 0) {
      fail(label + " innermost dimension " + std::to_string(ne[0]) + " is not a multiple of " +
           "the " + ggml_type_name(type_code) + " block size " + std::to_string(block_size));
    }
    if (__builtin_mul_overflow(static_cast<uint64_t>(elements) / block_size,
                               static_cast<uint64_t>(layout->block_bytes), &info.bytes)) {
      fail(label + " shape " + shape_text + " takes more bytes than fit in 64 bits");
    }
    file.tensor_index.emplace(name, file.tensors.size());
    file.tensors.push_back(info);
  }
}

void GgufParser::place_tensors(GgufFile::Impl& file, uint64_t header_end) {
  const uint64_t a = file.alignment;
  if (__builtin_add_overflow(header_end, a - 1, &file.data_offset)) {
    fail("general.alignment " + std::to_string(a) + " places the data section past 2^64");
  }
  file.data_offset -= file.data_offset % a;
  const uint64_t size = file.mapping.size();
  for (GgufTensorInfo& info : file.tensors) {
    const std::string label = "tensor " + printable(info.name);
    if (info.offset % a != 0) {
      fail(label + " offset " + std::to_string(info.offset) + " is not a multiple of alignment " +
           std::to_string(a));
    }
    uint64_t begin = 0;
    uint64_t end = 0;
    if (__builtin_add_overflow(file.data_offset, info.offset, &begin) ||
        __builtin_add_overflow(begin, info.bytes, &end) || end > size) {
      fail(label + " data (offset " + std::to_string(info.offset) + ", " +
           std::to_string(info.bytes) + " bytes, data section at " +
           std::to_string(file.data_offset) + ") lies outside the file of " + std::to_string(size) +
           " bytes");
    }
    info.offset = begin;
    info.data_ = file.mapping.data() + begin;
    info.file_ = &file.path;
  }
}

void GgufParser::parse(GgufFile::Impl& file) {
  Cursor c(file.mapping.data(), file.mapping.size());
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
  parse_header(file, c, tensor_count, kv_count);
  parse_metadata(file, c, kv_count);
  parse_alignment(file);
  parse_tensor_table(file, c, tensor_count);
  place_tensors(file, c.offset());
}

// --- values ------------------------------------------------------------------

std::string gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "unknown(" + std::to_string(static_cast<uint32_t>(type)) + ")";
}

std::vector<GgufValue> GgufArray::elements() const {
  std::vector<GgufValue> out;
  out.reserve(static_cast<size_t>(count_));  // count_ was bounded by the file size
  GgufParser::for_each_element(*this, [&](const GgufValue& v) { out.push_back(v); });
  return out;
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&payload_)) return *u;
  if (const auto* i = std::get_if<int64_t>(&payload_); i && *i >= 0) {
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<int64_t> GgufValue::as_int() const {
  if (const auto* i = std::get_if<int64_t>(&payload_)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&payload_);
      u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (const auto* f = std::get_if<double>(&payload_)) return *f;
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&payload_)) return *b;
  return std::nullopt;
}

std::optional<std::string_view> GgufValue::as_string() const {
  if (const auto* s = std::get_if<std::string_view>(&payload_)) return *s;
  return std::nullopt;
}

const GgufArray* GgufValue::as_array() const { return std::get_if<GgufArray>(&payload_); }

const void* GgufTensorInfo::data() const {
  if (!supported()) {
    throw Error(ErrorKind::kModelFile,
                file_prefix(*file_) + "tensor " + printable(name) + " has type " + type_name() +
                    ", which Duet does not support (supported: " + supported_type_names() +
                    "); re-quantize the model to one of them");
  }
  return data_;
}

// --- the file ----------------------------------------------------------------

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  const std::string prefix = file_prefix(path);

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(prefix + "cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(prefix + "cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(prefix + "is not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    fail(prefix + "is empty (0 bytes); expected a GGUF file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (addr == MAP_FAILED) {
    fail(prefix + "cannot map " + std::to_string(size) + " bytes: " + std::strerror(map_err));
  }
  impl->mapping.reset(addr, size);

  try {
    GgufParser::parse(*impl);
  } catch (const Error& e) {
    fail(prefix + e.what());
  }
  return GgufFile(std::move(impl));
}

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

const std::filesystem::path& GgufFile::path() const { return impl_->path; }
uint64_t GgufFile::file_size() const { return impl_->mapping.size(); }
uint32_t GgufFile::version() const { return impl_->version; }
uint64_t GgufFile::alignment() const { return impl_->alignment; }
uint64_t GgufFile::data_offset() const { return impl_->data_offset; }
const std::vector<GgufMetadataEntry>& GgufFile::metadata() const { return impl_->metadata; }
const std::vector<GgufTensorInfo>& GgufFile::tensors() const { return impl_->tensors; }

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = impl_->key_index.find(key);
  return it == impl_->key_index.end() ? nullptr : &impl_->metadata[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  if (const GgufTensorInfo* info = find_tensor(name)) return *info;
  std::vector<std::string> names;
  for (const GgufTensorInfo& t : impl_->tensors) names.emplace_back(t.name);
  fail(file_prefix(impl_->path) + "has no tensor " + printable(name) + did_you_mean(name, names));
}

const GgufValue& GgufFile::require(std::string_view key, std::string_view expected) const {
  if (const GgufValue* value = find(key)) return *value;
  std::vector<std::string> keys;
  for (const GgufMetadataEntry& e : impl_->metadata) keys.emplace_back(e.key);
  fail(file_prefix(impl_->path) + "metadata key " + printable(key) + " is missing (expected " +
       std::string(expected) + ")" + did_you_mean(key, keys));
}

void GgufFile::type_mismatch(std::string_view key, const GgufValue& value,
                             std::string_view expected) const {
  std::string found = gguf_type_name(value.type());
  if (const GgufArray* array = value.as_array()) {
    found = "array of " + gguf_type_name(array->element_type());
  } else if (const auto i = value.as_int()) {
    found += " " + std::to_string(*i);
  } else if (const auto u = value.as_uint()) {
    found += " " + std::to_string(*u);
  }
  fail(file_prefix(impl_->path) + "metadata key " + printable(key) + " is " + found +
       "; expected " + std::string(expected));
}

const GgufArray& GgufFile::require_array(std::string_view key, std::string_view expected) const {
  const GgufValue& value = require(key, expected);
  const GgufArray* array = value.as_array();
  if (array == nullptr) type_mismatch(key, value, expected);
  return *array;
}

namespace {
constexpr std::string_view kExpectString = "a string";
constexpr std::string_view kExpectUint = "a nonnegative integer";
constexpr std::string_view kExpectInt = "an integer that fits int64";
constexpr std::string_view kExpectFloat = "a float32 or float64";
constexpr std::string_view kExpectBool = "a bool";
constexpr std::string_view kExpectStringArray = "an array of string";
constexpr std::string_view kExpectFloatArray = "an array of float32 or float64";
constexpr std::string_view kExpectIntArray = "an array of integers that fit int64";
}  // namespace

std::string_view GgufFile::get_string(std::string_view key) const {
  const GgufValue& value = require(key, kExpectString);
  if (const auto s = value.as_string()) return *s;
  type_mismatch(key, value, kExpectString);
}

uint64_t GgufFile::get_uint(std::string_view key) const {
  const GgufValue& value = require(key, kExpectUint);
  if (const auto u = value.as_uint()) return *u;
  type_mismatch(key, value, kExpectUint);
}

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufValue& value = require(key, kExpectInt);
  if (const auto i = value.as_int()) return *i;
  type_mismatch(key, value, kExpectInt);
}

double GgufFile::get_float(std::string_view key) const {
  const GgufValue& value = require(key, kExpectFloat);
  if (const auto f = value.as_float()) return *f;
  type_mismatch(key, value, kExpectFloat);
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue& value = require(key, kExpectBool);
  if (const auto b = value.as_bool()) return *b;
  type_mismatch(key, value, kExpectBool);
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufArray& array = require_array(key, kExpectStringArray);
  if (array.element_type() != GgufType::kString) type_mismatch(key, *find(key), kExpectStringArray);
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(array.size()));
  GgufParser::for_each_element(array, [&](const GgufValue& v) { out.push_back(*v.as_string()); });
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const GgufArray& array = require_array(key, kExpectFloatArray);
  if (array.element_type() != GgufType::kFloat32 && array.element_type() != GgufType::kFloat64) {
    type_mismatch(key, *find(key), kExpectFloatArray);
  }
  std::vector<float> out;
  out.reserve(static_cast<size_t>(array.size()));
  GgufParser::for_each_element(
      array, [&](const GgufValue& v) { out.push_back(static_cast<float>(*v.as_float())); });
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufArray& array = require_array(key, kExpectIntArray);
  switch (array.element_type()) {
    case GgufType::kFloat32:
    case GgufType::kFloat64:
    case GgufType::kBool:
    case GgufType::kString:
    case GgufType::kArray:
      type_mismatch(key, *find(key), kExpectIntArray);
    default:
      break;
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(array.size()));
  GgufParser::for_each_element(array, [&](const GgufValue& v) {
    const std::optional<int64_t> i = v.as_int();
    if (!i) {
      fail(file_prefix(impl_->path) + "metadata key " + printable(key) + " element " +
           std::to_string(out.size()) + " is " + std::to_string(*v.as_uint()) + "; expected " +
           std::string(kExpectIntArray));
    }
    out.push_back(*i);
  });
  return out;
}

std::optional<std::string_view> GgufFile::find_string(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_string(key);
}

std::optional<uint64_t> GgufFile::find_uint(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_uint(key);
}

std::optional<int64_t> GgufFile::find_int(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_int(key);
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_float(key);
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_bool(key);
}

}  // namespace duet
