#!/usr/bin/env python3
"""llama.cpp's side of bench/compare_llama_cpp.sh, through llama-cpp-python.

Measures the same tests as `duet bench`, on the same GGUF file, and prints one
JSON object shaped like `duet bench -o json` (a "results" array):

  pp N       llm.reset(), then llm.eval() of N prompt tokens, timed: one
             batch when N <= n_batch (512), as llama-bench does.
  tg N [@dD] llm.reset(), 1 + D tokens evaluated untimed, then N single-token
             evals, timed; each evaluates the argmax of the previous logits
             (greedy, as Duet's greedy chain does).

Prompt token ids are the same deterministic pseudo-random ids in [0, vocab)
that `duet bench` uses (splitmix64 with the same seed), so both engines see the
same tokens. Each test runs --warmup untimed runs, then --repetitions timed
ones. Peak RSS is the process's VmHWM after the runs; it includes the Python
interpreter and NumPy, whose share is reported as baseline_rss_bytes (VmRSS
after the imports, before the model is loaded).

Usage: python llama_cpp_bench.py MODEL.gguf --threads 2 [-p 512] [-n 128]
           [--depth 0] [-r 1] [--warmup 1] [--tests pp,tg] [--n-ctx N]
"""

import argparse
import json
import os
import statistics
import sys
import time


def proc_status_bytes(field):
    """A kB field of /proc/self/status (VmHWM, VmRSS) in bytes; 0 if absent."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def bench_tokens(n, vocab):
    """The ids `duet bench` uses: splitmix64 from the seed "duetbenc"."""
    mask = (1 << 64) - 1
    state = 0x6475657462656E63
    ids = []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        ids.append(z % vocab)
    return ids


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return v


def non_negative_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a non-negative integer")
    if v < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a non-negative integer")
    return v


def summarize(values):
    return {
        "tokens_per_second_median": statistics.median(values),
        "tokens_per_second_stddev": statistics.stdev(values) if len(values) > 1 else 0.0,
        "tokens_per_second_min": min(values),
        "tokens_per_second_max": max(values),
        "tokens_per_second_mean": statistics.fmean(values),
        "samples_tokens_per_second": values,
        "repetitions": len(values),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="the GGUF file")
    ap.add_argument("--threads", "-t", type=positive_int, required=True)
    ap.add_argument("--prompt-tokens", "-p", type=positive_int, default=512)
    ap.add_argument("--gen-tokens", "-n", type=positive_int, default=128)
    ap.add_argument("--depth", "-d", type=non_negative_int, default=0)
    ap.add_argument("--repetitions", "-r", type=positive_int, default=1)
    ap.add_argument("--warmup", type=non_negative_int, default=1)
    ap.add_argument("--tests", choices=["pp", "tg", "pp,tg"], default="pp,tg")
    ap.add_argument("--n-batch", type=positive_int, default=512)
    ap.add_argument("--n-ctx", type=positive_int, default=0,
                    help="KV-cache size in tokens (default: just what the tests need)")
    args = ap.parse_args()

    if not os.path.isfile(args.model):
        sys.exit(f"llama_cpp_bench.py: error: model file '{args.model}' does not exist")

    import numpy as np
    import llama_cpp
    from llama_cpp import Llama

    baseline_rss = proc_status_bytes("VmRSS")
    want_pp = "pp" in args.tests
    want_tg = "tg" in args.tests
    needed = max(args.prompt_tokens if want_pp else 1, 1 + args.depth + args.gen_tokens if want_tg else 1)
    n_ctx = args.n_ctx or needed
    if n_ctx < needed:
        sys.exit(f"llama_cpp_bench.py: error: --n-ctx {n_ctx} is smaller than the {needed} tokens the tests need")

    start = time.perf_counter()
    llm = Llama(model_path=args.model, n_ctx=n_ctx, n_batch=args.n_batch, n_ubatch=args.n_batch,
                n_threads=args.threads, n_threads_batch=args.threads, logits_all=False, verbose=False)
    load_seconds = time.perf_counter() - start
    vocab = llm.n_vocab()
    ids = bench_tokens(max(args.prompt_tokens, 1 + args.depth), vocab)

    def last_argmax():
        try:
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(vocab,))
            return int(np.argmax(logits))
        except Exception:  # a llama-cpp-python without the internals: a fixed token
            return ids[0]

    def run_pp(n):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids[:n])
        prefill = time.perf_counter() - t0
        last_argmax()
        ttft = time.perf_counter() - t0
        return n / prefill, ttft

    def run_tg(n, depth):
        llm.reset()
        llm.eval(ids[: 1 + depth])
        t0 = time.perf_counter()
        for _ in range(n):
            llm.eval([last_argmax()])
        return n / (time.perf_counter() - t0)

    results = []
    tests = []
    if want_pp:
        tests.append(("pp", args.prompt_tokens, 0))
    if want_tg:
        tests.append(("tg", args.gen_tokens, args.depth))
    for kind, n, depth in tests:
        tps, ttfts = [], []
        for i in range(args.warmup + args.repetitions):
            if kind == "pp":
                t, ttft = run_pp(n)
            else:
                t, ttft = run_tg(n, depth), None
            if i >= args.warmup:
                tps.append(t)
                if ttft is not None:
                    ttfts.append(ttft)
        row = {
            "test": f"{kind}{n}" + (f"@d{depth}" if depth else ""),
            "kind": kind,
            "n_prompt": n if kind == "pp" else 0,
            "n_gen": n if kind == "tg" else 0,
            "depth": depth,
            "backend": "llama.cpp",
            "threads": str(args.threads),
        }
        row.update(summarize(tps))
        if ttfts:
            row["time_to_first_token_seconds"] = statistics.median(ttfts)
        row["peak_rss_bytes"] = proc_status_bytes("VmHWM")
        results.append(row)

    out = {
        "engine": "llama.cpp",
        "llama_cpp_python_version": getattr(llama_cpp, "__version__", "unknown"),
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "model": os.path.abspath(args.model),
        "threads": args.threads,
        "n_batch": args.n_batch,
        "n_ctx": n_ctx,
        "load_seconds": load_seconds,
        "baseline_rss_bytes": baseline_rss,
        "peak_rss_bytes": proc_status_bytes("VmHWM"),
        "results": results,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
