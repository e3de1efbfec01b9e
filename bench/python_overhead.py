#!/usr/bin/env python3
"""Decode speed of the Python package against the `duet` command on the same
pipeline and prompt (issue 31's overhead target: Python >= 0.97x the CLI).

    PYTHONPATH=build/python build/venv/bin/python bench/python_overhead.py \\
        build/bin/duet configs/smollm2.yaml [--runs 5] [--tokens 128] [--set K=V ...]

Greedy, so both make the same tokens; each run is `duet run --json` (its
decode_tokens_per_second) then Pipeline.generate (Generation.
decode_tokens_per_s), alternating; prints the medians and their ratio.
"""
import argparse
import json
import statistics
import subprocess

import duet

PROMPT = "Write a long story about a dragon who learns to bake bread."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("duet")
    ap.add_argument("pipeline")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    sets = a.set + ["stages.1.decode.max_new_tokens=%d" % a.tokens]
    pipeline = duet.Pipeline(a.pipeline, overrides=dict(s.split("=", 1) for s in sets))
    cli, py = [], []
    for _ in range(a.runs):
        cmd = [a.duet, "run", a.pipeline, "--json", "--prompt", PROMPT]
        for s in sets:
            cmd += ["--set", s]
        out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        cli.append(out["decode_tokens_per_second"])
        r = pipeline.generate(PROMPT)
        assert r.token_ids == out["generated_token_ids"], "the two paths made different tokens"
        py.append(r.decode_tokens_per_s)
    c, p = statistics.median(cli), statistics.median(py)
    print("tokens %d, runs %d" % (len(r.token_ids), a.runs))
    print("duet run   decode tok/s: median %.1f  (%s)" % (c, ", ".join("%.1f" % x for x in cli)))
    print("Python API decode tok/s: median %.1f  (%s)" % (p, ", ".join("%.1f" % x for x in py)))
    print("ratio %.3f" % (p / c))


if __name__ == "__main__":
    main()
