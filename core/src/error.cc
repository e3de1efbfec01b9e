#include "duet/error.h"

namespace duet {

Error::~Error() = default;

ExitCode exit_code_for(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kUsage:
    case ErrorKind::kConfig:
      return ExitCode::kUsageOrConfig;
    case ErrorKind::kModelFile:
      return ExitCode::kModelFile;
    case ErrorKind::kPlugin:
      return ExitCode::kPlugin;
    case ErrorKind::kOutOfMemory:
      return ExitCode::kOutOfMemory;
    case ErrorKind::kInputRejected:
      return ExitCode::kInputRejected;
    case ErrorKind::kInternal:
      return ExitCode::kInternal;
    case ErrorKind::kMissingTool:
      return ExitCode::kMissingTool;
  }
  return ExitCode::kInternal;
}

const char* error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kUsage:
      return "usage";
    case ErrorKind::kConfig:
      return "config";
    case ErrorKind::kModelFile:
      return "model file";
    case ErrorKind::kPlugin:
      return "plugin";
    case ErrorKind::kOutOfMemory:
      return "out of memory";
    case ErrorKind::kInputRejected:
      return "input rejected";
    case ErrorKind::kInternal:
      return "internal";
    case ErrorKind::kMissingTool:
      return "missing tool";
  }
  return "internal";
}

}  // namespace duet
