// batch_run.h — `duet run --prompts-file`: every line of a JSONL file as a
// request, run together through the batching scheduler (duet/app/scheduler.h).
#pragma once

#include <string>

#include "duet/app/pipeline.h"

namespace duet::cli {

// Runs the requests of `prompts_path` (format in docs/batching.md) through
// `pipeline` and writes one JSON result per line, in the file's order, to
// `output_path` (stdout when empty), as each result and all before it are
// done. Requests are submitted as the scheduler has room for them (at most
// batching.max_sequences waiting), so a large file is read as it runs.
// A refused line is reported on stderr as "FILE:LINE: message" and written
// as {"id", "line", "error"}; the rest still run. Progress goes to stderr
// once a second when stderr is a terminal, and a summary at the end always.
// Returns 0 when every line ran and 6 (ExitCode::kInputRejected) when any
// was refused. Throws duet::Error(kUsage) when a file cannot be opened, and
// whatever the scheduler throws for the pipeline itself (kConfig when it
// cannot batch).
int run_prompts_file(Pipeline& pipeline, const PipelineConfig& config,
                     const std::string& prompts_path, const std::string& output_path);

}  // namespace duet::cli
