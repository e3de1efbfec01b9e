#!/usr/bin/env python3
"""Independent NumPy reference forward pass for llama, qwen2, qwen3 and gemma3 GGUF models.

This file is a test oracle for Duet. It deliberately shares no code with Duet:
the GGUF file is parsed by the PyPI package ``gguf`` (``gguf.GGUFReader``) and
every quantized tensor is dequantized by that package's own
``gguf.quants.dequantize``. All arithmetic after dequantization is float64
(weights are dequantized to float32 by gguf, then widened to float64 once and
cached; activations, matmuls, softmax and log-probabilities are float64). The
logits written to disk are rounded to float32 only at the very end.

Conventions (checked against llama.cpp, see tests/oracle/README.md):
  * gguf-py's ReaderTensor.shape is in ggml order (innermost dimension first),
    while ReaderTensor.data is already shaped in numpy order, so a 2-D weight
    with ggml shape [n_in, n_out] dequantizes to a numpy array [n_out, n_in],
    and a linear layer is ``x @ W.T``.
  * llama.cpp's converter permutes the rows of attn_q / attn_k for the llama
    architecture, so RoPE on GGUF weights rotates ADJACENT pairs
    (x[2i], x[2i+1]) ("normal" rope, LLAMA_ROPE_TYPE_NORM), not NeoX halves.
  * qwen2, qwen3 and gemma3 are converted without that permutation and run
    with NeoX RoPE (halves (x[i], x[i + d/2])). qwen2 adds Q/K/V biases;
    qwen3 and gemma3 RMS-normalize each head of q and k (attn_q_norm /
    attn_k_norm) before RoPE; head_dim is attention.key_length.
  * gemma3: embeddings times sqrt(n_embd); GELU (tanh form) gated FFN; RMS
    norms of the attention's and the FFN's outputs (post_attention_norm,
    post_ffw_norm) before the residual adds; layer l is a sliding-window
    layer (attends to the last attention.sliding_window positions, RoPE
    base 10000) when l % 6 < 5, global (the file's base) otherwise.
  * rope_freqs.weight (Llama 3.1+), when present, divides pair i's angle by
    its i-th factor.
  * Grouped-query attention: query head h reads kv head h // (n_head / n_kv).

CLI:
  python tests/oracle/llama_oracle.py --model M.gguf --input IN.json --output-dir DIR
IN.json: {"prompts": [{"name": "capital", "ids": [1, 2, 3]}, ...]}
Writes DIR/<name>.logits.f32 (little-endian float32, [n_tokens, n_vocab],
row-major) and DIR/oracle.json (per prompt: name, n_tokens, n_vocab, argmax
per position, perplexity).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass

# Single-threaded BLAS by default: on a small, busy machine (tests run in
# parallel with builds) multi-threaded OpenBLAS spin-waits and can be 5-10x
# slower; one thread does a 200-token prompt in ~2-3 s. Override by setting
# OPENBLAS_NUM_THREADS yourself. Only effective before numpy is imported.
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass
class Hparams:
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    head_dim: int
    n_rot: int
    rope_base: float
    rms_eps: float
    neox: bool = False     # RoPE rotates halves (x[i], x[i + d/2]) instead of adjacent pairs
    qk_norm: bool = False  # per-head RMS norms of q and k before RoPE
    qkv_bias: bool = False  # attn_q/k/v.bias
    gemma3: bool = False   # embedding scale, GELU FFN, post-norms, local/global layers
    window: int = 0        # sliding window of gemma3's local layers


def _field_value(reader: gguf.GGUFReader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise KeyError(f"GGUF metadata key missing: {key}")
        return default
    return field.contents()


class LlamaOracle:
    """Loads a llama GGUF once (weights dequantized and cached as float64)."""

    def __init__(self, model_path: str):
        reader = gguf.GGUFReader(model_path)
        arch = _field_value(reader, "general.architecture")
        if arch not in ("llama", "qwen2", "qwen3", "gemma3"):
            raise ValueError(f"unsupported architecture {arch!r} "
                             "(oracle handles llama, qwen2, qwen3, gemma3)")
        p = arch + "."
        n_embd = int(_field_value(reader, p + "embedding_length"))
        n_head = int(_field_value(reader, p + "attention.head_count"))
        n_head_kv = int(_field_value(reader, p + "attention.head_count_kv", n_head))
        head_dim = int(_field_value(reader, p + "attention.key_length", n_embd // n_head))
        self.hp = Hparams(
            n_layer=int(_field_value(reader, p + "block_count")),
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=n_head_kv,
            n_ff=int(_field_value(reader, p + "feed_forward_length")),
            n_vocab=0,  # set from token_embd below
            head_dim=head_dim,
            n_rot=int(_field_value(reader, p + "rope.dimension_count", head_dim)),
            rope_base=float(_field_value(reader, p + "rope.freq_base", 10000.0)),
            rms_eps=float(_field_value(reader, p + "attention.layer_norm_rms_epsilon")),
            # Only llama is converted with llama.cpp's Q/K row permutation;
            # llama.cpp runs the others with LLAMA_ROPE_TYPE_NEOX.
            neox=arch != "llama",
            qk_norm=arch in ("qwen3", "gemma3"),
            qkv_bias=arch == "qwen2",
            gemma3=arch == "gemma3",
            window=int(_field_value(reader, p + "attention.sliding_window", 0)),
        )
        if n_head % n_head_kv != 0:
            raise ValueError("n_head must be a multiple of n_head_kv")
        if self.hp.n_rot != head_dim:
            raise ValueError("partial rotary dims are not supported by this oracle")

        tensors = {t.name: t for t in reader.tensors}
        self._tensors = tensors
        self.w: dict[str, np.ndarray] = {}

        def load(name: str, shape_numpy: tuple[int, ...]) -> np.ndarray:
            t = tensors[name]
            # ggml order (innermost first) reversed == numpy order.
            expect_ggml = tuple(reversed(shape_numpy))
            if tuple(int(d) for d in t.shape) != expect_ggml:
                raise ValueError(f"{name}: ggml shape {list(t.shape)} != expected {list(expect_ggml)}")
            arr = np.asarray(dequantize(t.data, t.tensor_type))
            arr = arr.reshape(shape_numpy).astype(np.float64)
            return arr

        tok = tensors["token_embd.weight"]
        self.hp.n_vocab = int(tok.shape[1])
        hp = self.hp
        kv_dim = hp.n_head_kv * hp.head_dim
        self.w["token_embd"] = load("token_embd.weight", (hp.n_vocab, hp.n_embd))
        self.w["output_norm"] = load("output_norm.weight", (hp.n_embd,))
        if "output.weight" in tensors:
            self.w["output"] = load("output.weight", (hp.n_vocab, hp.n_embd))
        else:  # tied embeddings
            self.w["output"] = self.w["token_embd"]
        # Llama 3.1+: RoPE frequency factors dividing every pair's angle.
        self.rope_factors = None
        if "rope_freqs.weight" in tensors:
            self.rope_factors = load("rope_freqs.weight", (hp.head_dim // 2,))
        self.layers = []
        for i in range(hp.n_layer):
            b = f"blk.{i}."
            layer = {}
            if hp.qkv_bias:
                layer["q_bias"] = load(b + "attn_q.bias", (hp.n_head * hp.head_dim,))
                layer["k_bias"] = load(b + "attn_k.bias", (kv_dim,))
                layer["v_bias"] = load(b + "attn_v.bias", (kv_dim,))
            if hp.gemma3:
                layer["attn_post_norm"] = load(b + "post_attention_norm.weight", (hp.n_embd,))
                layer["ffn_post_norm"] = load(b + "post_ffw_norm.weight", (hp.n_embd,))
            if hp.qk_norm:
                layer["q_norm"] = load(b + "attn_q_norm.weight", (hp.head_dim,))
                layer["k_norm"] = load(b + "attn_k_norm.weight", (hp.head_dim,))
            self.layers.append(layer | {
                "attn_norm": load(b + "attn_norm.weight", (hp.n_embd,)),
                "wq": load(b + "attn_q.weight", (hp.n_head * hp.head_dim, hp.n_embd)),
                "wk": load(b + "attn_k.weight", (kv_dim, hp.n_embd)),
                "wv": load(b + "attn_v.weight", (kv_dim, hp.n_embd)),
                "wo": load(b + "attn_output.weight", (hp.n_embd, hp.n_head * hp.head_dim)),
                "ffn_norm": load(b + "ffn_norm.weight", (hp.n_embd,)),
                "w_gate": load(b + "ffn_gate.weight", (hp.n_ff, hp.n_embd)),
                "w_up": load(b + "ffn_up.weight", (hp.n_ff, hp.n_embd)),
                "w_down": load(b + "ffn_down.weight", (hp.n_embd, hp.n_ff)),
            })
        self.reader = reader

    # ---- building blocks (all float64) ------------------------------------

    def rms_norm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        ms = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(ms + self.hp.rms_eps) * w

    def rope(self, x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
        """RoPE. x: [T, n_heads, head_dim]; positions: [T]. Pair i is
        (x[2i], x[2i+1]), or (x[i], x[i + d/2]) for NeoX."""
        d = self.hp.head_dim
        i = np.arange(d // 2, dtype=np.float64)
        inv_freq = base ** (-2.0 * i / d)                        # theta_i
        if self.rope_factors is not None:
            inv_freq = inv_freq / self.rope_factors
        ang = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # [T, d/2]
        cos = np.cos(ang)[:, None, :]
        sin = np.sin(ang)[:, None, :]
        first = slice(0, d // 2) if self.hp.neox else slice(0, None, 2)
        second = slice(d // 2, None) if self.hp.neox else slice(1, None, 2)
        x0 = x[..., first]
        x1 = x[..., second]
        out = np.empty_like(x)
        out[..., first] = x0 * cos - x1 * sin
        out[..., second] = x0 * sin + x1 * cos
        return out

    def forward(self, ids) -> np.ndarray:
        """Returns float64 logits [n_tokens, n_vocab] for positions 0..n-1."""
        hp = self.hp
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D list")
        if ids.min() < 0 or ids.max() >= hp.n_vocab:
            raise ValueError("token id out of range")
        T = ids.size
        pos = np.arange(T)
        group = hp.n_head // hp.n_head_kv
        scale = 1.0 / math.sqrt(hp.head_dim)
        causal = np.triu(np.ones((T, T), dtype=bool), k=1)  # True = masked (future)

        x = self.w["token_embd"][ids].copy()  # [T, n_embd]
        if hp.gemma3:
            x *= math.sqrt(hp.n_embd)
        for il, L in enumerate(self.layers):
            # Gemma 3 (as llama.cpp runs it): five sliding-window layers with
            # RoPE base 10000, then one global layer with the file's base.
            local = hp.gemma3 and il % 6 < 5
            mask = causal
            if local:
                mask = causal | np.tril(np.ones((T, T), dtype=bool), k=-hp.window)
            h = self.rms_norm(x, L["attn_norm"])
            q = h @ L["wq"].T
            k = h @ L["wk"].T
            v = h @ L["wv"].T
            if hp.qkv_bias:
                q, k, v = q + L["q_bias"], k + L["k_bias"], v + L["v_bias"]
            q = q.reshape(T, hp.n_head, hp.head_dim)
            k = k.reshape(T, hp.n_head_kv, hp.head_dim)
            v = v.reshape(T, hp.n_head_kv, hp.head_dim)
            if hp.qk_norm:
                q = self.rms_norm(q, L["q_norm"])
                k = self.rms_norm(k, L["k_norm"])
            base = 10000.0 if local else hp.rope_base
            q = self.rope(q, pos, base)
            k = self.rope(k, pos, base)
            kv_of_head = np.arange(hp.n_head) // group          # h -> kv head
            kh = k[:, kv_of_head, :]                             # [T, n_head, d]
            vh = v[:, kv_of_head, :]
            # scores[h, i, j] = q[i,h,:] . k[j,h,:] * scale
            scores = np.einsum("ihd,jhd->hij", q, kh) * scale
            scores = np.where(mask[None, :, :], -np.inf, scores)
            scores -= scores.max(axis=-1, keepdims=True)
            p = np.exp(scores)
            p /= p.sum(axis=-1, keepdims=True)
            attn = np.einsum("hij,jhd->ihd", p, vh).reshape(T, hp.n_head * hp.head_dim)
            a = attn @ L["wo"].T
            if hp.gemma3:
                a = self.rms_norm(a, L["attn_post_norm"])
            x = x + a

            h = self.rms_norm(x, L["ffn_norm"])
            g = h @ L["w_gate"].T
            u = h @ L["w_up"].T
            if hp.gemma3:                                        # gelu(g) * u, tanh form
                act = 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g**3))) * u
            else:
                act = g / (1.0 + np.exp(-g)) * u                 # silu(g) * u
            f = act @ L["w_down"].T
            if hp.gemma3:
                f = self.rms_norm(f, L["ffn_post_norm"])
            x = x + f

        x = self.rms_norm(x, self.w["output_norm"])
        return x @ self.w["output"].T

    def greedy(self, ids, n_new: int) -> list[int]:
        """Greedy continuation (recomputes the full prefix each step)."""
        seq = list(int(t) for t in ids)
        out = []
        for _ in range(n_new):
            nxt = int(np.argmax(self.forward(seq)[-1]))
            out.append(nxt)
            seq.append(nxt)
        return out


def log_softmax(logits: np.ndarray) -> np.ndarray:
    m = logits.max(axis=-1, keepdims=True)
    z = logits - m
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def perplexity(logits: np.ndarray, ids) -> float | None:
    """exp(mean_{i>=1} -log softmax(logits[i-1])[ids[i]]), float64.

    Returns None for a single-token prompt (no predicted position).
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size < 2:
        return None
    lp = log_softmax(logits[:-1].astype(np.float64))
    nll = -lp[np.arange(ids.size - 1), ids[1:]]
    return float(np.exp(nll.mean()))


