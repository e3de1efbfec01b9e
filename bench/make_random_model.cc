// duet_make_random_model — writes a decoder model with random weights, of
// SmolLM2-135M's shape or a 1B-class one (see random_llama.h), for
// benchmarks and backend comparisons on machines that do not have the real
// model.
//
//   duet_make_random_model OUT.gguf [--arch llama|qwen2|qwen3|gemma3]
//                          [--shape smollm2-135m|llama-1b]
//                          [--type q4_1|q4_0|q8_0|f16|f32|...] [--seed N]
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>

#include "duet/dtype.h"
#include "random_llama.h"

int main(int argc, char** argv) {
  const std::string usage =
      "usage: duet_make_random_model OUT.gguf [--arch llama|qwen2|qwen3|gemma3]\n"
      "                              [--shape smollm2-135m|llama-1b]\n"
      "                              [--type q4_1|q4_0|q8_0|f16|f32|...] [--seed N]\n";
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::cerr << usage;
    return argc < 2 ? 2 : 0;
  }
  std::string shape_name = "smollm2-135m";
  std::string arch = "llama";
  std::optional<duet::DType> type;
  std::optional<uint64_t> seed;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::cerr << flag << " needs a value\n" << usage;
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--arch") {
      arch = value;
      if (!duet::testing::random_llama_architecture(arch)) {
        std::cerr << "--arch: unknown architecture '" << arch << "'\n" << usage;
        return 2;
      }
    } else if (flag == "--shape") {
      shape_name = value;
    } else if (flag == "--type") {
      type = duet::dtype_from_name(value);
      if (!type || *type == duet::DType::kI32) {
        std::cerr << "--type: unknown weight type '" << value << "'\n" << usage;
        return 2;
      }
    } else if (flag == "--seed") {
      char* end = nullptr;
      seed = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0') {
        std::cerr << "--seed: '" << value << "' is not a number\n" << usage;
        return 2;
      }
    } else {
      std::cerr << "unknown option " << flag << "\n" << usage;
      return 2;
    }
  }
  std::optional<duet::testing::RandomLlama> shape = duet::testing::random_llama_shape(shape_name);
  if (!shape) {
    std::cerr << "--shape: unknown shape '" << shape_name << "'\n" << usage;
    return 2;
  }
  shape->architecture = arch;
  if (type) shape->matrix_type = *type;
  if (seed) shape->seed = *seed;
  try {
    duet::testing::write_random_llama(argv[1], *shape);
  } catch (const std::exception& e) {
    std::cerr << "duet_make_random_model: " << e.what() << "\n";
    return 1;
  }
  std::cout << argv[1] << "\n";
  return 0;
}
