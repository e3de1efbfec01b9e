// launcher.h — turns commands (commands.h) into kernel launches on the
// device's stream.
#pragma once

#include "commands.h"
#include "cuda_device.h"
#include "gemm.h"
#include "kernels.h"

namespace duet::cuda {

class Launcher {
 public:
  // `pdl` asks for programmatic dependent launch; it is used only on
  // devices that have it (compute capability 9.0 and newer).
  Launcher(CudaDevice& device, bool pdl)
      : gemm_(device), at_{device.stream(), pdl && device.compute_major() >= 9} {}

  // Queues the kernels of `command`. Throws duet::Error(kPlugin) when a
  // launch is refused. Everything but GemmCall may run while the stream is
  // being captured.
  void run(const Command& command);

 private:
  Gemm gemm_;
  LaunchConfig at_;
};

}  // namespace duet::cuda
