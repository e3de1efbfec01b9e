// Fuzz target: sampler-chain configuration and sampling. Input: a link name
// and `key=value` options, one per line, then a blank line, then bytes that
// become logits and history. A link the options allow must keep the
// Candidates contract, and the chain must pick a token of the vocabulary.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "fuzz_input.h"
#include "sampling/sampler_chain.h"

namespace {

duet::PluginHost* g_host = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_host = duet::fuzz::standard_samplers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t blank = input.find("\n\n");
  const std::string config = input.substr(0, blank);
  const std::string payload = blank == std::string::npos ? std::string() : input.substr(blank + 2);

  const size_t first_newline = config.find('\n');
  const std::string link = config.substr(0, first_newline);
  duet::Options options("components.sampler.chain[0]." + link);
  for (size_t at = first_newline; at != std::string::npos && at < config.size();) {
    const size_t end = config.find('\n', at + 1);
    const std::string line =
        config.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) options.set(line.substr(0, eq), line.substr(eq + 1));
    at = end;
  }

  std::shared_ptr<duet::Sampler> sampler;
  try {
    sampler = g_host->create_sampler(link, options);
  } catch (const duet::Error&) {
    return 0;
  }

  // Logits: 4 bytes each (any float, NaN and infinities included), at least one.
  std::vector<float> logits(std::max<size_t>(1, std::min<size_t>(payload.size() / 4, 512)));
  for (size_t i = 0; i < logits.size() && 4 * i + 4 <= payload.size(); ++i) {
    std::memcpy(&logits[i], payload.data() + 4 * i, 4);
  }
  std::vector<int32_t> history;
  for (unsigned char c : payload) history.push_back(static_cast<int32_t>(c % logits.size()));

  duet::SamplerChain chain(data[0], {sampler});
  try {
    const int32_t token = chain.sample(logits, history, 0, size);
    if (token < 0 || token >= static_cast<int32_t>(logits.size())) std::abort();
  } catch (const duet::Error& e) {
    // Acceptable: a documented refusal of the input (e.g. logit_bias banning
    // every candidate), or logits that are all NaN. A kPlugin error for
    // anything else means a standard link broke the Candidates contract.
    const bool nan_only = std::string(e.what()).find("only NaN") != std::string::npos;
    if (e.kind() != duet::ErrorKind::kInputRejected && !nan_only) std::abort();
  }
  return 0;
}
