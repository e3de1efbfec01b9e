#include "stage_options.h"

#include "duet/error.h"
#include "suggest.h"

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

// Whether `s` is well-formed UTF-8 (no overlong forms or surrogates): text is
// streamed a whole character at a time, so a stop string must be whole
// characters too.
bool is_valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7Fu >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
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

DecodeOptions parse_decode_options(const StageConfig& stage) {
  check_lists(stage, {"stop"});
  DecodeOptions o;
  o.max_new_tokens = static_cast<int32_t>(stage.options.get_int("max_new_tokens", 256, 1, 1 << 24));
  if (auto it = stage.lists.find("stop"); it != stage.lists.end()) {
    o.stop = it->second;
  } else if (stage.options.has("stop")) {
    o.stop = {stage.options.get_string("stop", "")};
  }
  for (const auto& s : o.stop) {
    if (s.empty()) {
      throw Error(
          ErrorKind::kConfig,
          stage.options.path() + ".stop: an empty stop string would stop at once; remove it");
    }
    if (!is_valid_utf8(s)) {
      throw Error(ErrorKind::kConfig,
                  stage.options.path() + ".stop: a stop string must be valid UTF-8 text");
    }
  }
  stage.options.finish();
  return o;
}

}  // namespace duet
