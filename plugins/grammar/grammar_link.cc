#include "grammar_link.h"

#include <algorithm>
#include <fstream>
#include <list>
#include <mutex>
#include <sstream>
#include <tuple>

#include "duet/error.h"
#include "json_schema_gbnf.h"

namespace duet::grammar {
namespace {

constexpr size_t kMaxGrammarFileBytes = 1 << 20;
constexpr size_t kKeptGrammars = 16;

std::string read_file(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kConfig, key + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxGrammarFileBytes) {
    throw Error(ErrorKind::kConfig, key + ": '" + path + "' is larger than 1 MiB");
  }
  return text.str();
}

// One trie per vocabulary, and the last kKeptGrammars grammars compiled
// against it, so that requests with the same schema share their masks.
std::shared_ptr<const CompiledGrammar> compile(const std::string& gbnf, const std::string& what,
                                               const Tokenizer& tokenizer) {
  using Key = std::tuple<const Tokenizer*, int32_t, std::string>;
  static std::mutex mutex;
  static std::list<std::pair<Key, std::shared_ptr<const CompiledGrammar>>> kept;
  static std::weak_ptr<const TokenTrie> last_trie;
  static std::pair<const Tokenizer*, int32_t> last_trie_of{nullptr, 0};

  const Key key{&tokenizer, tokenizer.vocab_size(), gbnf};
  std::lock_guard lock(mutex);
  for (auto it = kept.begin(); it != kept.end(); ++it) {
    if (it->first == key) {
      kept.splice(kept.begin(), kept, it);
      return kept.front().second;
    }
  }
  std::shared_ptr<const TokenTrie> trie = last_trie.lock();
  if (!trie || last_trie_of != std::pair{&tokenizer, tokenizer.vocab_size()}) {
    trie = std::make_shared<const TokenTrie>(tokenizer);
    last_trie = trie;
    last_trie_of = {&tokenizer, tokenizer.vocab_size()};
  }
  auto made = std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf, what), trie);
  kept.emplace_front(key, made);
  if (kept.size() > kKeptGrammars) kept.pop_back();
  return made;
}

}  // namespace

std::string grammar_text(const Options& options) {
  const std::string& path = options.path();
  int given = 0;
  for (const char* key : {"gbnf", "gbnf_file", "json_schema", "json_schema_file", "json_object"})
    given += options.has(key);
  if (given != 1) {
    throw Error(ErrorKind::kConfig,
                path +
                    ": give exactly one of gbnf, gbnf_file, json_schema, json_schema_file, "
                    "json_object (" +
                    std::to_string(given) + " given)");
  }
  std::string text;
  if (options.has("gbnf")) {
    text = options.get_string("gbnf", "");
    options.finish();
    return text;
  }
  if (options.has("gbnf_file")) {
    text = read_file(options.get_string("gbnf_file", ""), path + ".gbnf_file");
    options.finish();
    return text;
  }
  if (options.has("json_object")) {
    const bool on = options.get_bool("json_object", false);
    options.finish();
    if (!on) {
      throw Error(ErrorKind::kConfig,
                  path + ".json_object: false would constrain nothing; leave the link out");
    }
    return json_object_gbnf();
  }
  const bool from_file = options.has("json_schema_file");
  const std::string key = path + (from_file ? ".json_schema_file" : ".json_schema");
  const std::string schema = from_file ? read_file(options.get_string("json_schema_file", ""), key)
                                       : options.get_string("json_schema", "");
  const std::string prefix = options.get_string("prefix", "");
  const std::string suffix = options.get_string("suffix", "");
  options.finish();
  return json_schema_to_gbnf(schema, key, prefix, suffix);
}

GrammarLink::GrammarLink(const Options& options, const Tokenizer* tokenizer)
    : path_(options.path()), tokenizer_(tokenizer) {
  const std::string gbnf = grammar_text(options);
  const std::string what = path_ + " grammar";
  if (!tokenizer) {
    parse_gbnf(gbnf, what);  // the same errors, no vocabulary tables
    return;
  }
  grammar_ = compile(gbnf, what, *tokenizer);
  state_ = grammar_->matcher().start();
}

void GrammarLink::follow(std::span<const int32_t> generated) {
  size_t same = 0;
  while (same < fed_.size() && same < generated.size() && fed_[same] == generated[same]) ++same;
  if (same < fed_.size()) {  // the output changed under us: read it again
    state_ = grammar_->matcher().start();
    fed_.clear();
    ended_ = false;
    same = 0;
  }
  for (size_t i = same; i < generated.size(); ++i) {
    const int32_t id = generated[i];
    fed_.push_back(id);
    if (ended_) continue;
    if (tokenizer_->is_end_of_generation(id)) {
      ended_ = true;
      continue;
    }
    // A token the grammar refuses can only come from outside this link's
    // masks; the output cannot go on within the grammar, so it may only end.
    if (!grammar_->matcher().advance(state_, tokenizer_->piece(id))) ended_ = true;
  }
}

void GrammarLink::apply(Candidates& c, const SamplingContext& ctx) {
  if (!grammar_) {
    throw Error(ErrorKind::kPlugin, path_ + ": this grammar link was made without a vocabulary");
  }
  if (ctx.step > ctx.history.size()) {
    throw Error(ErrorKind::kPlugin, path_ + ": step " + std::to_string(ctx.step) +
                                        " is past the history of " +
                                        std::to_string(ctx.history.size()) + " tokens");
  }
  follow(ctx.history.last(ctx.step));
  std::shared_ptr<const TokenMask> mask;
  if (!ended_) mask = grammar_->mask(state_);
  const auto ends = [&](int32_t id) { return tokenizer_->is_end_of_generation(id); };
  const auto allowed = [&](int32_t id) { return ended_ ? ends(id) : mask->allows(id); };
  // Where no candidate can continue (the vocabulary has no token for what
  // the grammar needs next), the output ends here rather than leave the
  // grammar, or fail every request running.
  const bool stuck = std::none_of(c.ids.begin(), c.ids.end(), allowed);
  size_t kept = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (!(stuck ? ends(c.ids[i]) : allowed(c.ids[i]))) continue;
    c.ids[kept] = c.ids[i];
    c.logits[kept] = c.logits[i];
    ++kept;
  }
  if (kept == 0) {
    throw Error(ErrorKind::kInputRejected,
                path_ +
                    ": no candidate can continue the output within the grammar, and none "
                    "ends it; the grammar link must come first in the chain");
  }
  c.ids.resize(kept);
  c.logits.resize(kept);
}

}  // namespace duet::grammar
