// subprocess.h — running another program and keeping what it said, its exit
// status and its peak memory: how `duet compare` runs each variant in a
// process of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace duet::compare {

struct ChildResult {
  int exit_code = -1;           // the exit status, or -1 when killed by a signal
  int signal = 0;               // the signal that killed it, or 0
  std::string out;              // all of its standard output
  std::string err;              // all of its standard error
  uint64_t peak_rss_bytes = 0;  // its maximum resident set size (getrusage)

  bool ok() const { return exit_code == 0; }
  // "exit code 4" or "killed by signal 11 (Segmentation fault)".
  std::string status() const;
  // The last non-empty line of `err`, or status() when there is none.
  std::string reason() const;
};

// Runs argv[0] (a path, or a name looked up on the PATH) with argv,
// standard input from /dev/null, in a process group of its own (Ctrl-C at
// the terminal reaches only the caller), and waits for it. Throws
// duet::Error(kInternal) when the process cannot be started (pipes, a
// program that does not exist); a program that fails is a ChildResult.
ChildResult run_child(const std::vector<std::string>& argv);

// The path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace duet::compare
