// duet/app/utf8.h — well-formed UTF-8 (RFC 3629), the one definition core and the
// CLI check text against: YAML files, stop strings, prompts.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "duet/export.h"

namespace duet {

// The length (1-4) of the well-formed UTF-8 character starting at s[i], or 0
// when none does: a stray continuation byte, a sequence cut short, an
// overlong form, a surrogate or a code point past U+10FFFF.
// REQUIRES: i < s.size().
DUET_API size_t utf8_length(std::string_view s, size_t i);

// The offset of the first byte of `text` that starts no well-formed
// character, or nullopt when the whole text is valid UTF-8.
DUET_API std::optional<size_t> invalid_utf8_at(std::string_view text);

}  // namespace duet
