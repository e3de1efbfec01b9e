"""Checks attention 'sliding_window' (examples/attention-plugin) against
NumPy: for each window, sink count and KV dtype, tests/sliding_window_driver
runs the plugin on random q, k, v (two sequences, paged blocks, two steps)
and this script recomputes every output row in float64 from the inputs —
keys and values rounded as the cache stores them (f16, or ggml's q8_0) —
over the positions the row may see: [max(0, p - window + 1), p] plus the
first `sinks`. It also checks that with a window covering the context the
plugin's output is bit-for-bit the reference backend's 'full', and that a
short window changes the output. Exits 1 on a mismatch.

usage: sliding_window_oracle.py DRIVER BUILD_DIR WORK_DIR
"""
import json
import pathlib
import subprocess
import sys

import numpy as np

TOLERANCE = 1e-5
CASES = [(1, 0), (3, 0), (5, 2), (4, 9), (8, 1), (64, 0), (64, 3)]  # (window, sinks)
MAX_POSITION = 19  # the driver's longest sequence holds positions 0..19


def stored(x, dtype):
    """x as the cache gives it back: f32 rows rounded through `dtype`."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    blocks = x.reshape(-1, 32)  # q8_0: d = max|x| / 127, q = round(x / d)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0).astype(np.float32)
    scaled = (blocks * inv).astype(np.float32)
    q = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))  # lround: half away from 0
    return (q * d.astype(np.float16).astype(np.float32)).reshape(x.shape)


def attended(pos, window, sinks):
    start = max(0, pos - window + 1)
    return list(range(min(sinks, start))) + list(range(start, pos + 1))


def check(result, window, sinks, dtype):
    heads, kv_heads, dim = result["n_heads"], result["n_kv_heads"], result["head_dim"]
    scale = float(result["scale"])
    keys, values = {}, {}  # (seq, pos) -> [kv_heads, dim]
    errors = []
    for step in result["steps"]:
        n = len(step["rows"])
        q = np.array(step["q"], dtype=np.float32).reshape(n, heads, dim).astype(np.float64)
        k = stored(step["k"], dtype).reshape(n, kv_heads, dim).astype(np.float64)
        v = stored(step["v"], dtype).reshape(n, kv_heads, dim).astype(np.float64)
        out = np.array(step["out"], dtype=np.float32).reshape(n, heads, dim)
        full = np.array(step["full"], dtype=np.float32).reshape(n, heads, dim)
        for i, (seq, pos) in enumerate(step["rows"]):
            keys[seq, pos], values[seq, pos] = k[i], v[i]
        for i, (seq, pos) in enumerate(step["rows"]):
            seen = attended(pos, window, sinks)
            kk = np.stack([keys[seq, p] for p in seen])  # [n_seen, kv_heads, dim]
            vv = np.stack([values[seq, p] for p in seen])
            for h in range(heads):
                g = h // (heads // kv_heads)
                s = kk[:, g, :] @ q[i, h] * scale
                w = np.exp(s - s.max())
                want = (w / w.sum()) @ vv[:, g, :]
                err = np.abs(out[i, h] - want).max()
                if err > TOLERANCE:
                    errors.append(f"seq {seq} pos {pos} head {h}: max abs error {err:.3g}")
        if window > MAX_POSITION and not np.array_equal(out.view(np.uint32), full.view(np.uint32)):
            errors.append("window covers the context but the output is not bit-for-bit 'full'")
        if window < 4 and np.array_equal(out, full):
            errors.append(f"window {window} gives the output of 'full'")
    return errors


def main():
    driver, build, work = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    failed = False
    for dtype in ["f32", "f16", "q8_0"]:
        for window, sinks in CASES:
            path = work / f"w{window}_s{sinks}_{dtype}.json"
            subprocess.run([driver, build, str(window), str(sinks), dtype, str(path)], check=True)
            errors = check(json.loads(path.read_text()), window, sinks, dtype)
            print(f"window {window} sinks {sinks} {dtype}: {'ok' if not errors else 'FAILED'}")
            for e in errors[:5]:
                print("  " + e)
            failed |= bool(errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
