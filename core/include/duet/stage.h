// duet/stage.h — one step of a pipeline (prefill, decode loop, ...).
#pragma once

#include <string>

#include "duet/export.h"

namespace duet {

// The state a pipeline run carries from stage to stage (model, backend, KV
// cache, tokens, sampler chain, output sink). Defined by core's pipeline.
class Session;
class BatchedDecode;

// Created per pipeline by a factory that validated the stage's YAML options.
// Stages run in the order the YAML lists them, on one thread.
class DUET_API Stage {
 public:
  virtual ~Stage() = default;
  // The name the YAML uses ("prefill", "decode").
  virtual std::string name() const = 0;
  // Advances `session`. Throws duet::Error on failure; the pipeline stops.
  virtual void run(Session& session) = 0;
  // ABI 1.3 (appended; called only on stages of plugins built against 1.3
  // or later). The form of this stage the batching scheduler steps
  // (duet/batched_decode.h), owned by the stage; nullptr, the default, when
  // it runs under `duet run` and `duet chat` only. Only a decode-loop stage
  // (the one after prefill) can have one.
  virtual const BatchedDecode* batched() const { return nullptr; }
};

}  // namespace duet
