#include "mmap_kv_cache.h"

#include <duet/error.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

namespace duet_example {
namespace {

constexpr const char* kWho = "KV-cache storage 'mmap_file'";

// The Buffer RowKVCache holds: the mapping.
class FileBuffer final : public duet::Buffer {
 public:
  FileBuffer(const MmapOptions& o, uint64_t bytes)
      : file_(o.key + ".path", o.path, bytes, o.keep) {}
  void* data() override { return file_.data(); }
  uint64_t size() const override { return file_.size(); }

 private:
  MappedFile file_;
};

// Why `path` cannot become the cache's file, or "" when it can.
std::string path_problem(const MmapOptions& o) {
  const std::string what = o.key + ".path: '" + o.path + "'";
  struct stat st {};
  if (::lstat(o.path.c_str(), &st) == 0) {
    return what +
           " already exists; name a new file (mmap_file never overwrites a file, nor reuses "
           "one kept by an earlier run)";
  }
  std::filesystem::path dir = std::filesystem::path(o.path).parent_path();
  if (dir.empty()) dir = ".";
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return what + " cannot be created: its directory '" + dir.string() + "' does not exist";
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return what + " cannot be created: its directory '" + dir.string() +
           "' is not writable: " + std::strerror(errno);
  }
  return "";
}

}  // namespace

MmapOptions read_mmap_options(const duet::Options& options) {
  MmapOptions o;
  o.key = options.path();
  o.path = options.get_string("path", "");
  o.max_bytes = static_cast<uint64_t>(
      options.get_int("max_bytes", 0, 0, std::numeric_limits<int64_t>::max()));
  o.keep = options.get_bool("keep", false);
  options.finish();
  if (o.path.empty()) {
    throw duet::Error(duet::ErrorKind::kConfig,
                      o.key + ".path: missing; " + kWho + " needs the file to keep the cache in");
  }
  return o;
}

duet::Support check_mmap_kv_cache(duet::Backend& backend, const duet::KVCacheSpec& spec,
                                  const MmapOptions& options) {
  duet::Support s =
      duet::check_kv_rows(spec, kWho, {duet::DType::kF32, duet::DType::kF16, duet::DType::kQ8_0});
  if (!backend.device().host_accessible()) {
    s.reasons.push_back(std::string(kWho) + " maps its file into host memory, but backend '" +
                        backend.name() + "' computes on device " + backend.device().name());
  }
  if (std::string problem = path_problem(options); !problem.empty()) s.reasons.push_back(problem);
  if (s.ok()) {
    const uint64_t bytes = duet::RowKVCache::storage_bytes(spec);
    if (options.max_bytes != 0 && bytes > options.max_bytes) {
      s.reasons.push_back(options.key + ".max_bytes: the cache needs " + std::to_string(bytes) +
                          " bytes but the file may hold " + std::to_string(options.max_bytes) +
                          "; lower components.kv_cache.capacity_tokens or raise max_bytes");
    }
  }
  return s;
}

MmapKVCache::MmapKVCache(duet::Backend& backend, const duet::KVCacheSpec& spec,
                         const MmapOptions& options)
    : RowKVCache(spec, backend.device(),
                 std::make_unique<FileBuffer>(options, storage_bytes(spec))) {}

}  // namespace duet_example
