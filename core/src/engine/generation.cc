#include "duet/generation.h"

#include "duet/app/utf8.h"
#include "duet/error.h"

namespace duet {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kFailed:
      return "failed";
  }
  return "none";
}

void check_stop_strings(const std::vector<std::string>& stop, const std::string& path) {
  for (const auto& s : stop) {
    if (s.empty()) {
      throw Error(ErrorKind::kConfig,
                  path + ": an empty stop string would stop at once; remove it");
    }
    if (invalid_utf8_at(s)) {
      throw Error(ErrorKind::kConfig, path + ": a stop string must be valid UTF-8 text");
    }
  }
}

}  // namespace duet
