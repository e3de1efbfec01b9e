#include "duet/app/model_summary.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/byte_size.h"

namespace duet {
namespace {

constexpr std::string_view kMissing = "-";
constexpr size_t kMaxTextChars = 60;

// File text may hold newlines and control bytes (chat templates, tokens):
// escape them so every item stays on its line, and cut long text short.
std::string display_text(std::string_view text) {
  std::string out;
  const size_t n = std::min(text.size(), kMaxTextChars);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > n) out += "...";
  return out;
}

// Whole numbers (rope.freq_base) in full; others as the shortest text that
// reads back as the same number, float32 values as float so 1e-5f shows as
// "1e-05", not as its double expansion.
std::string format_float(double value, GgufType type) {
  if (std::abs(value) < 1e15 && value == std::trunc(value)) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buffer[64];
  const auto result =
      type == GgufType::kFloat32
          ? std::to_chars(buffer, buffer + sizeof(buffer), static_cast<float>(value))
          : std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string format_value(const GgufValue* value) {
  if (value == nullptr) return std::string(kMissing);
  if (const GgufArray* array = value->as_array()) {
    return "[array of " + std::to_string(array->size()) + " " +
           gguf_type_name(array->element_type()) + "]";
  }
  if (const auto s = value->as_string()) return display_text(*s);
  if (const auto b = value->as_bool()) return *b ? "true" : "false";
  if (const auto f = value->as_float()) return format_float(*f, value->type());
  if (const auto i = value->as_int()) return std::to_string(*i);
  if (const auto u = value->as_uint()) return std::to_string(*u);
  return std::string(kMissing);
}

// Prints "  label   value" rows and remembers which keys it showed, so the
// "other metadata" section lists only the rest.
class Printer {
 public:
  Printer(std::ostream& out, const GgufFile& file) : out_(out), file_(file) {}

  void row(std::string_view label, std::string_view value, int width = 16) {
    out_ << "  " << std::left << std::setw(width) << label << " " << value << "\n";
  }
  const GgufValue* use(const std::string& key) {
    shown_.insert(key);
    return file_.find(key);
  }
  bool shown(std::string_view key) const { return shown_.count(std::string(key)) != 0; }
  const GgufFile& file() const { return file_; }

 private:
  std::ostream& out_;
  const GgufFile& file_;
  std::set<std::string> shown_;
};

// The length of an array value; any other value is shown as it is.
std::string element_count(const GgufValue* value) {
  const GgufArray* array = value ? value->as_array() : nullptr;
  return array ? std::to_string(array->size()) : format_value(value);
}

// Token text of the id stored under `key`, e.g. "1 '<|im_start|>'".
std::string special_token(Printer& p, const std::string& key,
                          const std::vector<std::string_view>& tokens) {
  const GgufValue* value = p.use(key);
  if (value == nullptr) return std::string(kMissing);
  const std::optional<uint64_t> id = value->as_uint();
  if (!id) return format_value(value);
  std::string out = std::to_string(*id);
  if (*id < tokens.size()) out += " '" + display_text(tokens[*id]) + "'";
  return out;
}

void print_overview(std::ostream& out, Printer& p, const GgufFile& file) {
  out << "model file\n";
  p.row("path", display_text(file.path().string()));
  p.row("size",
        format_bytes(file.file_size()) + " (" + std::to_string(file.file_size()) + " bytes)");
  p.row("gguf version", std::to_string(file.version()));
  p.row("tensors", std::to_string(file.tensors().size()));
  p.row("metadata keys", std::to_string(file.metadata().size()));
  p.use("general.alignment");
  p.row("alignment", std::to_string(file.alignment()));
  p.row("architecture", format_value(p.use("general.architecture")));
  p.row("name", format_value(p.use("general.name")));
}

void print_hyperparameters(std::ostream& out, Printer& p, const std::string& arch,
                           size_t token_count) {
  static constexpr std::string_view kKeys[] = {
      "context_length",       "embedding_length",
      "block_count",          "feed_forward_length",
      "attention.head_count", "attention.head_count_kv",
      "rope.freq_base",       "attention.layer_norm_rms_epsilon",
  };
  constexpr int kWidth = 34;
  out << "\nhyperparameters (" << (arch.empty() ? std::string(kMissing) : arch) << ".*)\n";
  for (std::string_view key : kKeys) {
    const GgufValue* value = arch.empty() ? nullptr : p.use(arch + "." + std::string(key));
    p.row(key, format_value(value), kWidth);
  }
  const GgufValue* vocab = arch.empty() ? nullptr : p.use(arch + ".vocab_size");
  if (vocab == nullptr && token_count > 0) {
    p.row("vocab_size", std::to_string(token_count) + " (tokens in tokenizer.ggml.tokens)", kWidth);
  } else {
    p.row("vocab_size", format_value(vocab), kWidth);
  }
  // The architecture's other keys (key_length, sliding_window, ...) here too.
  const std::string prefix = arch + ".";
  for (const GgufMetadataEntry& e : p.file().metadata()) {
    if (arch.empty() || e.key.substr(0, prefix.size()) != prefix || p.shown(e.key)) continue;
    p.row(e.key.substr(prefix.size()), format_value(p.use(std::string(e.key))), kWidth);
  }
}

void print_tokenizer(std::ostream& out, Printer& p, const std::vector<std::string_view>& tokens) {
  out << "\ntokenizer\n";
  p.row("model", format_value(p.use("tokenizer.ggml.model")));
  p.row("pre", format_value(p.use("tokenizer.ggml.pre")));
  p.row("tokens", element_count(p.use("tokenizer.ggml.tokens")));
  p.row("merges", element_count(p.use("tokenizer.ggml.merges")));
  p.row("bos token", special_token(p, "tokenizer.ggml.bos_token_id", tokens));
  p.row("eos token", special_token(p, "tokenizer.ggml.eos_token_id", tokens));
  p.row("padding token", special_token(p, "tokenizer.ggml.padding_token_id", tokens));
  const GgufValue* chat = p.use("tokenizer.chat_template");
  const std::optional<std::string_view> chat_text = chat ? chat->as_string() : std::nullopt;
  p.row("chat template", chat_text ? "present (" + std::to_string(chat_text->size()) +
                                         " bytes; duet inspect --chat-template prints it)"
                                   : "absent");
}

void print_type_histogram(std::ostream& out, const GgufFile& file) {
  struct Count {
    uint32_t code;
    uint64_t tensors = 0;
    uint64_t bytes = 0;
  };
  std::map<uint32_t, Count> by_code;
  for (const GgufTensorInfo& t : file.tensors()) {
    Count& c = by_code.try_emplace(t.type_code, Count{t.type_code}).first->second;
    ++c.tensors;
    c.bytes += t.bytes;
  }
  std::vector<Count> rows;
  for (const auto& [code, count] : by_code) rows.push_back(count);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Count& a, const Count& b) { return a.bytes > b.bytes; });
  out << "\ntensor types\n";
  for (const Count& c : rows) {
    std::string name = ggml_type_name(c.code);
    if (!dtype_from_code(c.code)) name += " (unsupported)";
    out << "  " << std::left << std::setw(20) << name << std::right << std::setw(6) << c.tensors
        << (c.tensors == 1 ? " tensor   " : " tensors  ") << std::setw(10) << format_bytes(c.bytes)
        << "  (" << c.bytes << " bytes)\n";
  }
}

