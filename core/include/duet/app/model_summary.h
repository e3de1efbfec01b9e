// duet/app/model_summary.h — the human-readable report printed by `duet inspect`.
#pragma once

#include <iosfwd>

#include "duet/export.h"

namespace duet {

class GgufFile;

// Writes a summary of an opened model to `out`: file, size and GGUF version;
// architecture and name; the `<arch>.` hyperparameters; the tokenizer (model,
// pre-tokenizer, token and merge counts, special token ids with their text,
// whether a chat template is present); a histogram of tensor types (count and
// bytes per type); every other metadata key, arrays shown as "[array of N
// type]"; and, when `show_tensors` is set, one line per tensor (name, type,
// shape outermost first, bytes).
//
// Missing or mistyped metadata is printed as "-", never reported as an error:
// the file was validated when opened and inspect must work on models Duet
// cannot run. Text from the file is escaped so each item stays on one line.
// Does not throw except for errors raised by the stream itself.
DUET_API void print_model_summary(std::ostream& out, const GgufFile& file, bool show_tensors);

}  // namespace duet
