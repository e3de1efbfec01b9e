"""Writes tests/data/chat_turns.json for tests/chat_turns_test.cc and
chat_turns_llama3_test.cc: llama.cpp's
token ids of two-turn conversations formatted by its own chat templates
(llama_chat_apply_template), around a first answer given below.

- "gemma3": Gemma 3 270M Q4_K_M (models/, fetched by scripts/fetch-model.sh),
  which has no template: llama.cpp's built-in "gemma". The first answer is
  llama.cpp's greedy one on the file, up to MAX_NEW_TOKENS tokens.
- "llama3": the tiny Llama-3-style file chat_turns_llama3_test writes to
  BUILD_DIR/chat_turns/llama3.gguf (run the test once first), formatted by
  the file's own template, which llama.cpp recognises as "llama3". Its
  weights are random, so the first answer is made empty, as the test's
  logit bias makes it: <|eot_id|> alone.

Each entry holds the two messages, the first answer's token ids (its
end-of-generation token included when it ended on one, which must then be
the token the template closes a turn with, as Duet's conversation keeps the
token sampled) and the token ids of the whole conversation formatted with a
generation prompt after the second message, BOS included.

usage: chat_turns_fixture.py [BUILD_DIR]   (default: build)
Run in the venv that bench/llama_cpp_venv.sh builds (llama-cpp-python).
"""

import ctypes
import json
import pathlib
import sys

import llama_cpp
from llama_cpp import Llama

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from greedy_vs_llama_cpp import llama_greedy  # noqa: E402  (the same greedy loop)
MAX_NEW_TOKENS = 16


def apply_template(template: str, messages: list[tuple[str, str]]) -> str:
    chat = (llama_cpp.llama_chat_message * len(messages))()
    keep = []  # the bytes the structs point into
    for i, (role, content) in enumerate(messages):
        keep += [role.encode(), content.encode()]
        chat[i].role = keep[-2]
        chat[i].content = keep[-1]
    buf = ctypes.create_string_buffer(1 << 16)
    n = llama_cpp.llama_chat_apply_template(template.encode(), chat, len(messages), True, buf,
                                            len(buf))
    if not 0 < n < len(buf):
        raise RuntimeError(f"llama_chat_apply_template returned {n}")
    return buf.raw[:n].decode()


def two_turns(llm: Llama, template: str, messages: list[str], answer: list[int]) -> dict:
    ended = bool(answer) and llama_cpp.llama_vocab_is_eog(llm._model.vocab, answer[-1])
    text = llm.detokenize(answer[:-1] if ended else answer).decode()
    conversation = apply_template(template, [("user", messages[0]), ("assistant", text),
                                             ("user", messages[1])])
    ids = llm.tokenize(conversation.encode(), add_bos=True, special=True)
    if ended:
        # Duet keeps the end token sampled where the template closes the turn.
        prompt = llm.tokenize(apply_template(template, [("user", messages[0])]).encode(),
                              add_bos=True, special=True)
        closing = ids[len(prompt) + len(answer) - 1]
        if closing != answer[-1]:
            raise RuntimeError(f"the answer ended on token {answer[-1]}, but the template "
                               f"closes the turn with {closing}")
    return {"messages": messages, "max_new_tokens": MAX_NEW_TOKENS, "answer_text": text,
            "answer_ids": answer, "conversation_text": conversation, "conversation_ids": ids}


def main() -> int:
    build = ROOT / (sys.argv[1] if len(sys.argv) > 1 else "build")
    out = {"llama_cpp_python": llama_cpp.__version__}

    gemma = Llama(model_path=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"), n_ctx=512,
                  n_threads=2, verbose=False)
    # A message whose greedy answer is Duet's too: this 270M file answers
    # like a base model, and at its near-ties (8-bit activations in
    # llama.cpp's quantized products) "What is the capital of France?"
    # parts at the 8th token.
    messages = ["Say hello in French.", "And now in Spanish?"]
    first = gemma.tokenize(apply_template("gemma", [("user", messages[0])]).encode(),
                           add_bos=True, special=True)
    out["gemma3"] = two_turns(gemma, "gemma", messages, llama_greedy(gemma, first, MAX_NEW_TOKENS))

    tiny = Llama(model_path=str(build / "chat_turns/llama3.gguf"), n_ctx=256, verbose=False)
    eot = tiny.tokenize(b"<|eot_id|>", add_bos=False, special=True)
    messages = ["Name a colour.", "Now name a fruit, please."]
    out["llama3"] = two_turns(tiny, tiny.metadata["tokenizer.chat_template"], messages, eot)

    path = ROOT / "tests/data/chat_turns.json"
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    for name in ("gemma3", "llama3"):
        print(f"{name}: answer {out[name]['answer_text']!r}, "
              f"{len(out[name]['conversation_ids'])} conversation ids")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
