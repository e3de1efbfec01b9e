// duet run — run a pipeline: prefill, then the decode loop, streaming the
// answer to stdout and a summary to stderr (or one JSON result with --json).
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "batch_run.h"
#include "duet/app/pipeline.h"
#include "duet/byte_size.h"
#include "duet/error.h"
#include "json_writer.h"
#include "pipeline_loading.h"
#include "prompt_input.h"
#include "subcommands.h"

namespace duet::cli {
namespace {

constexpr const char* kDefaultPrompt = "What is the capital of France?";

std::string json_result(const Pipeline& p, const PipelineConfig& config, const std::string& prompt,
                        const RunResult& r) {
  JsonWriter j;
  j.begin_object();
  j.field("pipeline", config.source.string());
  j.field("model", config.model.path.string());
  j.field("backend", p.check().backend);
  j.key("backends_passed_over").begin_array();
  for (const auto& why : p.check().backends_passed_over) j.value(why);
  j.end_array();
  j.field("attention", p.check().attention_impl);
  j.field("sampler_order", p.sampler_order());
  j.field("seed", config.sampler.seed);
  j.field("prompt", prompt);
  j.field("text", r.text);
  j.field("finish_reason", finish_reason_name(r.finish));
  j.key("prompt_token_ids").begin_array();
  for (int32_t t : r.prompt_tokens) j.value(t);
  j.end_array();
  j.key("generated_token_ids").begin_array();
  for (int32_t t : r.generated_tokens) j.value(t);
  j.end_array();
  j.field("prompt_tokens", r.stats.prompt_tokens);
  j.field("generated_tokens", r.stats.generated_tokens);
  j.field("load_seconds", p.load_seconds());
  j.field("time_to_first_token_seconds", r.stats.first_token_seconds);
  j.field("prefill_tokens_per_second", r.stats.prefill_tokens_per_second());
  j.field("decode_tokens_per_second", r.stats.decode_tokens_per_second());
  j.field("decode_forward_passes", r.stats.decode_passes);
  j.field("tokens_per_decode_pass", r.stats.tokens_per_decode_pass());
  j.field("kv_cache_bytes", p.kv_cache_bytes());
  // Where each stage ran (`backends:`), and the caches handed between them.
  j.key("stage_backends").begin_array();
  for (size_t i = 0; i < p.check().stages.size(); ++i) {
    const BackendPlacement& at = p.check().placements[p.check().stage_placement[i]];
    j.begin_object();
    j.field("stage", p.check().stages[i]);
    j.field("backends_name", at.name);
    j.field("backend", at.backend);
    j.field("kv_cache_dtype", std::string(dtype_name(at.kv_cache.dtype)));
    j.end_object();
  }
  j.end_array();
  j.field("kv_handovers", r.stats.handovers);
  j.field("kv_handover_bytes", r.stats.handover_bytes);
  j.field("kv_handover_seconds", r.stats.handover_seconds);
  j.end_object();
  return j.str();
}

// --json-schema FILE or --grammar FILE: a grammar link put first in the
// chain (the grammar plugin; the same as `- grammar: {json_schema_file:
// FILE}` written first in the YAML), named by the flag in its errors.
void add_grammar_flag(const po::variables_map& vm, PipelineConfig& config) {
  const bool schema = vm.count("json-schema") != 0;
  if (!schema && vm.count("grammar") == 0) return;
  if (schema && vm.count("grammar")) {
    throw Error(ErrorKind::kUsage,
                "duet run: --json-schema and --grammar both constrain the answer; give one");
  }
  const char* flag = schema ? "--json-schema" : "--grammar";
  for (const SamplerLink& link : config.sampler.chain) {
    if (link.name == "grammar") {
      throw Error(ErrorKind::kUsage, std::string("duet run: ") + flag +
                                         " adds a grammar link, and the pipeline's chain has one "
                                         "already (" +
                                         link.options.path() + "); drop one of them");
    }
  }
  SamplerLink link;
  link.name = "grammar";
  link.options = Options(flag);
  link.options.set(schema ? "json_schema_file" : "gbnf_file",
                   vm[schema ? "json-schema" : "grammar"].as<std::string>());
  config.sampler.chain.insert(config.sampler.chain.begin(), std::move(link));
}

// --prompts-file: the file's requests through the batching scheduler.
int run_batch(const po::variables_map& vm) {
  std::string clash;
  if (vm.count("prompt") && !vm["prompt"].defaulted()) clash = "prompt";
  for (const char* flag :
       {"prompt-file", "chat", "json", "parse-special", "json-schema", "grammar"}) {
    if (clash.empty() && vm.count(flag)) clash = flag;
  }
  if (!clash.empty()) {
    throw Error(ErrorKind::kUsage, "duet run: --prompts-file and --" + clash +
                                       " both given; a prompts file gives each request's prompt "
                                       "and settings (docs/batching.md): drop --" +
                                       clash);
  }
  std::vector<std::string> extra;
  if (vm.count("system"))
    extra.push_back("model.system=" + yaml_quoted(vm["system"].as<std::string>()));
  PluginHost& host = cli_plugin_host();
  PipelineConfig config = load_pipeline(vm, host, extra);
  auto pipeline = Pipeline::build(config, host);
  return run_prompts_file(*pipeline, config, vm["prompts-file"].as<std::string>(),
                          vm.count("output") ? vm["output"].as<std::string>() : "");
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help");
  add_prompt_options(opts, kDefaultPrompt);
  opts.add_options()(
      "chat", "wrap the prompt in the model's chat template (same as --set model.chat=true)")(
      "parse-special",
      "parse control tokens such as <|im_start|> written in a raw prompt (model.chat: false) as "
      "those tokens")("system", po::value<std::string>(), "system message for the chat template")(
      "json", "print one JSON result on stdout instead of streaming text and a summary")(
      "json-schema", po::value<std::string>(),
      "the answer is JSON valid against the JSON Schema in this file (the grammar plugin, "
      "docs/serve.md#structured-output)")(
      "grammar", po::value<std::string>(),
      "the answer follows the GBNF grammar in this file (start rule root)")(
      "prompts-file", po::value<std::string>(),
      "run every line of this JSONL file as a request, batched (see docs/batching.md)")(
      "output,o", po::value<std::string>(),
      "with --prompts-file: write the JSONL results to this file instead of stdout");
  add_pipeline_options(opts);
  po::variables_map vm;
  if (!parse_command_line("run",
                          "duet run PIPELINE.yaml|MODEL.gguf [--prompt TEXT | --prompt - | "
                          "--prompt-file FILE] [--chat] "
                          "[--json] [--json-schema FILE | --grammar FILE] "
                          "[--set key.path=value]...\n"
                          "       duet run PIPELINE.yaml|MODEL.gguf --prompts-file PROMPTS.jsonl "
                          "[--output RESULTS.jsonl] "
                          "[--set key.path=value]...",
                          opts, {"pipeline"}, args, vm)) {
    return 0;
  }
  if (vm.count("prompts-file")) return run_batch(vm);
  if (vm.count("output")) {
    throw Error(ErrorKind::kUsage,
                "duet run: --output goes with --prompts-file; without it "
                "the answer streams to stdout (redirect it)");
  }
  std::vector<std::string> extra;
  if (vm.count("chat")) extra.push_back("model.chat=true");
  if (vm.count("system"))
    extra.push_back("model.system=" + yaml_quoted(vm["system"].as<std::string>()));

  const std::string prompt = read_prompt(vm);
  PluginHost& host = cli_plugin_host();
  PipelineConfig config = load_pipeline(vm, host, extra);
  add_grammar_flag(vm, config);
  auto pipeline = Pipeline::build(config, host);
  const bool json = vm.count("json") != 0;

  StdoutSink stdout_sink;
  NullSink silent;
  RunResult r =
      pipeline->run_tokens(pipeline->tokenize_prompt(prompt, vm.count("parse-special") != 0),
                           json ? static_cast<TextSink&>(silent) : stdout_sink);
  if (json) {
    std::cout << json_result(*pipeline, config, prompt, r) << "\n";
    return 0;
  }
  std::cout << std::endl;  // before the summary on stderr
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  s << "--\nbackend " << pipeline->check().backend << ", attention "
    << pipeline->check().attention_impl << ", sampler " << pipeline->sampler_order() << " (seed "
    << config.sampler.seed << "), KV cache " << format_bytes(pipeline->kv_cache_bytes()) << "\n";
  for (const auto& why : pipeline->check().backends_passed_over) s << "passed over " << why << "\n";
  if (const std::string line = placement_line(pipeline->check()); !line.empty()) {
    s << line << "; KV cache handed over " << r.stats.handovers << "x, "
      << format_bytes(r.stats.handover_bytes) << " in " << r.stats.handover_seconds * 1000
      << " ms\n";
  }
  s << "prompt " << r.stats.prompt_tokens << " tokens, generated " << r.stats.generated_tokens
    << " tokens, finish " << finish_reason_name(r.finish) << "\n"
    << "load " << pipeline->load_seconds() * 1000 << " ms, time to first token "
    << r.stats.first_token_seconds * 1000 << " ms, prefill " << r.stats.prefill_tokens_per_second()
    << " tok/s, decode " << r.stats.decode_tokens_per_second() << " tok/s (" << std::setprecision(2)
    << r.stats.tokens_per_decode_pass() << " tokens per pass)\n";
  std::cerr << s.str();
  return 0;
}

}  // namespace duet::cli
