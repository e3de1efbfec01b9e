#!/usr/bin/env python3
"""Summarizes a bench/compare_llama_cpp.sh run: Duet / llama.cpp ratios.

Reads the JSON files the script left in RUN_DIR (duet-pp-*.json,
duet-tg-*.json from `duet bench -o json`, llama-pp-*.json, llama-tg-*.json
from bench/llama_cpp_bench.py or bench/llama_bench_json.py), pools each test's per-repetition tokens/s over
all rounds, and prints the medians, the ratio Duet / llama.cpp of the medians
and each engine's peak RSS. Writes the same as RUN_DIR/summary.json.

Usage: python3 compare_report.py RUN_DIR
"""

import glob
import json
import os
import statistics
import sys


def load(run_dir, pattern):
    docs = []
    for path in sorted(glob.glob(os.path.join(run_dir, pattern))):
        with open(path) as f:
            try:
                docs.append(json.load(f))
            except json.JSONDecodeError as e:
                sys.exit(f"compare_report.py: error: {path} is not JSON ({e})")
    return docs


def pool(docs):
    """test name -> every tokens/s sample, over all documents."""
    samples = {}
    for doc in docs:
        for row in doc.get("results", []):
            samples.setdefault(row["test"], []).extend(row["samples_tokens_per_second"])
    return samples


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    run_dir = sys.argv[1]
    duet = load(run_dir, "duet-*.json")
    llama = load(run_dir, "llama-*.json")
    if not duet or not llama:
        sys.exit(f"compare_report.py: error: {run_dir} lacks duet-*.json or llama-*.json results")
    d_samples, l_samples = pool(duet), pool(llama)
    tests = [t for t in d_samples if t in l_samples]
    if not tests:
        sys.exit("compare_report.py: error: Duet and llama.cpp ran no test in common")

    first, lfirst = duet[0], llama[0]
    rows = []
    for t in tests:
        d, l = d_samples[t], l_samples[t]
        dm, lm = statistics.median(d), statistics.median(l)
        rows.append({
            "test": t,
            "duet_tokens_per_second_median": dm,
            "duet_tokens_per_second_stddev": statistics.stdev(d) if len(d) > 1 else 0.0,
            "llama_cpp_tokens_per_second_median": lm,
            "llama_cpp_tokens_per_second_stddev": statistics.stdev(l) if len(l) > 1 else 0.0,
            "ratio_duet_over_llama_cpp": dm / lm if lm > 0 else float("nan"),
            "samples": len(d),
        })
    summary = {
        "cpu_model": first.get("cpu_model", "unknown"),
        "cpu_features": first.get("cpu_features", []),
        "model": first.get("model"),
        "pipeline": first.get("pipeline"),
        "duet_backend": first.get("backend"),
        "duet_plugin_version": first.get("plugin_version"),
        "duet_threads": first.get("threads"),
        "llama_cpp_python_version": lfirst.get("llama_cpp_python_version"),
        "llama_bench": ({k: lfirst.get(k) for k in ("binary", "extra_args", "build_commit", "build_number")}
                        if lfirst.get("engine") == "llama-bench" else None),
        "llama_cpp_threads": lfirst.get("threads"),
        "llama_cpp_system_info": lfirst.get("system_info"),
        "rounds": max(len(glob.glob(os.path.join(run_dir, "duet-pp-*.json"))),
                      len(glob.glob(os.path.join(run_dir, "duet-tg-*.json")))),
        "results": rows,
        "duet_peak_rss_bytes": max(doc.get("peak_rss_bytes", 0) for doc in duet),
        "llama_cpp_peak_rss_bytes": max(doc.get("peak_rss_bytes", 0) for doc in llama),
        "llama_cpp_python_baseline_rss_bytes": max(doc.get("baseline_rss_bytes", 0) for doc in llama),
    }
    for when in ("start", "end"):
        try:
            with open(os.path.join(run_dir, f"loadavg-{when}")) as f:
                summary[f"loadavg_{when}"] = f.read().strip()
        except OSError:
            pass
    summary["cpus"] = os.cpu_count()
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    print(f"model     {summary['model']}")
    print(f"cpu       {summary['cpu_model']} ({' '.join(summary['cpu_features']) or '-'})")
    print(f"duet      {summary['pipeline']}: backend {summary['duet_backend']} "
          f"{summary['duet_plugin_version']}, threads {summary['duet_threads']}")
    lb = summary["llama_bench"]
    peer = (f"llama-cpp-python {summary['llama_cpp_python_version']}" if lb is None else
            f"llama-bench {lb['binary']} {' '.join(lb['extra_args'])} (build {lb['build_commit']}, "
            f"{lb['build_number']})".replace("  (", " ("))
    print(f"llama.cpp {peer}, threads {summary['llama_cpp_threads']}")
    print()
    header = ["test", "duet t/s", "llama.cpp t/s", "duet / llama.cpp", "samples"]
    table = [[r["test"],
              f"{r['duet_tokens_per_second_median']:.2f} ± {r['duet_tokens_per_second_stddev']:.2f}",
              f"{r['llama_cpp_tokens_per_second_median']:.2f} ± {r['llama_cpp_tokens_per_second_stddev']:.2f}",
              f"{r['ratio_duet_over_llama_cpp']:.3f}",
              str(r["samples"])] for r in rows]
    width = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    print("| " + " | ".join(h.ljust(width[i]) if i == 0 else h.rjust(width[i])
                            for i, h in enumerate(header)) + " |")
    print("| " + " | ".join("-" * width[i] if i == 0 else "-" * (width[i] - 1) + ":"
                            for i in range(len(header))) + " |")
    for row in table:
        print("| " + " | ".join(c.ljust(width[i]) if i == 0 else c.rjust(width[i])
                                for i, c in enumerate(row)) + " |")
    print()
    python_part = (f" (of which the Python interpreter {mib(summary['llama_cpp_python_baseline_rss_bytes'])})"
                   if lb is None else "")
    print(f"peak RSS  duet {mib(summary['duet_peak_rss_bytes'])}, llama.cpp "
          f"{mib(summary['llama_cpp_peak_rss_bytes'])}{python_part}")
    if "loadavg_start" in summary:
        print(f"load avg  {summary['loadavg_start']} at the start, {summary.get('loadavg_end', '?')} at the end "
              f"({summary['cpus']} CPUs): other load skews both engines; compare runs on a quiet machine")
    print(f"results   {run_dir}")


if __name__ == "__main__":
    main()
