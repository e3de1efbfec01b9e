// duet/error.h — the one error type that crosses Duet's public API.
//
// Every failure caused by something outside the process (a model file, a YAML
// key, a flag, a prompt, a plugin) is reported by throwing duet::Error with an
// ErrorKind. The kind decides the documented process exit code; the message is
// one line that names the value, the limit and the fix. ErrorKind::kInternal
// (exit code 70) reports a broken contract that core checks in every build,
// because going on would compute wrong results: an op operand of the wrong
// shape (models/checked_ops.h), misuse of the KV allocator or a KV cache, a
// plugin that breaks an interface's contract — a bug in Duet or in a plugin.
// Invariants that only a bug inside one function could break use assert().
#pragma once

#include <stdexcept>
#include <string>

#include "duet/export.h"

namespace duet {

// Exit codes of the `duet` CLI, documented in docs/cli.md.
enum class ExitCode : int {
  kOk = 0,
  kUsageOrConfig = 2,  // bad flag, bad YAML, failed validation
  kModelFile = 3,      // unreadable or malformed model file
  kPlugin = 4,         // plugin refused, missing, or backend failure
  kOutOfMemory = 5,    // an allocation on a device or the host failed
  kInputRejected = 6,  // prompt or token input rejected
  kMissingTool = 7,    // a program a command runs (the report's Python) is missing or failed
  kInternal = 70,      // a bug in Duet: please report it
};

enum class ErrorKind {
  kUsage,          // command line
  kConfig,         // pipeline YAML and its validation
  kModelFile,      // GGUF reading
  kPlugin,         // plugin loading, ABI, component lookup, backend
  kOutOfMemory,    // allocation failure
  kInputRejected,  // prompt, token ids
  kInternal,       // should not happen
  kMissingTool,    // a helper program (Python for `compare --report`); appended, ABI 1.x keeps the
                   // values
};

// Maps an error kind to the CLI exit code it produces.
DUET_API ExitCode exit_code_for(ErrorKind kind) noexcept;

// Human-readable name of a kind ("config", "model file", ...).
DUET_API const char* error_kind_name(ErrorKind kind) noexcept;

class DUET_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Error(const Error&) = default;
  Error& operator=(const Error&) = default;
  // Defined in libduet, so that Error's vtable and type info live there and
  // not in the plugin that throws: an Error can outlive the plugin's library.
  ~Error() override;

  ErrorKind kind() const noexcept { return kind_; }
  ExitCode exit_code() const noexcept { return exit_code_for(kind_); }

 private:
  ErrorKind kind_;
};

}  // namespace duet
