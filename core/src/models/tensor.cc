#include "duet/tensor.h"

#include <cassert>

namespace duet {

Shape::Shape(std::initializer_list<int64_t> d) {
  assert(d.size() <= static_cast<size_t>(kMaxDims) && "a Shape has at most kMaxDims dims");
  for (int64_t v : d) {
    if (rank == kMaxDims) break;
    dims[static_cast<size_t>(rank++)] = v;
  }
}

int64_t Shape::elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i) {
    if (dims[static_cast<size_t>(i)] != o.dims[static_cast<size_t>(i)]) return false;
  }
  return true;
}

std::string Shape::str() const {
  std::string out = "[";
  for (int i = 0; i < rank; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims[static_cast<size_t>(i)]);
  }
  return out + "]";
}

uint64_t TensorView::bytes() const {
  const std::optional<uint64_t> row =
      dtype_row_bytes(dtype, static_cast<uint64_t>(shape.innermost()));
  assert(row && "innermost dimension must be a multiple of the dtype's block size");
  return row.value_or(0) * static_cast<uint64_t>(shape.rows());
}

}  // namespace duet
