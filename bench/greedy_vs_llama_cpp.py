"""Greedy generations of Duet's backends and of llama.cpp on one model file,
prompt by prompt: Duet's reference and onednn backends (f32 KV caches),
llama.cpp on an f32 copy of the file (the exact yardstick: the same weights,
no rounding of activations) and llama.cpp on the file itself (its quantized
path rounds activations to 8 bits, so it may part ways at near-ties).
Every run is fed the same token ids — those Duet's pipeline made of the
prompt, chat template included — and generates up to --tokens tokens,
stopping early only at an end-of-generation token.

Prints, per prompt, how many leading tokens each run shares with Duet's
reference backend, then a summary line per run. Exits 1 when a Duet backend
or llama.cpp's f32 copy differs from the reference backend.

usage: greedy_vs_llama_cpp.py --duet build/bin/duet --model FILE.gguf
           [--pipeline configs/smollm2-reference.yaml] [--f32 COPY.gguf]
           [--prompts bench/prompts/greedy-ten.txt] [--tokens 32] [--threads N]
           [--ctx 1024]
--ctx is llama.cpp's context (prompt plus --tokens must fit); Duet's KV
cache is the pipeline's.
Without --f32 the copy is made with `duet quantize FILE COPY --type f32`
(exact) next to a temporary folder. Run it in the venv that
bench/llama_cpp_venv.sh builds (llama-cpp-python and numpy).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np
from llama_cpp import Llama


def duet_greedy(args, backend: str, prompt: str) -> tuple[list[int], list[int]]:
    cmd = [args.duet, "run", args.pipeline, "--json", "--prompt", prompt,
           "--set", f"model.path={os.path.abspath(args.model)}",
           "--set", f"backend.plugin={backend}",
           "--set", "components.kv_cache.dtype=f32",
           "--set", f"stages.1.decode.max_new_tokens={args.tokens}",
           "--set", "stages.1.decode.stop=[]"]
    if backend != "reference":
        cmd += ["--set", f"backend.options.threads={args.threads}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return r["prompt_token_ids"], r["generated_token_ids"]


def llama_greedy(llm: Llama, prompt_ids: list[int], n: int) -> list[int]:
    llm.reset()
    llm.eval(prompt_ids)
    vocab = llm.n_vocab()
    out = []
    for _ in range(n):
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(vocab,))
        tok = int(np.argmax(logits))
        out.append(tok)
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, tok):
            break
        llm.eval([tok])
    return out


def shared(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duet", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pipeline", default="configs/smollm2-reference.yaml")
    parser.add_argument("--f32", default=None)
    parser.add_argument("--prompts", default="bench/prompts/greedy-ten.txt")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--ctx", type=int, default=1024)
    args = parser.parse_args()
    prompts = [p for p in open(args.prompts, encoding="utf-8").read().splitlines() if p.strip()]
    f32 = args.f32
    if f32 is None:
        f32 = os.path.join(tempfile.mkdtemp(prefix="duet-greedy-"), "f32.gguf")
        subprocess.run([args.duet, "quantize", args.model, f32, "--type", "f32"], check=True,
                       stdout=subprocess.DEVNULL)
    runs = ["onednn", "llama.cpp f32", "llama.cpp file"]
    models = {
        "llama.cpp f32": Llama(model_path=f32, n_ctx=args.ctx, n_threads=args.threads,
                               n_threads_batch=args.threads, verbose=False),
        "llama.cpp file": Llama(model_path=args.model, n_ctx=args.ctx, n_threads=args.threads,
                                n_threads_batch=args.threads, verbose=False),
    }
    identical = {r: 0 for r in runs}
    print(f"model {args.model}; leading tokens shared with Duet's reference backend")
    print(f"{'prompt':42} {'ref':>4} " + " ".join(f"{r:>14}" for r in runs))
    for prompt in prompts:
        ids, want = duet_greedy(args, "reference", prompt)
        got = {"onednn": duet_greedy(args, "onednn", prompt)[1]}
        for name, llm in models.items():
            got[name] = llama_greedy(llm, ids, args.tokens)
        cells = []
        for r in runs:
            n = shared(want, got[r])
            same = got[r] == want
            identical[r] += same
            cells.append(f"{n:>13}{'=' if same else '≠'}")
        print(f"{prompt[:42]:42} {len(want):>4} " + " ".join(cells))
    print("identical generations: " + ", ".join(f"{r} {identical[r]}/{len(prompts)}" for r in runs))
    return 0 if identical["onednn"] == len(prompts) and identical["llama.cpp f32"] == len(prompts) else 1


if __name__ == "__main__":
    sys.exit(main())
