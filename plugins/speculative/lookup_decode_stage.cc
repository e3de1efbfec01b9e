#include "lookup_decode_stage.h"

#include "duet/generation.h"

namespace duet::speculative {

LookupDecodeOptions LookupDecodeOptions::parse(const Options& options) {
  LookupDecodeOptions o;
  o.limits.max_new_tokens =
      static_cast<int32_t>(options.get_int("max_new_tokens", 256, 1, 1 << 24));
  if (options.has("stop")) o.limits.stop = {options.get_string("stop", "")};
  check_stop_strings(o.limits.stop, options.path() + ".stop");
  DrafterOptions& d = o.drafter;
  d.draft_tokens = static_cast<int32_t>(options.get_int("draft_tokens", 8, 1, 64));
  d.ngram.ngram_max = static_cast<int32_t>(options.get_int("ngram_max", 32, 1, 256));
  d.ngram.ngram_min = static_cast<int32_t>(options.get_int("ngram_min", 3, 1, d.ngram.ngram_max));
  d.backoff_max = static_cast<int32_t>(options.get_int("backoff_max", 16, 0, 1024));
  options.finish();
  return o;
}

}  // namespace duet::speculative