void print_other_metadata(std::ostream& out, const Printer& p, const GgufFile& file) {
  std::vector<const GgufMetadataEntry*> rest;
  size_t width = 0;
  for (const GgufMetadataEntry& e : file.metadata()) {
    if (p.shown(e.key)) continue;
    rest.push_back(&e);
    width = std::max(width, display_text(e.key).size());
  }
  out << "\nother metadata\n";
  if (rest.empty()) out << "  (none)\n";
  for (const GgufMetadataEntry* e : rest) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << display_text(e->key) << "  "
        << format_value(&e->value) << "\n";
  }
}

void print_tensor_table(std::ostream& out, const GgufFile& file) {
  size_t name_width = 4;
  size_t type_width = 4;
  size_t shape_width = 5;
  for (const GgufTensorInfo& t : file.tensors()) {
    name_width = std::max(name_width, display_text(t.name).size());
    type_width = std::max(type_width, t.type_name().size());
    shape_width = std::max(shape_width, t.shape.str().size());
  }
  const auto col = [](size_t w) { return std::setw(static_cast<int>(w)); };
  out << "\ntensors (shape is outermost first)\n";
  out << "  " << std::left << col(name_width) << "name"
      << "  " << col(type_width) << "type"
      << "  " << col(shape_width) << "shape"
      << "  " << std::right << std::setw(12) << "bytes"
      << "\n";
  for (const GgufTensorInfo& t : file.tensors()) {
    out << "  " << std::left << col(name_width) << display_text(t.name) << "  " << col(type_width)
        << t.type_name() << "  " << col(shape_width) << t.shape.str() << "  " << std::right
        << std::setw(12) << t.bytes << "\n";
  }
}

}  // namespace

void print_model_summary(std::ostream& out, const GgufFile& file, bool show_tensors) {
  Printer p(out, file);
  print_overview(out, p, file);

  const GgufValue* arch_value = file.find("general.architecture");
  const std::optional<std::string_view> arch_name =
      arch_value ? arch_value->as_string() : std::nullopt;
  const std::string arch = arch_name ? std::string(*arch_name) : std::string();

  std::vector<std::string_view> tokens;
  const GgufValue* token_value = file.find("tokenizer.ggml.tokens");
  if (token_value && token_value->as_array() &&
      token_value->as_array()->element_type() == GgufType::kString) {
    tokens = file.get_string_array("tokenizer.ggml.tokens");
  }

  print_hyperparameters(out, p, arch, tokens.size());
  print_tokenizer(out, p, tokens);
  print_type_histogram(out, file);
  print_other_metadata(out, p, file);
  if (show_tensors) print_tensor_table(out, file);
}

}  // namespace duet
