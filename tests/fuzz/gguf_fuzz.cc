// Fuzz target: the GGUF reader on arbitrary bytes, everything that reads a
// model's metadata (hyperparameters, tokenizer, `duet inspect`'s summary),
// and the dequantization of the first row of every tensor of a type Duet
// reads (any bytes are a valid block). Any exception other than duet::Error,
// any crash or leak is a finding.
#include <ostream>
#include <streambuf>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/app/model_hparams.h"
#include "duet/app/model_summary.h"
#include "duet/error.h"
#include "duet/quant.h"
#include "duet/tokenizer.h"
#include "fuzz_input.h"

namespace {

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  duet::fuzz::MemoryFile file(data, size);
  try {
    duet::GgufFile gguf = duet::GgufFile::open(file.path());
    for (const auto& entry : gguf.metadata()) {
      if (const duet::GgufArray* array = entry.value.as_array();
          array != nullptr && array->size() < 4096) {
        for (const auto& element : array->elements()) (void)element.as_string();
      }
    }
    volatile uint8_t sink = 0;
    std::vector<float> row;
    for (const auto& tensor : gguf.tensors()) {
      if (!tensor.supported() || tensor.bytes == 0) continue;
      const auto* bytes = static_cast<const uint8_t*>(tensor.data());
      sink = static_cast<uint8_t>(sink + bytes[0] + bytes[tensor.bytes - 1]);
      const int64_t cols = tensor.shape.innermost();
      if (*tensor.dtype == duet::DType::kI32 || cols > (int64_t{1} << 16)) continue;
      row.resize(static_cast<size_t>(cols));
      duet::dequantize_row(*tensor.dtype, bytes, row.data(), cols);
    }
    NullBuffer null_buffer;
    std::ostream null_stream(&null_buffer);
    duet::print_model_summary(null_stream, gguf, true);
    try {
      (void)duet::read_hparams(gguf);
    } catch (const duet::Error&) {
    }
    auto tokenizer = duet::load_tokenizer(gguf);
    (void)tokenizer->encode("Hello, world! 123 <|im_start|>", true);
  } catch (const duet::Error&) {
  }
  return 0;
}
