#include "config/yaml_tree.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>

#include "duet/app/utf8.h"
#include "duet/error.h"

namespace duet::yaml {

const Entry* Node::find(std::string_view key) const {
  for (const auto& e : entries)
    if (e.key == key) return &e;
  return nullptr;
}

Entry* Node::find(std::string_view key) {
  return const_cast<Entry*>(static_cast<const Node*>(this)->find(key));
}

std::string found(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kNull:
      return "nothing";
    case Node::Kind::kList:
      return "a list";
    case Node::Kind::kMap:
      return "a map";
    case Node::Kind::kScalar:
      break;
  }
  // Long values would swamp the one-line message.
  constexpr size_t kShown = 40;
  const std::string shown = node.scalar.substr(0, kShown);
  return "'" + shown + (node.scalar.size() > kShown ? "...'" : "'");
}

void Problems::add(const Origin& at, std::string message) {
  problems_.push_back({at, std::move(message)});
}

std::string Problems::where(const Origin& at) const {
  if (at.override_index >= 0) return "--set " + overrides_[static_cast<size_t>(at.override_index)];
  if (at.line == 0) return source_;
  return source_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
}

void Problems::throw_if_any() const {
  if (problems_.empty()) return;
  // Overrides sort after every file position; within the file, by position.
  auto key = [](const Origin& o) {
    return std::tuple(o.override_index >= 0, o.override_index, o.line, o.column);
  };
  std::vector<Problem> sorted = problems_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const Problem& a, const Problem& b) { return key(a.at) < key(b.at); });
  std::string message;
  for (const auto& p : sorted) {
    // A key or an override may hold a line break; each problem stays one line.
    std::string line = where(p.at) + ": " + p.message;
    std::replace_if(
        line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    if (!message.empty()) message += '\n';
    message += line;
  }
  throw Error(ErrorKind::kConfig, message);
}

namespace {

// Content the tree refuses. Only the first refusal is kept, and the parser
// runs on so that a syntax error later in the text, which is what the user
// must fix first, is reported instead. Nesting too deep is thrown at once to
// stop the parser's recursion.
struct Refusal {
  Origin at;
  std::string message;
};

class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(int override_index) : override_index_(override_index) {}

  Node take_root() { return std::move(root_); }
  const std::optional<Refusal>& refusal() const { return refusal_; }
  Origin document_start() const { return document_start_; }

  void OnDocumentStart(const YAML::Mark& mark) override { document_start_ = origin(mark); }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    if (refusal_) return;
    Node node;
    node.origin = origin(mark);
    place(std::move(node));
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    refuse(origin(mark), "aliases ('*name') are not supported; write the value out");
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                const std::string& value) override {
    if (refusal_ || !check_tag(mark, tag)) return;
    Node node;
    node.kind = Node::Kind::kScalar;
    node.origin = origin(mark);
    node.scalar = value;
    place(std::move(node));
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    open(mark, tag, Node::Kind::kList);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open(mark, tag, Node::Kind::kMap);
  }
  void OnMapEnd() override { close(); }

 private:
  Origin origin(const YAML::Mark& mark) const {
    if (override_index_ >= 0) return Origin{0, 0, override_index_};
    return Origin{mark.line + 1, mark.column + 1, -1};
  }

  void refuse(const Origin& at, std::string message) {
    if (!refusal_) refusal_ = Refusal{at, std::move(message)};
  }

  // yaml-cpp reports untagged nodes as "?" (plain) or "!" (quoted); anything
  // else is an explicit tag, which this tree would silently drop.
  bool check_tag(const YAML::Mark& mark, const std::string& tag) {
    if (tag.empty() || tag == "?" || tag == "!") return true;
    refuse(origin(mark), "YAML tags ('" + tag + "') are not supported");
    return false;
  }

  void open(const YAML::Mark& mark, const std::string& tag, Node::Kind kind) {
    if (stack_.size() >= kMaxDepth)
      throw Refusal{origin(mark),
                    "the document is nested deeper than " + std::to_string(kMaxDepth) + " levels"};
    if (refusal_ || !check_tag(mark, tag)) return;
    Node node;
    node.kind = kind;
    node.origin = origin(mark);
    if (Node* placed = place(std::move(node))) stack_.push_back(placed);
  }

  void close() {
    if (!refusal_) stack_.pop_back();
  }

  // Puts a new node where the document is: the root, the next list item, a
  // map key or a map value. Returns the stored node, or nullptr for a key or
  // a refused node. Pointers on the stack stay valid: only the innermost open
  // node grows.
  Node* place(Node node) {
    if (stack_.empty()) {
      root_ = std::move(node);
      return &root_;
    }
    Node& parent = *stack_.back();
    if (parent.is_list()) {
      parent.items.push_back(std::move(node));
      return &parent.items.back();
    }
    if (!pending_key_) {
      if (!node.is_scalar()) {
        refuse(node.origin, "a map key must be a plain name, found " + found(node));
      } else if (const Entry* first = parent.find(node.scalar)) {
        std::string message = "duplicate key '" + node.scalar + "'";
        if (first->key_origin.line > 0)
          message += " (first at line " + std::to_string(first->key_origin.line) + ")";
        refuse(node.origin, message);
      } else {
        pending_key_ = Entry{node.scalar, node.origin, Node{}};
      }
      return nullptr;
    }
    pending_key_->value = std::move(node);
    parent.entries.push_back(std::move(*pending_key_));
    pending_key_.reset();
    return &parent.entries.back().value;
  }

  int override_index_;
  Node root_;
  std::optional<Refusal> refusal_;
  Origin document_start_;
  std::vector<Node*> stack_;
  std::optional<Entry> pending_key_;
};

