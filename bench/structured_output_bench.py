"""Decode speed with a JSON Schema against without, through `duet run
--prompts-file` (the batching scheduler, one process each, so every mask is
computed cold): 16 chat requests asking for a city as JSON, first with
response_format json_schema, then the same prompts without a schema for as
many tokens as each schema answer took (ignore_eos, no stop strings,
max_tokens). Prints the
median of the requests' decode tokens/s (tokens after the first over the time
they took) for both and their ratio.

With --warm every request runs twice, 16 at a time, and the second wave is
timed: its masks were computed by the first (as on a server that has served
the schema before).

usage: python3 bench/structured_output_bench.py DUET PIPELINE.yaml [--runs N] [--warm] [--set K=V]...
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 30}, "country": {"type": "string", "maxLength": 30},
    "population": {"type": "integer", "minimum": 0},
    "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3}},
    "required": ["name", "country", "population", "landmarks"]}
CITIES = ["Paris", "Rome", "Berlin", "Madrid", "Lisbon", "Vienna", "Prague", "Warsaw", "Oslo",
          "Dublin", "Athens", "Budapest", "Brussels", "Amsterdam", "Helsinki", "Copenhagen"]


def run(duet, pipeline, sets, lines):
    with tempfile.TemporaryDirectory() as d:
        prompts, out = os.path.join(d, "p.jsonl"), os.path.join(d, "o.jsonl")
        with open(prompts, "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in lines)
        cmd = [duet, "run", pipeline, "--prompts-file", prompts, "-o", out]
        for s in sets:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
        return [json.loads(x) for x in open(out)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("duet")
    ap.add_argument("pipeline")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--warm", action="store_true",
                    help="run every request twice, 16 at a time, and time the second wave: "
                         "the masks the first computed are cached")
    a = ap.parse_args()
    waves = 2 if a.warm else 1
    sets = a.set + (["batching.max_sequences=%d" % len(CITIES)] if a.warm else [])
    def ask(c):
        return [{"role": "user", "content":
                 "Describe %s as JSON with name, country, population and landmarks." % c}]
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}
    with_schema, without = [], []
    tokens = []
    for _ in range(a.runs):
        rows = run(a.duet, a.pipeline, sets,
                   [{"messages": ask(c), "max_tokens": 200, "response_format": fmt}
                    for c in CITIES] * waves)[-len(CITIES):]
        counts = [r["generated_tokens"] for r in rows]
        with_schema.append(statistics.median(r["decode_tokens_per_s"] for r in rows))
        rows = run(a.duet, a.pipeline, sets,
                   [{"messages": ask(c), "max_tokens": n, "ignore_eos": True, "stop": []}
                    for c, n in zip(CITIES, counts)] * waves)[-len(CITIES):]
        without.append(statistics.median(r["decode_tokens_per_s"] for r in rows))
        tokens.append((sum(counts), sum(r["generated_tokens"] for r in rows)))
    w, wo = statistics.median(with_schema), statistics.median(without)
    print("decode tok/s per request, median of %d runs: with schema %.1f, without %.1f, ratio %.2f"
          % (a.runs, w, wo, w / wo))
    print("runs with:", ", ".join("%.1f" % x for x in with_schema))
    print("runs without:", ", ".join("%.1f" % x for x in without))
    print("tokens generated with, without:", ", ".join("%d/%d" % t for t in tokens))


if __name__ == "__main__":
    main()
