// duet quantize — a GGUF model written again with its weights in another
// format, each tensor's type chosen as llama.cpp's llama-quantize chooses it
// for the same file type (duet/app/quantize.h).
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include "cli_options.h"
#include "duet/app/gguf.h"
#include "duet/app/quantize.h"
#include "duet/byte_size.h"
#include "duet/error.h"
#include "subcommands.h"

namespace duet::cli {
namespace {

std::string type_list() {
  std::string out;
  for (FileType t : file_types()) out += (out.empty() ? "" : ", ") + file_type_name(t);
  return out;
}

// "blk.0.attn_v.weight  [576, 576]  q4_1 -> q8_0 (fallback)", or "copied".
std::string plan_line(const TensorPlan& p) {
  std::ostringstream line;
  line << p.name << "  " << p.shape.str() << "  " << ggml_type_name(p.from_code);
  if (p.converted) {
    line << " -> " << dtype_name(p.to);
    if (p.fallback) line << " (fallback: rows not whole blocks of the recipe's type)";
  } else {
    line << " (kept)";
  }
  return line.str();
}

// "q4_k 30, q6_k 12, q5_0 170" over the tensors written.
std::string type_counts(const std::vector<TensorPlan>& plan) {
  std::map<std::string, int> counts;
  for (const TensorPlan& p : plan)
    ++counts[p.converted ? std::string(dtype_name(p.to)) : ggml_type_name(p.from_code)];
  std::string out;
  for (const auto& [name, n] : counts) {
    out += (out.empty() ? "" : ", ") + name + " " + std::to_string(n);
  }
  return out;
}

}  // namespace

int cmd_quantize(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")(
      "type", po::value<std::string>(),
      ("file type to write (required): " + type_list() +
       ". As llama-quantize's recipe of that name: e.g. q4_k_m gives attn_v and ffn_down "
       "of some layers q6_k, and 32-element types where rows are not whole 256-element blocks")
          .c_str())("allow-requantize",
                    "accept weights that are already quantized (they are rounded twice); "
                    "not needed for --type f32, which is exact")(
      "threads", po::value<int>()->default_value(0),
      "threads converting rows (0: every CPU this process may use)")(
      "dry-run", "print each tensor's type choice and write nothing")(
      "verbose,v", "print each tensor as it is written (stderr)");
  po::variables_map vm;
  const std::string synopsis =
      "duet quantize IN.gguf OUT.gguf --type TYPE [--allow-requantize] [--threads N] "
      "[--dry-run] [--verbose]";
  if (!parse_command_line("quantize", synopsis, opts, {"in", "out"}, args, vm)) return 0;
  if (!vm.count("type")) {
    throw Error(ErrorKind::kUsage, "duet quantize: --type is required; one of " + type_list() +
                                       "; usage: " + synopsis);
  }
  const std::string type_name = vm["type"].as<std::string>();
  const std::optional<FileType> type = file_type_from_name(type_name);
  if (!type) {
    throw Error(ErrorKind::kUsage, "duet quantize: unknown --type '" + type_name + "'; one of " +
                                       type_list() +
                                       " (a file type names a recipe: no plain q3_k or q4_k; "
                                       "iq types other than iq4_nl are not written)");
  }
  const int threads = vm["threads"].as<int>();
  if (threads < 0 || threads > 1024) {
    throw Error(ErrorKind::kUsage, "duet quantize: --threads " + std::to_string(threads) +
                                       " is outside 0..1024 (0: every CPU)");
  }
  const GgufFile in = GgufFile::open(vm["in"].as<std::string>());
  if (vm.count("dry-run")) {
    for (const TensorPlan& p : plan_quantization(in, *type)) std::cout << plan_line(p) << "\n";
    return 0;
  }
  QuantizeOptions options;
  options.type = *type;
  options.allow_requantize = vm.count("allow-requantize") != 0;
  options.threads = threads;
  size_t done = 0;
  const bool verbose = vm.count("verbose") != 0;
  options.on_tensor = [&](const TensorPlan& p) {
    ++done;
    if (verbose)
      std::cerr << "[" << done << "/" << in.tensors().size() << "] " << plan_line(p) << "\n";
  };
  const std::string out = vm["out"].as<std::string>();
  const QuantizeResult r = quantize_model(in, out, options);
  int fallbacks = 0;
  for (const TensorPlan& p : r.plan) fallbacks += p.fallback ? 1 : 0;
  std::cout << "wrote " << out << " as " << file_type_name(*type) << ": " << r.plan.size()
            << " tensors (" << type_counts(r.plan) << "), " << format_bytes(r.bytes_in) << " -> "
            << format_bytes(r.bytes_out) << " of tensor data";
  if (fallbacks > 0) {
    std::cout << "; " << fallbacks << " took the fallback type (rows not whole blocks)";
  }
  std::cout << "\n";
  return 0;
}

}  // namespace duet::cli
