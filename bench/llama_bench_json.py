"""Runs a native llama-bench binary and prints its result shaped like
`duet bench -o json`, for bench/compare_llama_cpp.sh --llama-bench.

usage: llama_bench_json.py LLAMA_BENCH MODEL --threads T --tests pp|tg
                           -p N -n N [-r REPS] [-- EXTRA_LLAMA_BENCH_ARGS...]

One test per call: pp runs `-p N -n 0`, tg `-p 0 -n N`, each with `-r REPS
-t T -o json` and the extra arguments (ik_llama.cpp's `-rtr 1`, say).
llama-bench runs its own warm-up first. Prints one JSON object:

  engine, binary, extra_args   what ran
  build_commit, build_number   as the binary reports them ("unknown" for a
                               build from a source archive without .git)
  cpu_model, threads           from llama-bench's own record
  peak_rss_bytes               the child's peak resident set (getrusage)
  results                      [{"test": "pp512" or "tg128",
                                 "samples_tokens_per_second": [...]}]

Python standard library only.
"""

import argparse
import json
import resource
import subprocess
import sys


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--tests", choices=["pp", "tg"], required=True)
    ap.add_argument("-p", type=int, required=True, help="prompt tokens of the pp test")
    ap.add_argument("-n", type=int, required=True, help="generated tokens of the tg test")
    ap.add_argument("-r", type=int, default=1, help="timed repetitions")
    a = ap.parse_args(argv)
    if a.threads < 1 or a.p < 1 or a.n < 1 or a.r < 1:
        ap.error("--threads, -p, -n and -r must be >= 1")
    sizes = ["-p", str(a.p), "-n", "0"] if a.tests == "pp" else ["-p", "0", "-n", str(a.n)]
    cmd = [a.binary, "-m", a.model, "-t", str(a.threads), "-r", str(a.r), "-o", "json"] + sizes + extra
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr[-2000:])
        sys.exit("llama_bench_json.py: error: %s exited with %d" % (" ".join(cmd), run.returncode))
    try:
        records = json.loads(run.stdout)
    except json.JSONDecodeError as e:
        sys.exit("llama_bench_json.py: error: %s printed no JSON (%s); is it llama-bench?" % (a.binary, e))
    results = []
    for rec in records:
        test = "pp%d" % rec["n_prompt"] if rec["n_gen"] == 0 else "tg%d" % rec["n_gen"]
        results.append({"test": test, "samples_tokens_per_second": rec["samples_ts"]})
    if not results:
        sys.exit("llama_bench_json.py: error: %s ran no test" % a.binary)
    first = records[0]
    json.dump({"engine": "llama-bench", "binary": a.binary, "extra_args": extra,
               "build_commit": first.get("build_commit"), "build_number": first.get("build_number"),
               "cpu_model": first.get("cpu_info"), "threads": first.get("n_threads"),
               "model": a.model,
               "peak_rss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
               "results": results}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
