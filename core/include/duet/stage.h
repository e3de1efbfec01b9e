// duet/stage.h — one step of a pipeline (prefill, decode loop, ...).
#pragma once

#include <string>

#include "duet/export.h"

namespace duet {

// The state a pipeline run carries from stage to stage (model, backend, KV
// cache, tokens, sampler chain, output sink). Defined by core's pipeline.
class Session;

// Created per pipeline by a factory that validated the stage's YAML options.
// Stages run in the order the YAML lists them, on one thread.
class DUET_API Stage {
 public:
  virtual ~Stage() = default;
  // The name the YAML uses ("prefill", "decode").
  virtual std::string name() const = 0;
  // Advances `session`. Throws duet::Error on failure; the pipeline stops.
  virtual void run(Session& session) = 0;
};

}  // namespace duet
