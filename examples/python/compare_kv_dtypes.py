#!/usr/bin/env python3
"""A small backend comparison from Python: two KV-cache dtypes on two
backends against the reference backend's f32 cache, then a chart of decode
speed against KL divergence. Paste into a notebook, or run:

    python examples/python/compare_kv_dtypes.py [--out chart.png] [--rounds N]

(with the duet package installed: pip install . ; or PYTHONPATH=build/python
with the repository's build).
"""
import argparse
import os

import matplotlib
matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt

import duet

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="kv_dtypes.png")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], help="experiment KEY=VALUE")
    a = ap.parse_args()
    overrides = {"workload.speed.rounds": a.rounds}
    overrides.update(s.split("=", 1) for s in a.set)
    rows = duet.compare(os.path.join(HERE, "kv_dtype_backends.yaml"), overrides=overrides)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        if r["status"] != "ok":
            print("%s: %s" % (r["variant"], r["failure"]))
            continue
        label = r["variant"].replace("plugin=", "").replace("dtype=", "").replace(",", " ")
        ax.scatter(r["kld_mean"], r["tg16_tps_median"], s=40)
        ax.annotate(label, (r["kld_mean"], r["tg16_tps_median"]), fontsize=8,
                    xytext=(5, 5), textcoords="offset points")
        print("%-28s tg16 %7.1f tok/s   KL %.2e   ppl %.4f" %
              (r["variant"], r["tg16_tps_median"], r["kld_mean"], r["perplexity"]))
    ax.set_xscale("symlog", linthresh=1e-7)
    ax.set_yscale("log")  # the reference backend is ~50x slower
    ax.margins(x=0.3, y=0.3)
    ax.set_xlabel("mean KL divergence from reference-f32 (nats)")
    ax.set_ylabel("decode tokens/s (tg16, median)")
    ax.set_title("KV-cache dtype and backend")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print("chart written to", a.out)


if __name__ == "__main__":
    main()
