// duet/tensor.h — a non-owning view of a dense tensor in some device's memory.
//
// Shapes are written outermost first, like NumPy: a weight matrix with `rows`
// output features and `cols` input features has shape {rows, cols} and its
// rows are contiguous. (GGUF stores dimensions innermost first; the GGUF
// reader reverses them.) Views are always contiguous and row-major; for a
// block-quantized dtype the innermost dimension is a multiple of the block
// size and each row is a sequence of blocks.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "duet/dtype.h"
#include "duet/export.h"

namespace duet {

inline constexpr int kMaxDims = 4;

struct DUET_API Shape {
  int rank = 0;
  std::array<int64_t, kMaxDims> dims{};  // dims[0] is the outermost

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);

  int64_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t elements() const;  // product of dims; 1 for rank 0
  int64_t innermost() const { return rank == 0 ? 1 : dims[static_cast<size_t>(rank - 1)]; }
  int64_t rows() const { return innermost() == 0 ? 0 : elements() / innermost(); }
  bool operator==(const Shape& o) const;
  std::string str() const;  // "[576, 49152]"
};

// A view of memory owned elsewhere (a device buffer, a mapped file). Copying a
// view copies the pointer, never the data. `data` points into the memory of
// the device that owns it: host code may dereference it only when that device
// reports host-accessible memory.
struct DUET_API TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;

  int64_t elements() const { return shape.elements(); }
  // Bytes of the whole tensor (rows * row bytes).
  uint64_t bytes() const;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

}  // namespace duet
