// bench_system.h — what `duet bench` reports about the machine: the CPU's
// model name and SIMD features (from /proc/cpuinfo) and the process's peak
// resident set size (VmHWM in /proc/self/status). Header-only; the parsing
// functions take the file text so tests can feed them samples.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace duet::bench {

// The features bench reports, in this order, when the CPU has them.
inline const std::vector<std::string>& reported_cpu_features() {
  static const std::vector<std::string> kFeatures = {"avx2", "avx512f", "avx512_vnni", "amx_int8",
                                                     "amx_bf16"};
  return kFeatures;
}

inline std::string read_text_file(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value of the first "KEY<spaces/tabs>: value" line of a /proc file; "" if none.
inline std::string proc_field(std::string_view text, std::string_view key) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.substr(0, key.size()) != key) continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(key.size(), colon - key.size());
    if (name.find_first_not_of(" \t") != std::string_view::npos) continue;  // a longer key
    std::string_view value = line.substr(colon + 1);
    const size_t first = value.find_first_not_of(" \t");
    if (first == std::string_view::npos) return "";
    value = value.substr(first);
    while (!value.empty() &&
           (value.back() == ' ' || value.back() == '\t' || value.back() == '\r')) {
      value.remove_suffix(1);
    }
    return std::string(value);
  }
  return "";
}

// reported_cpu_features() present in the "flags" line of `cpuinfo`.
inline std::vector<std::string> cpu_features_from(std::string_view cpuinfo) {
  std::vector<std::string> flags;
  std::istringstream words(proc_field(cpuinfo, "flags"));
  for (std::string w; words >> w;) flags.push_back(w);
  std::vector<std::string> found;
  for (const auto& f : reported_cpu_features()) {
    for (const auto& w : flags) {
      if (w == f) {
        found.push_back(f);
        break;
      }
    }
  }
  return found;
}

inline std::vector<std::string> cpu_features() {
  return cpu_features_from(read_text_file("/proc/cpuinfo"));
}

inline std::string cpu_model_name() {
  std::string name = proc_field(read_text_file("/proc/cpuinfo"), "model name");
  return name.empty() ? "unknown" : name;
}

// VmHWM of a /proc/PID/status text, in bytes; 0 when absent.
inline uint64_t peak_rss_from(std::string_view status) {
  const std::string v = proc_field(status, "VmHWM");
  uint64_t kib = 0;
  for (char c : v) {
    if (c < '0' || c > '9') break;
    kib = kib * 10 + static_cast<uint64_t>(c - '0');
  }
  return kib * 1024;
}

// This process's peak resident set size so far, in bytes (0 when unknown).
inline uint64_t peak_rss_bytes() { return peak_rss_from(read_text_file("/proc/self/status")); }

}  // namespace duet::bench
