// ban_tokens: a sampler-chain link that removes the listed token ids from
// the candidates — the smallest useful plugin written against the Duet SDK.
//
// YAML:   - ban_tokens: {ids: "0,1,2"}
#include <duet/error.h>
#include <duet/plugin.h>

#include <algorithm>
#include <charconv>
#include <set>

namespace {

class BanTokens final : public duet::Sampler {
 public:
  explicit BanTokens(const duet::Options& options) {
    const std::string list = options.get_string("ids", "");
    options.finish();
    size_t start = 0;
    while (start < list.size()) {
      size_t end = std::min(list.find(',', start), list.size());
      int32_t id = -1;
      auto [ptr, ec] = std::from_chars(list.data() + start, list.data() + end, id);
      if (ec != std::errc() || ptr != list.data() + end || id < 0) {
        throw duet::Error(duet::ErrorKind::kConfig,
                          options.path() + ".ids: '" + list.substr(start, end - start) +
                              "' is not a token id; expected comma-separated integers >= 0");
      }
      banned_.insert(id);
      start = end + 1;
    }
  }

  std::string name() const override { return "ban_tokens"; }

  void apply(duet::Candidates& c, const duet::SamplingContext&) override {
    size_t kept = 0;
    for (size_t i = 0; i < c.ids.size(); ++i) {
      if (banned_.count(c.ids[i]) != 0) continue;
      c.ids[kept] = c.ids[i];
      c.logits[kept] = c.logits[i];
      ++kept;
    }
    // The chain needs a candidate to choose from: banning everything is a
    // configuration mistake, not something to hide.
    if (kept == 0)
      throw duet::Error(duet::ErrorKind::kInputRejected, "ban_tokens removed every candidate");
    c.ids.resize(kept);
    c.logits.resize(kept);
  }

 private:
  std::set<int32_t> banned_;
};

void register_components(duet::PluginRegistrar& r) {
  r.add_sampler("ban_tokens", "removes the listed token ids (example plugin)",
                [](const duet::Options& o) { return std::make_unique<BanTokens>(o); });
}

}  // namespace

DUET_DEFINE_PLUGIN("example-ban", "1.0.0", "example third-party sampler plugin", nullptr,
                   register_components)