def run(model_path: str, input_path: str, output_dir: str, greedy_n: int = 0) -> dict:
    with open(input_path, "r", encoding="utf-8") as f:
        spec = json.load(f)
    prompts = spec["prompts"]
    names = set()
    for pr in prompts:
        name = pr["name"]
        if not _NAME_RE.match(name) or name in names:
            raise ValueError(f"bad or duplicate prompt name: {name!r}")
        names.add(name)

    t0 = time.perf_counter()
    oracle = LlamaOracle(model_path)
    t_load = time.perf_counter() - t0
    os.makedirs(output_dir, exist_ok=True)

    results = []
    for pr in prompts:
        ids = [int(t) for t in pr["ids"]]
        t1 = time.perf_counter()
        logits = oracle.forward(ids)
        logits.astype("<f4").tofile(os.path.join(output_dir, f"{pr['name']}.logits.f32"))
        entry = {
            "name": pr["name"],
            "n_tokens": len(ids),
            "n_vocab": oracle.hp.n_vocab,
            "argmax": [int(a) for a in np.argmax(logits, axis=-1)],
            "perplexity": perplexity(logits, ids),
        }
        if greedy_n > 0:
            entry["greedy"] = oracle.greedy(ids, greedy_n)
        entry["seconds"] = round(time.perf_counter() - t1, 3)
        results.append(entry)

    doc = {
        "model": os.path.basename(model_path),
        "precision": "float64 compute (weights dequantized by gguf.quants to float32, widened to float64); logits files are float32",
        "load_seconds": round(t_load, 3),
        "prompts": results,
    }
    # One prompt per line: readable, and cheap for a C++ test to parse.
    head = {k: v for k, v in doc.items() if k != "prompts"}
    lines = [json.dumps(e, separators=(",", ":")) for e in results]
    text = json.dumps(head, indent=1)[:-2] + ',\n "prompts": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"
    json.loads(text)  # self-check: still valid JSON
    with open(os.path.join(output_dir, "oracle.json"), "w", encoding="utf-8") as f:
        f.write(text)
    return doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="llama GGUF file")
    ap.add_argument("--input", required=True, help='JSON {"prompts": [{"name":..., "ids": [...]}]}')
    ap.add_argument("--output-dir", required=True)
    ap.add_argument("--greedy", type=int, default=0,
                    help="also record N greedy continuation ids per prompt (key 'greedy')")
    args = ap.parse_args(argv)
    doc = run(args.model, args.input, args.output_dir, args.greedy)
    for e in doc["prompts"]:
        ppl = e["perplexity"]
        print(f"{e['name']}: n_tokens={e['n_tokens']} ppl={'n/a' if ppl is None else f'{ppl:.4f}'} ({e['seconds']}s)")
    print(f"load {doc['load_seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
