#!/usr/bin/env python3
"""Expected token ids for tests/tokenizer_test.cc, from Hugging Face `tokenizers`.

Reads a GGUF model's vocabulary with the `gguf` package and rebuilds the model's
original Hugging Face tokenizer from it: a BPE model over the vocabulary and
merges (rank = index), the pre-tokenizer that tokenizer.ggml.pre stands for,
and the control (special) and user-defined tokens as added tokens. Then it
encodes every nonempty line of the corpus, and the whole corpus as one text,
twice: with control tokens recognised (Duet's parse_special = true) and
without (false).

Output (JSON): {"model", "corpus", "tokenizers_version", "cases": [{"name",
"parse_special", "text_hex", "ids"}]}. Texts are hex-encoded UTF-8 so the C++
reader needs no string escapes.

Run it through scripts/python-env.sh's interpreter; ctest does so in the test
`tokenizer_oracle`, which writes <build>/tokenizer_oracle.json.
"""

import argparse
import json
import os
import sys
from pathlib import Path

import gguf
import tokenizers
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_CORPUS = ROOT / "tests" / "data" / "tokenizer_corpus.txt"

CONTROL, USER_DEFINED = 3, 4

# tokenizer.ggml.pre -> the HF pre-tokenizer of the models converted with it.
# "smollm" is SmolLM/SmolLM2's tokenizer.json: each digit is its own piece,
# then GPT-2's byte-level regex splits the rest.
PRE_TOKENIZERS = {
    "smollm": lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ]),
}

# The word regexes of Llama 3's and Qwen2's tokenizer.json (a Split in
# Isolated mode before a ByteLevel without its own regex), with the
# case-insensitive contractions spelt out as llama.cpp spells them.
CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
SPLIT_PATTERNS = {
    "llama-bpe": CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+",
}
SPLIT_CORPUS = ROOT / "tests" / "data" / "tokenizer_corpus_mixed.txt"


def splits():
    """Pieces of every line of the mixed corpus under each SPLIT_PATTERNS
    pre-tokenizer, as Hugging Face's Split(Isolated) cuts them."""
    out = []
    lines = SPLIT_CORPUS.read_text(encoding="utf-8").split("\n")
    for name, pattern in SPLIT_PATTERNS.items():
        split = pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated")
        for line in lines:
            if not line:
                continue
            pieces = [p for p, _ in split.pre_tokenize_str(line)]
            out.append({"pre": name, "text_hex": line.encode().hex(),
                        "pieces_hex": [p.encode().hex() for p in pieces]})
    return out


def fail(message):
    sys.exit(f"tokenizer_oracle: {message}")


def field(reader, key):
    value = reader.get_field(key)
    if value is None:
        fail(f"{reader.path}: {key} is missing")
    return value.contents()


def build_tokenizer(tokens, types, merges, pre, parse_special):
    vocab = {}
    for i, text in enumerate(tokens):
        vocab.setdefault(text, i)  # the first id of a repeated text, as Duet does
    pairs = []
    for m in merges:
        space = m.find(" ", 1)
        pairs.append((m[:space], m[space + 1:]))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
    tok.pre_tokenizer = PRE_TOKENIZERS[pre]()
    tok.decoder = decoders.ByteLevel()
    # User-defined tokens are always whole words; control tokens only when
    # special text is parsed.
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, ty in zip(tokens, types) if ty == USER_DEFINED and t])
    if parse_special:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t, ty in zip(tokens, types) if ty == CONTROL and t])
    return tok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path,
                        default=Path(os.environ.get("DUET_MODEL") or DEFAULT_MODEL))
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    if not args.model.is_file():
        fail(f"model file {args.model} is missing; run `bash scripts/fetch-model.sh` "
             "(or set DUET_MODEL)")
    reader = gguf.GGUFReader(args.model)
    model, pre = field(reader, "tokenizer.ggml.model"), field(reader, "tokenizer.ggml.pre")
    if model != "gpt2" or pre not in PRE_TOKENIZERS:
        fail(f"{args.model}: tokenizer {model}/{pre} is not one this oracle rebuilds "
             f"(gpt2 with {', '.join(PRE_TOKENIZERS)})")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = field(reader, "tokenizer.ggml.merges")

    data = args.corpus.read_bytes()
    texts = [(f"line {n}", line) for n, line in enumerate(data.split(b"\n"), start=1) if line]
    texts.append(("whole corpus", data))

    cases = []
    for parse_special in (True, False):
        tok = build_tokenizer(tokens, types, merges, pre, parse_special)
        for name, raw in texts:
            ids = tok.encode(raw.decode("utf-8"), add_special_tokens=False).ids
            cases.append({"name": name, "parse_special": parse_special,
                          "text_hex": raw.hex(), "ids": ids})

    result = {"model": str(args.model), "corpus": str(args.corpus),
              "tokenizers_version": tokenizers.__version__, "cases": cases,
              "splits": splits()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".part")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(args.out)
    print(f"tokenizer_oracle: {len(cases)} cases written to {args.out}")


if __name__ == "__main__":
    main()
