// grammar_link.h — the `grammar` sampler link: the output follows a grammar.
//
// YAML: `- grammar: {json_schema: '{"type": "object", ...}'}`, and in a
// request (duet serve's response_format, a prompts file's "grammar") the
// same link is placed first in the chain. Options, exactly one of:
//   gbnf: TEXT            a GBNF grammar (grammar.h), start rule `root`
//   gbnf_file: PATH       the same, read from a file
//   json_schema: TEXT     JSON Schema text (json_schema_gbnf.h)
//   json_schema_file: PATH
//   json_object: true     any JSON object
// and beside json_schema or json_schema_file, optionally:
//   prefix: TEXT, suffix: TEXT   literal text before and after the JSON
//                                (duet serve's tool calls: "<tool_call>\n")
// apply() keeps only the candidates whose text continues the output within
// the grammar (token masks, token_masks.h) and the end-of-generation tokens
// where the output is complete; once it is complete and nothing may follow,
// only those are left, so generation ends there. The link follows the
// output through ctx.history (the last ctx.step tokens), so it stays right
// when a request is preempted and resumed or drafts are rejected.
//
// Throws duet::Error(kConfig) from the constructor for a bad option or
// grammar. Where no token of the vocabulary can continue the output (the
// grammar needs a byte no token has), only end-of-generation tokens are
// left, so the output ends there incomplete. apply() throws
// duet::Error(kInputRejected) only when the candidates it gets hold neither
// (a link before it cut them): core keeps the link first in a chain.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "duet/options.h"
#include "duet/sampler.h"
#include "duet/tokenizer.h"
#include "token_masks.h"

namespace duet::grammar {

// The GBNF text the options describe (validating them).
std::string grammar_text(const Options& options);

class GrammarLink final : public Sampler {
 public:
  // `tokenizer` null: options checked only; apply() then throws kPlugin.
  GrammarLink(const Options& options, const Tokenizer* tokenizer);
  std::string name() const override { return "grammar"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  void follow(std::span<const int32_t> generated);

  std::string path_;
  const Tokenizer* tokenizer_;
  std::shared_ptr<const CompiledGrammar> grammar_;
  MatchState state_;
  std::vector<int32_t> fed_;  // the generated tokens state_ has read
  bool ended_ = false;        // an end-of-generation token was generated
};

}  // namespace duet::grammar
