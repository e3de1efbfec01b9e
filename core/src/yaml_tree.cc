#include "yaml_tree.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <sstream>
#include <tuple>

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
    case Node::Kind::kNull: return "nothing";
    case Node::Kind::kList: return "a list";
    case Node::Kind::kMap: return "a map";
    case Node::Kind::kScalar: break;
  }
  // Long or multi-line values would swamp the one-line message.
  constexpr size_t kShown = 40;
  std::string shown = node.scalar.substr(0, kShown);
  std::replace(shown.begin(), shown.end(), '\n', ' ');
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
    if (!message.empty()) message += '\n';
    message += where(p.at) + ": " + p.message;
  }
  throw Error(ErrorKind::kConfig, message);
}

namespace {

// Content the tree refuses, thrown from inside the parser's callbacks to stop
// it at once (a deeply nested document is never walked to its bottom).
struct Refusal {
  Origin at;
  std::string message;
};

class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(int override_index) : override_index_(override_index) {}

  bool has_root() const { return has_root_; }
  Node take_root() { return std::move(root_); }
  Origin document_start() const { return document_start_; }

  void OnDocumentStart(const YAML::Mark& mark) override { document_start_ = origin(mark); }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    Node node;
    node.origin = origin(mark);
    place(std::move(node));
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    throw Refusal{origin(mark), "aliases ('*name') are not supported; write the value out"};
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                const std::string& value) override {
    check_tag(mark, tag);
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
  void OnSequenceEnd() override { stack_.pop_back(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open(mark, tag, Node::Kind::kMap);
  }
  void OnMapEnd() override { stack_.pop_back(); }

 private:
  Origin origin(const YAML::Mark& mark) const {
    if (override_index_ >= 0) return Origin{0, 0, override_index_};
    return Origin{mark.line + 1, mark.column + 1, -1};
  }

  // yaml-cpp reports untagged nodes as "?" (plain) or "!" (quoted); anything
  // else is an explicit tag, which would silently change nothing here.
  void check_tag(const YAML::Mark& mark, const std::string& tag) const {
    if (!tag.empty() && tag != "?" && tag != "!")
      throw Refusal{origin(mark), "YAML tags ('" + tag + "') are not supported"};
  }

  void open(const YAML::Mark& mark, const std::string& tag, Node::Kind kind) {
    check_tag(mark, tag);
    if (stack_.size() >= kMaxDepth)
      throw Refusal{origin(mark), "the document is nested deeper than " +
                                      std::to_string(kMaxDepth) + " levels"};
    Node node;
    node.kind = kind;
    node.origin = origin(mark);
    stack_.push_back(place(std::move(node)));
  }

  // Puts a new node where the document is: the root, the next list item, a
  // map key or a map value. Returns the stored node (nullptr for a key).
  // Pointers on the stack stay valid: only the innermost open node grows.
  Node* place(Node node) {
    if (stack_.empty()) {
      root_ = std::move(node);
      has_root_ = true;
      return &root_;
    }
    Node& parent = *stack_.back();
    if (parent.is_list()) {
      parent.items.push_back(std::move(node));
      return &parent.items.back();
    }
    if (!pending_key_) {
      if (!node.is_scalar())
        throw Refusal{node.origin, "a map key must be a plain name, found " + found(node)};
      if (const Entry* first = parent.find(node.scalar)) {
        std::string message = "duplicate key '" + node.scalar + "'";
        if (first->key_origin.line > 0)
          message += " (first at line " + std::to_string(first->key_origin.line) + ")";
        throw Refusal{node.origin, message};
      }
      pending_key_ = Entry{node.scalar, node.origin, Node{}};
      return nullptr;
    }
    pending_key_->value = std::move(node);
    parent.entries.push_back(std::move(*pending_key_));
    pending_key_.reset();
    return &parent.entries.back().value;
  }

  int override_index_;
  Node root_;
  bool has_root_ = false;
  Origin document_start_;
  std::vector<Node*> stack_;
  std::optional<Entry> pending_key_;
};

}  // namespace

std::optional<Node> parse(std::string_view text, int override_index, Problems& problems) {
  std::istringstream in{std::string(text)};
  TreeBuilder builder(override_index);
  try {
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder) || !builder.has_root()) {
      Node empty;
      empty.origin = override_index >= 0 ? Origin{0, 0, override_index} : Origin{1, 1, -1};
      return empty;
    }
    TreeBuilder second(override_index);
    if (parser.HandleNextDocument(second)) {
      problems.add(second.document_start(),
                   "a second YAML document ('---'); a pipeline holds exactly one");
      return std::nullopt;
    }
  } catch (const Refusal& r) {
    problems.add(r.at, r.message);
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    // Every yaml-cpp error (ParserException, DeepRecursion, ...) has a mark.
    Origin at = override_index >= 0 ? Origin{0, 0, override_index}
                                    : Origin{e.mark.line + 1, e.mark.column + 1, -1};
    problems.add(at, "YAML syntax error: " + e.msg);
    return std::nullopt;
  }
  return builder.take_root();
}

}  // namespace duet::yaml
