#include <cstdio>
#include <exception>

#include "duet/plugin.h"

namespace duet::plugin_detail {

int guarded_create(void (*fn)(PluginRegistrar&), PluginRegistrar* registrar, char* error,
                   size_t error_size) noexcept {
  // Exceptions must not unwind through the C entry point: the host may have
  // been built by another compiler, so report them as text instead.
  try {
    fn(*registrar);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
  } catch (...) {
    std::snprintf(error, error_size, "unknown exception");
  }
  return 1;
}

}  // namespace duet::plugin_detail
