// The `grammar` plugin: structured output as a sampler link (grammar_link.h).
#include "duet/plugin.h"
#include "grammar_link.h"

namespace {

void register_grammar(duet::PluginRegistrar& r) {
  r.add_vocab_sampler("grammar", "keep tokens that continue a GBNF grammar or JSON Schema",
                      [](const duet::Options& o, const duet::Tokenizer* tokenizer) {
                        return std::make_unique<duet::grammar::GrammarLink>(o, tokenizer);
                      });
}

}  // namespace

DUET_DEFINE_PLUGIN("grammar", "0.1.0", "structured output: grammar and JSON Schema masks", nullptr,
                   register_grammar)
