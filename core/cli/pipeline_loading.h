// pipeline_loading.h — what `run` and `validate` share: options for a
// pipeline file and the steps that load and check it.
#pragma once

#include <string>
#include <vector>

#include "cli_options.h"
#include "duet/app/pipeline_check.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/plugin_host.h"
#include "duet/generation.h"

namespace duet::cli {

// Streams generated text to stdout as it comes (run, chat).
class StdoutSink final : public TextSink {
 public:
  void on_text(std::string_view text) override;
};

// The process's plugin host. It lives until exit, so a library stays loaded
// while main() reports an exception thrown from its code.
PluginHost& cli_plugin_host();

// Adds --set and --save-pipeline to a subcommand's options.
void add_pipeline_options(po::options_description& opts);

// Parses the pipeline named by vm["pipeline"] — a YAML file, or a model file
// for which default_pipeline_yaml() builds one — with `extra` overrides (from
// other flags) followed by vm's --set overrides, writes it to
// vm["save-pipeline"] when given, and loads the plugins it can see into
// `host`. Throws kUsage for --save-pipeline with a YAML argument or a file
// it cannot write.
PipelineConfig load_pipeline(const po::variables_map& vm, PluginHost& host,
                             const std::vector<std::string>& extra = {});

// A few lines describing a checked pipeline, for stderr.
std::string summarize(const PipelineConfig& config, const PipelineCheck& check);

// "prefill on fast (onednn, f16 cache), decode on slow (reference, q8_0
// cache)" where stages run on named backends; "" for a pipeline's one
// backend.
std::string placement_line(const PipelineCheck& check);

}  // namespace duet::cli
