#!/usr/bin/env python3
"""Writes tests/data/gemma3_tokenizer_ids.json: llama.cpp's token ids for
every line of tests/data/tokenizer_corpus_mixed.txt, and for the whole
corpus as one text, on Gemma 3 270M's vocabulary (SentencePiece-style,
tokenizer.ggml.model "llama"), with control tokens parsed and not, no BOS.
tests/tokenizer_test.cc (Gemma3Tokenizer.*) compares Duet's tokenizer with
it.

The ids are committed because the oracle, llama.cpp, comes from
llama-cpp-python, whose build takes too long for every test run; run this in
the venv bench/llama_cpp_venv.sh builds:

  python tests/gemma3_tokenizer_fixture.py [--write-corpus]

--write-corpus first rewrites the corpus: the 50 lines of
tests/data/tokenizer_corpus.txt, then 190 lines drawn with a fixed seed from
words of eleven scripts, numbers, emoji (with skin tones, ZWJ families,
flags), symbols, HTML tags (Gemma's user-defined tokens), control-token
texts and runs of spaces and tabs.
"""

import argparse
import json
import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"
BASE = ROOT / "tests" / "data" / "tokenizer_corpus.txt"
CORPUS = ROOT / "tests" / "data" / "tokenizer_corpus_mixed.txt"
OUT = ROOT / "tests" / "data" / "gemma3_tokenizer_ids.json"

WORDS = {
    "latin": ["river", "Mountain", "quietly", "naïve", "café", "Straße", "façade", "coöperate",
              "jalapeño", "smörgåsbord", "Œuvre", "dŵr"],
    "cyrillic": ["Привет", "мир", "быстро", "Ёлка", "щука", "объявление", "Україна", "їжак"],
    "greek": ["Καλημέρα", "κόσμε", "ψυχή", "Ωμέγα", "λόγος"],
    "arabic": ["مرحبا", "بالعالم", "كتاب", "السلام عليكم"],
    "hebrew": ["שלום", "עולם", "ספר"],
    "devanagari": ["नमस्ते", "दुनिया", "हिन्दी", "क्षत्रिय"],
    "cjk": ["你好", "世界", "漢字", "東京都", "日本語のテキスト", "カタカナ", "ひらがな"],
    "hangul": ["안녕하세요", "세계", "한국어"],
    "thai": ["สวัสดี", "ภาษาไทย"],
    "emoji": ["🎉", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🤖", "🧪✨", "😀😃😄"],
    "symbols": ["→", "≤", "∑", "€", "£", "¥", "©", "™", "°C", "½", "…", "—", "«»", "§"],
    "html": ["<table>", "</table>", "<tr>", "<td>", "</td>", "<h1>", "<b>", "</b>", "<br>"],
    "special": ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<|im_start|>", "<unk>",
                "<mask>"],
}
SPACES = [" ", "  ", "   ", "\t", " \t ", "    ", "        "]


def write_corpus() -> None:
    rng = random.Random(2026)
    lines = BASE.read_text(encoding="utf-8").splitlines()
    kinds = list(WORDS)
    while len(lines) < 240:
        parts = []
        for _ in range(rng.randint(3, 10)):
            r = rng.random()
            if r < 0.15:
                parts.append(str(rng.choice([0, 7, 42, 1999, 2026, 123456, 3.14159, -17, 10**12,
                                             0.001])))
            elif r < 0.22:
                parts.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 9))))
            else:
                parts.append(rng.choice(WORDS[rng.choice(kinds)]))
            parts.append(rng.choice(SPACES) if rng.random() < 0.25 else " ")
        line = "".join(parts).rstrip(" ")
        if rng.random() < 0.1:
            line = "   " + line
        if rng.random() < 0.1:
            line = line + "  "
        lines.append(line)
    CORPUS.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-corpus", action="store_true")
    args = ap.parse_args()
    if args.write_corpus:
        write_corpus()
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(model_path=str(MODEL), vocab_only=True, verbose=False)
    corpus = CORPUS.read_text(encoding="utf-8")
    cases = []
    for index, line in enumerate(corpus.split("\n")[:-1]):
        for special in (False, True):
            cases.append({"line": index, "parse_special": special,
                          "ids": llm.tokenize(line.encode(), add_bos=False, special=special)})
    for special in (False, True):
        cases.append({"line": -1, "parse_special": special,
                      "ids": llm.tokenize(corpus.encode(), add_bos=False, special=special)})
    doc = {"model": MODEL.name, "corpus": CORPUS.name,
           "llama_cpp_python": llama_cpp.__version__, "cases": cases}
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
