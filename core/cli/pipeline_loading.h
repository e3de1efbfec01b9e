// pipeline_loading.h — what `run` and `validate` share: options for a
// pipeline file and the steps that load and check it.
#pragma once

#include <string>
#include <vector>

#include "cli_options.h"
#include "duet/pipeline_check.h"
#include "duet/pipeline_config.h"
#include "duet/plugin_host.h"

namespace duet::cli {

// Adds --set to a subcommand's options.
void add_pipeline_options(po::options_description& opts);

// Parses the pipeline named by vm["pipeline"] with vm's --set overrides,
// loads the plugins it can see into `host` and checks it.
PipelineCheck load_and_check(const po::variables_map& vm, PluginHost& host, PipelineConfig& config);

// A few lines describing a checked pipeline, for stderr.
std::string summarize(const PipelineConfig& config, const PipelineCheck& check);

}  // namespace duet::cli
