// Fuzz target: `duet serve`'s request path from body to sampler settings.
// Input: one byte choosing the endpoint (even: /v1/completions, odd:
// /v1/chat/completions), then the request body. A body is either refused
// with an ApiError (status 400 or 404, a message) or read into settings;
// then every link of configs/smollm2-serve.yaml's chain is made with the
// request's options over the pipeline's, as Scheduler::submit makes them,
// and a link that refuses them does so with duet::Error(kConfig), which
// refused_error turns into a 400. A top_logprobs outside [0, 20] that gets
// through, or anything else, is a finding.
// Tools too: the served template is Qwen2.5's (hermes), a chat request's
// messages and tools are rendered by it (a template that raises refuses
// with duet::Error(kInputRejected)), and the body is read as an answer by
// the tool-call readers of both syntaxes, fed in pieces.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "duet/app/chat_template.h"
#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "fuzz_input.h"
#include "serve_openai.h"

namespace {

duet::PluginHost* g_host = nullptr;
duet::serve::ServedModel* g_model = nullptr;
const duet::ChatTemplate* g_template = nullptr;

// The body read as an answer, cut every `step` bytes.
void read_answer(duet::ChatTemplate::ToolSyntax syntax, const std::string& text, size_t step) {
  duet::serve::ToolCallReader reader(syntax);
  size_t calls = 0;
  for (size_t at = 0; at < text.size(); at += step)
    calls += reader.feed(std::string_view(text).substr(at, step)).calls.size();
  calls += reader.finish().calls.size();
  if ((calls > 0) != reader.called()) std::abort();
}

duet::SamplerLink link(const std::string& name, const std::string& key, const std::string& value) {
  duet::SamplerLink l;
  l.name = name;
  l.options = duet::Options("components.sampler.chain[0]." + name);
  if (!key.empty()) l.options.set(key, value);
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_host = duet::fuzz::standard_samplers();
  g_model = new duet::serve::ServedModel;
  std::ifstream file(DUET_SOURCE_DIR "/tests/data/templates/qwen2.5-instruct.jinja");
  const std::string text{std::istreambuf_iterator<char>(file), {}};
  g_template = new duet::ChatTemplate(duet::ChatTemplate::from_jinja(text, "<|im_end|>", "qwen"));
  g_model->tool_syntax = g_template->tool_syntax();
  g_model->id = "SmolLM2-135M-Instruct.Q4_1";
  g_model->n_vocab = 49152;
  g_model->chain = {link("logit_bias", "", ""),
                    link("repetition_penalty", "penalty", "1"),
                    link("presence_penalty", "penalty", "0"),
                    link("frequency_penalty", "penalty", "0"),
                    link("temperature", "value", "0"),
                    link("top_k", "value", "0"),
                    link("top_p", "value", "1"),
                    link("min_p", "value", "0")};
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto endpoint = data[0] % 2 == 0 ? duet::serve::Endpoint::kCompletions
                                         : duet::serve::Endpoint::kChatCompletions;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  read_answer(duet::ChatTemplate::ToolSyntax::kHermes, body, 1 + data[0] % 7);
  read_answer(duet::ChatTemplate::ToolSyntax::kJson, body, body.size() + 1);
  duet::serve::CompletionRequest request;
  try {
    request = duet::serve::parse_completion_request(endpoint, body, *g_model);
  } catch (const duet::serve::ApiError& e) {
    if ((e.status != 400 && e.status != 404) || e.message.empty()) std::abort();
    (void)duet::serve::error_body(e);
    return 0;
  }
  if (const std::optional<int32_t> top = request.settings.top_logprobs;
      top && (*top < 0 || *top > duet::kMaxTopLogprobs))
    std::abort();  // the parser lets through what the scheduler refuses
  for (const duet::SamplerLink& l : g_model->chain) {
    duet::Options options = l.options;
    if (const auto it = request.settings.sampler.find(l.name);
        it != request.settings.sampler.end()) {
      for (const auto& [key, value] : it->second) options.set(key, value);
    }
    try {
      g_host->create_sampler(l.name, options);
    } catch (const duet::Error& e) {
      if (e.kind() != duet::ErrorKind::kConfig) std::abort();
      const duet::serve::ApiError api = duet::serve::refused_error(e, request.settings);
      if (api.status != 400 || api.param.empty()) std::abort();
    }
  }
  if (endpoint == duet::serve::Endpoint::kChatCompletions && !request.messages.empty()) {
    std::vector<duet::ChatTemplate::Turn> turns;
    for (const duet::serve::ChatMessage& m : request.messages)
      turns.push_back({m.role, m.content, m.tool_calls, m.tool_call_id, m.name});
    try {
      (void)g_template->apply_conversation(turns,
                                           request.tools.offered() ? request.tools.tools : "");
    } catch (const duet::Error& e) {
      if (e.kind() != duet::ErrorKind::kInputRejected) std::abort();
    }
  }
  return 0;
}
