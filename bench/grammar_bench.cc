// grammar_bench — what the grammar plugin's token masks cost on a real
// vocabulary: a mask computed from a fresh grammar state (the trie walk) and
// one served from the cache, at the states a JSON answer passes through.
//   build/plugins/grammar/grammar_bench [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <string>

#include "duet/app/gguf.h"
#include "duet/tokenizer.h"
#include "grammar.h"
#include "json_schema_gbnf.h"
#include "token_masks.h"

namespace {

std::string g_model = DUET_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

const duet::Tokenizer& tokenizer() {
  static const std::unique_ptr<duet::Tokenizer> t =
      duet::load_tokenizer(duet::GgufFile::open(g_model));
  return *t;
}

const char* const kSchema = R"({"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 40}, "country": {"type": "string"},
    "population": {"type": "integer"}}, "required": ["city", "country", "population"]})";

// The state after `prefix` of an answer.
duet::grammar::MatchState state_after(const duet::grammar::CompiledGrammar& g,
                                      const std::string& prefix) {
  duet::grammar::MatchState s = g.matcher().start();
  if (!g.matcher().advance(s, prefix)) throw std::runtime_error("prefix refused: " + prefix);
  return s;
}

void BM_TrieBuild(benchmark::State& state) {
  for (auto _ : state) {
    duet::grammar::TokenTrie trie(tokenizer());
    benchmark::DoNotOptimize(trie.nodes.data());
  }
}
BENCHMARK(BM_TrieBuild)->Unit(benchmark::kMillisecond);

// A mask computed from a fresh grammar (an empty cache) each time.
void mask_bench(benchmark::State& state, const char* prefix) {
  auto trie = std::make_shared<const duet::grammar::TokenTrie>(tokenizer());
  const std::string gbnf = duet::grammar::json_schema_to_gbnf(kSchema, "bench");
  size_t allowed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = std::make_shared<duet::grammar::CompiledGrammar>(
        duet::grammar::parse_gbnf(gbnf, "bench"), trie);
    const duet::grammar::MatchState s = state_after(*g, prefix);
    state.ResumeTiming();
    allowed = g->mask(s)->n_allowed;
  }
  state.counters["allowed"] = static_cast<double>(allowed);
}

void BM_MaskAtStart(benchmark::State& s) { mask_bench(s, ""); }
void BM_MaskAfterKey(benchmark::State& s) { mask_bench(s, "{\"city\":"); }
void BM_MaskInBoundedString(benchmark::State& s) { mask_bench(s, "{\"city\": \"Par"); }
void BM_MaskInString(benchmark::State& s) {
  mask_bench(s, "{\"city\": \"Paris\", \"country\": \"Fr");
}
void BM_MaskInNumber(benchmark::State& s) {
  mask_bench(s, "{\"city\": \"Paris\", \"country\": \"France\", \"population\": 21");
}
BENCHMARK(BM_MaskAtStart)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskAfterKey)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInBoundedString)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInString)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInNumber)->Unit(benchmark::kMillisecond);

// A state met before: the cache answers.
void BM_MaskCached(benchmark::State& state) {
  auto trie = std::make_shared<const duet::grammar::TokenTrie>(tokenizer());
  const duet::grammar::CompiledGrammar g(
      duet::grammar::parse_gbnf(duet::grammar::json_schema_to_gbnf(kSchema, "bench"), "bench"),
      trie);
  const duet::grammar::MatchState s = state_after(g, "{\"city\": \"Par");
  g.mask(s);
  for (auto _ : state) benchmark::DoNotOptimize(g.mask(s).get());
}
BENCHMARK(BM_MaskCached)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--model") == 0) g_model = argv[i + 1];
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
}
