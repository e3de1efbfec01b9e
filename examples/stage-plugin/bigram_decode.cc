// bigram_decode: a decode-loop stage with the cheapest drafter there is —
// the tokens that followed the newest token's most recent earlier
// occurrence. A drafting stage is a drafter and its options; Duet's
// scheduler steps it for every sequence (`duet run`, `chat`, `serve`,
// `run --prompts-file`), verifies every draft, and so gives the plain
// decode loop's tokens.
//
// YAML (after `prefill`):
//   - bigram_decode: {max_new_tokens: 128, stop: "<|im_end|>", draft_tokens: 4}
#include <duet/error.h>
#include <duet/generation.h>
#include <duet/plugin.h>
#include <duet/stage.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace {

class BigramDrafter final : public duet::SequenceDrafter {
 public:
  explicit BigramDrafter(int32_t draft_tokens) : draft_tokens_(draft_tokens) {}

  void propose(std::span<const int32_t> tokens, int32_t max_tokens,
               std::vector<int32_t>& draft) override {
    const auto n = static_cast<int64_t>(tokens.size());
    const int32_t newest = tokens[static_cast<size_t>(n - 1)];
    for (int64_t at = n - 2; at >= 0; --at) {
      if (tokens[static_cast<size_t>(at)] != newest) continue;
      const int64_t end = std::min({n, at + 1 + draft_tokens_, at + 1 + max_tokens});
      draft.assign(tokens.begin() + at + 1, tokens.begin() + end);
      return;
    }
  }

  void observe(int32_t, int32_t) override {}  // a fixed length: nothing to learn

 private:
  int32_t draft_tokens_;
};

class BigramDecode final : public duet::Stage {
 public:
  explicit BigramDecode(const duet::Options& options) {
    limits_.max_new_tokens =
        static_cast<int32_t>(options.get_int("max_new_tokens", 256, 1, 1 << 24));
    if (options.has("stop")) limits_.stop = {options.get_string("stop", "")};
    duet::check_stop_strings(limits_.stop, options.path() + ".stop");
    draft_tokens_ = static_cast<int32_t>(options.get_int("draft_tokens", 4, 1, 32));
    options.finish();
  }

  std::string name() const override { return "bigram_decode"; }

  duet::DecodeLimits limits() const override { return limits_; }
  std::unique_ptr<duet::SequenceDrafter> start_sequence() const override {
    return std::make_unique<BigramDrafter>(draft_tokens_);
  }

 private:
  duet::DecodeLimits limits_;
  int32_t draft_tokens_ = 4;
};

void register_components(duet::PluginRegistrar& r) {
  r.add_stage("bigram_decode", "decode loop verifying bigram-lookup drafts (example plugin)",
              [](const duet::Options& o) { return std::make_unique<BigramDecode>(o); });
}

}  // namespace

DUET_DEFINE_PLUGIN("example-bigram", "1.0.0", "example third-party stage plugin", nullptr,
                   register_components)
