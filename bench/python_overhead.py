#!/usr/bin/env python3
"""Decode speed of the Python package against the `duet` command on the same
pipeline and prompt (issue 31's overhead target: Python >= 0.97x the CLI).

    PYTHONPATH=build/python build/venv/bin/python bench/python_overhead.py \\
        build/bin/duet configs/smollm2.yaml [--runs 5] [--tokens 128] [--set K=V ...]

Greedy, so all make the same tokens; each run is `duet run --json` (the
session path; its decode_tokens_per_second), `duet run --prompts-file` with
the one prompt (the scheduler, which the Python API runs; its
decode_tokens_per_s) and Pipeline.generate (Generation.decode_tokens_per_s),
in turn; prints the medians and the ratios.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

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
    cli, batch, py = [], [], []
    prompts = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    prompts.write(json.dumps({"prompt": PROMPT}) + "\n")
    prompts.close()
    for _ in range(a.runs):
        cmd = [a.duet, "run", a.pipeline, "--json", "--prompt", PROMPT]
        for s in sets:
            cmd += ["--set", s]
        out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        cli.append(out["decode_tokens_per_second"])
        cmd = [a.duet, "run", a.pipeline, "--prompts-file", prompts.name]
        for s in sets:
            cmd += ["--set", s]
        line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        batch.append(json.loads(line.splitlines()[0])["decode_tokens_per_s"])
        r = pipeline.generate(PROMPT)
        assert r.token_ids == out["generated_token_ids"], "the two paths made different tokens"
        py.append(r.decode_tokens_per_s)
    os.unlink(prompts.name)
    c, b, p = statistics.median(cli), statistics.median(batch), statistics.median(py)
    print("tokens %d, runs %d" % (len(r.token_ids), a.runs))
    for name, m, xs in (("duet run (session)", c, cli), ("duet run --prompts-file", b, batch),
                        ("Python API", p, py)):
        print("%-24s decode tok/s: median %6.1f  (%s)" % (name, m, ", ".join("%.1f" % x for x in xs)))
    print("Python / duet run %.3f, Python / --prompts-file %.3f" % (p / c, p / b))


if __name__ == "__main__":
    main()
