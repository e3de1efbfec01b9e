#include "engine/stage_options.h"

#include "duet/app/suggest.h"
#include "duet/error.h"
#include "duet/generation.h"

namespace duet {
namespace {

// Lists are accepted only under the keys named in `allowed`.
void check_lists(const StageConfig& stage, const std::vector<std::string>& allowed) {
  for (const auto& [key, values] : stage.lists) {
    (void)values;
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == key;
    if (!ok) {
      throw Error(ErrorKind::kConfig,
                  stage.options.path() + "." + key + ": a list is not accepted here" +
                      (allowed.empty() ? std::string(" (this stage takes no list options)")
                                       : "; list options: " + quoted_list(allowed)));
    }
  }
}

}  // namespace

bool is_builtin_stage(const std::string& name) { return name == "prefill" || name == "decode"; }

PrefillOptions parse_prefill_options(const StageConfig& stage) {
  check_lists(stage, {});
  PrefillOptions o;
  o.chunk_tokens = static_cast<int32_t>(stage.options.get_int("chunk_tokens", 0, 0, 1 << 24));
  o.all_logits = stage.options.get_bool("all_logits", false);
  stage.options.finish();
  return o;
}

DecodeLimits parse_decode_options(const StageConfig& stage) {
  check_lists(stage, {"stop"});
  DecodeLimits o;
  o.max_new_tokens = static_cast<int32_t>(stage.options.get_int("max_new_tokens", 256, 1, 1 << 24));
  if (auto it = stage.lists.find("stop"); it != stage.lists.end()) {
    o.stop = it->second;
  } else if (stage.options.has("stop")) {
    o.stop = {stage.options.get_string("stop", "")};
  }
  check_stop_strings(o.stop, stage.options.path() + ".stop");
  stage.options.finish();
  return o;
}

}  // namespace duet
