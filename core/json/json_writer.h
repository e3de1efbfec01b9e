// json_writer.h — a minimal streaming JSON writer for machine-readable output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace duet {

// Writes compact JSON, in the order of the calls (a streaming front to
// nlohmann-json's serializer). Callers pair begin_/end_ calls; key() precedes
// each value inside an object. Strings are escaped per RFC 8259; bytes that
// are not valid UTF-8 (overlong forms and surrogates included) are written
// as U+FFFD so the output is always valid JSON. Doubles are written in the
// shortest form that reads back as the same double; NaN and infinities as
// null.
class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(int32_t v) { return value(int64_t{v}); }
  JsonWriter& value(uint64_t v);
  JsonWriter& value(double v);
  JsonWriter& value(bool v);
  JsonWriter& null();

  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  const std::string& str() const { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace duet
