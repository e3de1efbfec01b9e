#include "cuda_device.h"

#include "cuda_error.h"
#include "duet/byte_size.h"
#include "duet/error.h"

namespace duet::cuda {
namespace {

// cudaFree synchronises with the device before it releases the memory, so
// kernels still queued on the stream never read freed memory.
void release_device_memory(void* data, uint64_t) { (void)cudaFree(data); }

}  // namespace

CudaDevice::CudaDevice(int32_t index) : index_(index) {
  check_cuda(cudaSetDevice(index), "selecting the device");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, index), "reading the device's properties");
  product_ = prop.name;
  compute_major_ = prop.major;
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
}

CudaDevice::~CudaDevice() {
  (void)cudaStreamSynchronize(stream_);
  (void)cudaStreamDestroy(stream_);
}

void CudaDevice::activate() const { check_cuda(cudaSetDevice(index_), "selecting the device"); }

std::unique_ptr<Buffer> CudaDevice::allocate(uint64_t bytes) {
  activate();
  void* p = nullptr;
  // One byte at least, so an empty buffer still has its own address.
  const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    const MemoryInfo m = memory();
    throw Error(ErrorKind::kOutOfMemory, "CUDA device " + std::to_string(index_) + " (" + product_ +
                                             ") cannot allocate " + format_bytes(bytes) + ": " +
                                             format_bytes(m.free_bytes) + " free of " +
                                             format_bytes(m.total_bytes) +
                                             "; lower components.kv_cache.capacity_tokens or use a "
                                             "smaller model");
  }
  check_cuda(status, "allocating device memory");
  return std::make_unique<ReleasingBuffer>(p, bytes, release_device_memory);
}

void CudaDevice::copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) {
  before_transfer();
  check_cuda(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
             "copying to the device");
}

void CudaDevice::copy_to_host(void* host_dst, const void* device_src, uint64_t bytes) {
  before_transfer();
  check_cuda(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_),
             "copying from the device");
}

void CudaDevice::copy_on_device(void* dst, const void* src, uint64_t bytes) {
  before_transfer();
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
             "copying on the device");
}

void CudaDevice::synchronize() {
  before_transfer();
  // Kernel faults surface here, at the first synchronisation after them.
  check_cuda(cudaStreamSynchronize(stream_), "running the queued work");
}

MemoryInfo CudaDevice::memory() const {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  return MemoryInfo{total_bytes, free_bytes};
}

}  // namespace duet::cuda
