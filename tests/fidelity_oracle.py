"""Checks `duet perplexity --kl-base` against NumPy over the logits both runs
saved: a baseline (f32 KV cache) and a variant (q8_0 KV cache) of the default
pipeline score the same text in windows; this script recomputes perplexity,
KL divergence (mean, median, 99th percentile, max), top-1 agreement, RMS dp
and logits NMSE from the two saved files and compares them with the
variant's JSON. Exits 1 on a mismatch, printing both values.

usage: fidelity_oracle.py DUET_BINARY SOURCE_DIR WORK_DIR
"""
import json
import pathlib
import subprocess
import sys

import numpy as np

CTX = 256


def read_logits(path):
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"DUETLGT1", path
    n_vocab, ctx, n_tokens = np.frombuffer(data[8:24], dtype=np.dtype("<u4,<i4,<u8"))[0]
    tokens = np.frombuffer(data[24:24 + 4 * int(n_tokens)], dtype="<i4")
    logits = np.frombuffer(data[24 + 4 * int(n_tokens):], dtype="<f4").reshape(-1, int(n_vocab))
    return int(ctx), tokens, logits.astype(np.float64)


def next_tokens(tokens, ctx):
    """The token each scored row predicts, as llama-perplexity windows go."""
    out = []
    for begin in range(0, len(tokens) - ctx + 1, ctx):
        out.extend(tokens[begin + pos + 1] for pos in range(ctx // 2, ctx - 1))
    return np.array(out)


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    duet, src, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    text = src / "tests/data/tokenizer_corpus.txt"
    common = [duet, "perplexity", str(src / "configs/smollm2.yaml"), str(text), "--ctx", str(CTX)]
    base_file, variant_file = work / "base.lgt", work / "variant.lgt"
    subprocess.run(common + ["--save-logits", str(base_file), "--set", "components.kv_cache.dtype=f32"],
                   check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run(common + ["--save-logits", str(variant_file), "--kl-base", str(base_file), "--json",
                                   "--set", "components.kv_cache.dtype=q8_0"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    duet_figures = json.loads(out)

    ctx, tokens, base = read_logits(base_file)
    ctx_v, tokens_v, variant = read_logits(variant_file)
    assert ctx == ctx_v == CTX and (tokens == tokens_v).all() and base.shape == variant.shape
    nxt = next_tokens(tokens, ctx)
    assert len(nxt) == base.shape[0] == duet_figures["positions"], (len(nxt), base.shape)

    rows = np.arange(len(nxt))
    lp, lb = log_softmax(variant), log_softmax(base)
    kld = (np.exp(lb) * (lb - lp)).sum(axis=1)
    expected = {
        "perplexity": np.exp(-lp[rows, nxt].mean()),
        "perplexity_base": np.exp(-lb[rows, nxt].mean()),
        "kld_mean": kld.mean(),
        "kld_median": np.quantile(kld, 0.5),
        "kld_p99": np.quantile(kld, 0.99),
        "kld_max": kld.max(),
        "top1_agreement": (variant.argmax(axis=1) == base.argmax(axis=1)).mean(),
        "rms_delta_p": np.sqrt(((np.exp(lp[rows, nxt]) - np.exp(lb[rows, nxt])) ** 2).mean()),
        "logits_nmse": ((variant - base) ** 2).sum() / (base ** 2).sum(),
    }
    expected["perplexity_ratio"] = expected["perplexity"] / expected["perplexity_base"]
    bad = 0
    for key, want in expected.items():
        got = duet_figures[key]
        # duet's JSON has 6 significant digits; rounding negative KLDs to 0
        # is the only other difference.
        ok = abs(got - want) <= 1e-5 * abs(want) + 1e-9
        print(f"{key:17s} duet {got:.6g}  numpy {want:.6g}  {'ok' if ok else 'MISMATCH'}")
        bad += not ok
    if expected["kld_mean"] <= 0:
        print("the q8_0 variant should differ from the f32 baseline")
        bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
