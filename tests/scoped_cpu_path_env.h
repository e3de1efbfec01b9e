// scoped_cpu_path_env.h — DUET_CPU_PATH set for one scope, for the tests
// that pick the onednn kernels' CPU path (the plugin reads it when it
// registers, kernels/cpu_features.h's detect_cpu_path() when called).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace duet::testing {

// Sets DUET_CPU_PATH (null: unsets it) and restores the previous value.
class ScopedCpuPathEnv {
 public:
  explicit ScopedCpuPathEnv(const char* value) {
    if (const char* old = std::getenv("DUET_CPU_PATH")) old_ = old;
    set(value);
  }
  ~ScopedCpuPathEnv() { set(old_ ? old_->c_str() : nullptr); }
  ScopedCpuPathEnv(const ScopedCpuPathEnv&) = delete;
  ScopedCpuPathEnv& operator=(const ScopedCpuPathEnv&) = delete;

 private:
  static void set(const char* value) {
    if (value == nullptr) {
      unsetenv("DUET_CPU_PATH");
    } else {
      setenv("DUET_CPU_PATH", value, 1);
    }
  }
  std::optional<std::string> old_;
};

}  // namespace duet::testing
