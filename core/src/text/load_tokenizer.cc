// load_tokenizer() — the tokenizer a GGUF file describes: byte-level BPE
// (tokenizer.ggml.model "gpt2", bpe_tokenizer.h) or SentencePiece-style BPE
// ("llama", spm_tokenizer.h).
#include <memory>
#include <string>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/app/suggest.h"
#include "duet/error.h"
#include "duet/tokenizer.h"
#include "text/bpe_tokenizer.h"
#include "text/spm_tokenizer.h"

namespace duet {
namespace {

std::vector<std::string> strings(const GgufFile& file, const char* key) {
  std::vector<std::string> out;
  for (std::string_view s : file.get_string_array(key)) out.emplace_back(s);
  return out;
}

std::vector<TokenType> token_types(const GgufFile& file, size_t n_tokens) {
  if (file.find("tokenizer.ggml.token_type") == nullptr) {
    return std::vector<TokenType>(n_tokens, TokenType::kNormal);
  }
  std::vector<TokenType> types;
  for (int64_t t : file.get_int_array("tokenizer.ggml.token_type")) {
    types.push_back(static_cast<TokenType>(t));
  }
  return types;
}

std::unique_ptr<Tokenizer> load_bpe(const GgufFile& file, const std::string& source) {
  const std::string pre(file.get_string("tokenizer.ggml.pre"));
  std::unique_ptr<PreTokenizer> pre_tokenizer = PreTokenizer::for_name(pre);
  if (!pre_tokenizer) {
    throw Error(ErrorKind::kModelFile, source + ": tokenizer.ggml.pre '" + pre +
                                           "' is not supported; supported: " +
                                           quoted_list(PreTokenizer::supported_names()));
  }
  BpeTokenizer::Vocabulary vocab;
  vocab.tokens = strings(file, "tokenizer.ggml.tokens");
  vocab.merges = strings(file, "tokenizer.ggml.merges");
  vocab.types = token_types(file, vocab.tokens.size());
  vocab.bos = file.find_int("tokenizer.ggml.bos_token_id");
  vocab.eos = file.find_int("tokenizer.ggml.eos_token_id");
  vocab.eot = file.find_int("tokenizer.ggml.eot_token_id");
  // llama.cpp's default: a BOS for Llama 3's pre-tokenizer, else none.
  vocab.add_bos =
      file.find_bool("tokenizer.ggml.add_bos_token").value_or(pre_tokenizer->rules().adds_bos);
  return std::make_unique<BpeTokenizer>(vocab, std::move(pre_tokenizer), source);
}

std::unique_ptr<Tokenizer> load_spm(const GgufFile& file, const std::string& source) {
  SpmTokenizer::Vocabulary vocab;
  vocab.tokens = strings(file, "tokenizer.ggml.tokens");
  vocab.scores = file.get_float_array("tokenizer.ggml.scores");
  vocab.types = token_types(file, vocab.tokens.size());
  vocab.bos = file.find_int("tokenizer.ggml.bos_token_id");
  vocab.eos = file.find_int("tokenizer.ggml.eos_token_id");
  vocab.eot = file.find_int("tokenizer.ggml.eot_token_id");
  // llama.cpp's defaults for SentencePiece files: a BOS, and a space prefix.
  vocab.add_bos = file.find_bool("tokenizer.ggml.add_bos_token").value_or(true);
  vocab.add_space_prefix = file.find_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  return std::make_unique<SpmTokenizer>(vocab, source);
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const GgufFile& file) {
  const std::string source = file.path().string();
  const std::string model(file.get_string("tokenizer.ggml.model"));
  if (model == "gpt2") return load_bpe(file, source);
  if (model == "llama") return load_spm(file, source);
  throw Error(ErrorKind::kModelFile, source + ": tokenizer.ggml.model '" + model +
                                         "' is not supported; supported: 'gpt2', 'llama'");
}

}  // namespace duet
