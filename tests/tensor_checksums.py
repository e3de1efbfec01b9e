"""Writes, for every tensor of each GGUF file given, a checksum of what
gguf-py's `gguf.quants.dequantize` makes of it (f32), as JSON:
  {"FILE NAME": {"TENSOR": [type name, elements, checksum], ...}, ...}
tests/gguf_model_test.cc dequantizes the same tensors with
duet::dequantize_row and compares (GgufRealFiles.*): every tensor of the real
files, every type in them, against an implementation independent of Duet's.

checksum = sum over elements i (in file order) of bits(x_i) * (2 i + 1),
modulo 2^64, bits(x) the f32's 32 bits: one flipped bit anywhere changes it.

usage: tensor_checksums.py --out FILE.json MODEL.gguf...
"""

import argparse
import json
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

CHUNK_ROWS = 4096


def checksum(values: np.ndarray, start: int) -> np.uint64:
    bits = values.reshape(-1).view(np.uint32).astype(np.uint64)
    weights = np.arange(start, start + bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    return np.sum(bits * weights, dtype=np.uint64)


def tensor_checksum(tensor) -> tuple[int, int]:
    data = tensor.data
    rows = data.reshape(-1, data.shape[-1]) if data.ndim > 1 else data.reshape(1, -1)
    total = np.uint64(0)
    done = 0
    with np.errstate(over="ignore"):
        for r in range(0, rows.shape[0], CHUNK_ROWS):
            values = dequantize(rows[r:r + CHUNK_ROWS], tensor.tensor_type).astype(np.float32)
            total = total + checksum(values, done)
            done += values.size
    return done, int(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    result = {}
    for path in args.models:
        reader = GGUFReader(path)
        entries = {}
        for t in reader.tensors:
            n, total = tensor_checksum(t)
            entries[t.name] = [t.tensor_type.name.lower(), n, str(total)]
        result[Path(path).name] = entries
        print(f"tensor_checksums: {Path(path).name}: {len(entries)} tensors")
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
