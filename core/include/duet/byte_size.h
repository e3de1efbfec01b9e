// duet/byte_size.h — byte counts as people read them, in messages and
// reports.
#pragma once

#include <cstdint>
#include <string>

#include "duet/export.h"

namespace duet {

// "0 B", "512 B", "1.5 KiB", "93.8 MiB", "12.0 GiB": the largest binary unit
// (B, KiB, ... EiB) in which the value is at least 1, with one decimal past
// plain bytes (rounded to nearest).
DUET_API std::string format_bytes(uint64_t bytes);

}  // namespace duet
