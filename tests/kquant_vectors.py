"""Writes tests/data/kquant_vectors.gguf: rows of floats and what ggml's
reference quantizers make of them, for the formats whose quantizer searches
for its scales (the K-quants q2_k ... q6_k, and iq4_nl). gguf-py has no such
quantizer, so the bytes come from ggml itself:
`ggml_quantize_chunk` (no importance matrix, as llama-quantize calls it) in
the libggml-base that llama-cpp-python ships. tests/quant_test.cc runs
duet::quantize_row on the same floats and compares every byte.

The file is committed (about 60 KB) because building llama-cpp-python takes
15 minutes; rerun this script to regenerate it, in the venv that
bench/llama_cpp_venv.sh builds (it has llama_cpp and gguf):
    build/bench-venv/bin/python tests/kquant_vectors.py --out tests/data/kquant_vectors.gguf

Rows (each 512 floats, two super-blocks) cover what the searches branch on:
Gaussian weights at several magnitudes, heavy-tailed weights with outliers,
all-positive and all-negative rows (the minimum clamps to zero), constant
and all-zero super-blocks and sub-blocks, values below the f16 range of the
scales, and weights from SmolLM2's ffn_down when --model points at an f32
copy of it.
"""

import argparse
import ctypes
import os

import numpy as np
from gguf import GGUFReader, GGUFWriter
from gguf import GGMLQuantizationType as T

import llama_cpp

TYPES = {"q2_k": T.Q2_K, "q3_k": T.Q3_K, "q4_k": T.Q4_K, "q5_k": T.Q5_K, "q6_k": T.Q6_K,
         "iq4_nl": T.IQ4_NL}
ROW = 512


def ggml_quantize(qtype: T, rows: np.ndarray) -> np.ndarray:
    lib_dir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    ggml = ctypes.CDLL(os.path.join(lib_dir, "libggml-base.so"))
    ggml.ggml_quantize_init(ctypes.c_int(int(qtype)))
    ggml.ggml_row_size.restype = ctypes.c_size_t
    ggml.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    row_bytes = ggml.ggml_row_size(int(qtype), rows.shape[1])
    out = np.zeros((rows.shape[0], row_bytes), dtype=np.uint8)
    src = np.ascontiguousarray(rows, dtype=np.float32)
    ggml.ggml_quantize_chunk.restype = ctypes.c_size_t
    ggml.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    n = ggml.ggml_quantize_chunk(int(qtype), src.ctypes.data, out.ctypes.data, 0, rows.shape[0],
                                 rows.shape[1], None)
    assert n == out.size, (n, out.size)
    return out


def rows(rng: np.random.Generator, model: str | None) -> np.ndarray:
    out = []
    for scale in (1e-3, 0.02, 1.0, 300.0):
        out += [rng.normal(0, scale, ROW) for _ in range(3)]
    out += [rng.standard_t(2, ROW) * 0.05 for _ in range(3)]  # heavy tails
    spiky = rng.normal(0, 0.02, ROW)
    spiky[[3, 100, 300]] = [4.0, -6.0, 9.0]
    out.append(spiky)
    out.append(np.abs(rng.normal(0, 0.1, ROW)) + 0.01)  # all positive
    out.append(-np.abs(rng.normal(0, 0.1, ROW)) - 0.01)  # all negative
    steps = rng.normal(0, 0.1, ROW)
    steps[:256] = 0.25  # a constant super-block
    steps[256:288] = 0.0  # an all-zero sub-block
    steps[300:316] = 0.0  # an all-zero q6_k sub-block
    out.append(steps)
    out.append(np.zeros(ROW))
    out.append(rng.normal(0, 1e-9, ROW))  # scales below f16's range
    levels = rng.integers(-8, 8, ROW) * 0.125  # exactly on a grid: many ties
    out.append(levels)
    if model:
        reader = GGUFReader(model)
        t = next(t for t in reader.tensors if t.name == "blk.0.ffn_down.weight")
        w = np.asarray(t.data, dtype=np.float32).reshape(-1)
        out += [w[i * ROW:(i + 1) * ROW] for i in range(8)]
    return np.stack(out).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", help="an f32 SmolLM2 (duet quantize IN OUT --type f32)")
    args = parser.parse_args()
    x = rows(np.random.default_rng(20261202), args.model)
    writer = GGUFWriter(args.out, "kquant_vectors")
    writer.add_tensor("floats", x)
    for name, qtype in TYPES.items():
        q = ggml_quantize(qtype, x)
        writer.add_tensor(f"ggml.{name}", q, raw_shape=q.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