// yaml-cpp's message for a tab in the indentation ("illegal map value")
// does not mention the tab, the usual cause.
bool indented_with_tab(std::string_view text, int line) {
  size_t start = 0;
  for (int i = 0; i < line && start != std::string_view::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (line < 0 || start == std::string_view::npos) return false;
  const size_t content = text.find_first_not_of(" \t", start);
  return text.substr(start, content - start).find('\t') != std::string_view::npos;
}

}  // namespace

bool refuse_unreadable_text(std::string_view text, int override_index, Problems& problems) {
  // YAML allows no raw C0 control character but tab and line breaks
  // (yaml-cpp turned a NUL and the byte after it into a lone 0xA0). DEL is
  // let through: yaml-cpp reads it, and writes it unescaped in describe().
  const auto control = std::find_if(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 && u != '\t' && u != '\n' && u != '\r';
  });
  const std::optional<size_t> invalid = invalid_utf8_at(text);
  std::optional<size_t> bad = invalid;
  if (control != text.end() && (!bad || static_cast<size_t>(control - text.begin()) < *bad))
    bad = static_cast<size_t>(control - text.begin());
  if (!bad) return false;
  const std::string_view before = text.substr(0, *bad);
  const size_t line_start =
      before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
  const Origin at =
      override_index >= 0
          ? Origin{0, 0, override_index}
          : Origin{static_cast<int>(std::count(before.begin(), before.end(), '\n')) + 1,
                   static_cast<int>(*bad - line_start) + 1, -1};
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[*bad]));
  if (bad == invalid) {
    problems.add(at, std::string("not valid UTF-8 (byte ") + byte + "); save the file as UTF-8");
  } else {
    problems.add(at, std::string("control character ") + byte +
                         " is not allowed in YAML text; remove it, or write it as an escape "
                         "in a double-quoted string");
  }
  return true;
}

std::optional<Node> parse(std::string_view text, int override_index, Problems& problems) {
  // yaml-cpp passes invalid UTF-8 through or replaces it, depending on
  // where it stands, so such text would not mean one thing: refused here.
  if (refuse_unreadable_text(text, override_index, problems)) return std::nullopt;
  std::istringstream in{std::string(text)};
  TreeBuilder builder(override_index);
  try {
    YAML::Parser parser(in);
    const bool has_document = parser.HandleNextDocument(builder);
    // Parsing on also finds syntax errors after the first document.
    TreeBuilder second(override_index);
    if (has_document && parser.HandleNextDocument(second)) {
      // A --set value such as [0-9]\. is a flow list and then more text.
      problems.add(second.document_start(),
                   override_index >= 0
                       ? "the value is one YAML value followed by more text; to set it as text, "
                         "quote it: --set 'KEY=\"VALUE\"' (inside the quotes, \\\\ for a backslash)"
                       : "a second YAML document ('---'); a pipeline holds exactly one");
      return std::nullopt;
    }
    if (builder.refusal()) {
      problems.add(builder.refusal()->at, builder.refusal()->message);
      return std::nullopt;
    }
    if (!has_document) {
      Node empty;
      empty.origin = override_index >= 0 ? Origin{0, 0, override_index} : Origin{1, 1, -1};
      return empty;
    }
  } catch (const Refusal& r) {
    problems.add(r.at, r.message);
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    // Every yaml-cpp error (ParserException, DeepRecursion, ...) has a mark.
    Origin at = override_index >= 0 ? Origin{0, 0, override_index}
                                    : Origin{e.mark.line + 1, e.mark.column + 1, -1};
    std::string message = "YAML syntax error: " + e.msg;
    if (indented_with_tab(text, e.mark.line)) message += "; indent with spaces, not tabs";
    problems.add(at, message);
    return std::nullopt;
  }
  return builder.take_root();
}

Error too_large(const std::string& name, const std::string& what, uint64_t size,
                uint64_t max_bytes) {
  return Error(ErrorKind::kConfig, name + ": " + std::to_string(size) + " bytes is more than a " +
                                       what + " may hold (" + std::to_string(max_bytes >> 20) +
                                       " MiB, " + std::to_string(max_bytes) + " bytes)");
}

std::string read_file(const std::filesystem::path& file, const std::string& what,
                      uint64_t max_bytes) {
  namespace fs = std::filesystem;
  const std::string name = file.string();
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw Error(ErrorKind::kConfig, name + ": cannot access " + what + ": " + ec.message());
  }
  if (!fs::exists(status)) throw Error(ErrorKind::kConfig, name + ": " + what + " not found");
  if (!fs::is_regular_file(status)) throw Error(ErrorKind::kConfig, name + ": not a regular file");
  const uintmax_t size = fs::file_size(file, ec);
  if (!ec && size > max_bytes) throw too_large(name, what, size, max_bytes);
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::kConfig, name + ": cannot open " + what + ": " + std::strerror(errno));
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw Error(ErrorKind::kConfig, name + ": cannot read " + what);
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace duet::yaml
