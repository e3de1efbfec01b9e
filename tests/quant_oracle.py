"""Writes the block-format oracle of tests/quant_test.cc: a GGUF file holding,
for every block-quantized weight type Duet reads, a tensor of random blocks
(`blocks.<type>`) and what gguf-py's `gguf.quants.dequantize` makes of it
(`expect.<type>`, f32); and for every type Duet quantizes to, random floats
(`floats.<type>`) and gguf-py's `gguf.quants.quantize` of them
(`quantized.<type>`). gguf-py is an implementation independent of Duet's
(numpy, written from ggml's reference C); the C++ test runs
duet::dequantize_row and duet::quantize_row on the inputs and compares every
float and every byte.

Blocks are random bytes, except the f16 scales, which are random finite
values: a NaN scale would make NaN outputs whose payload no format defines.
The seed is fixed, so the file is the same on every run.

usage: quant_oracle.py --out FILE.gguf
"""

import argparse

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

# Byte offsets of each type's f16 fields inside its block (ggml's structs).
F16_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
    T.IQ4_NL: [0],
}
# The types Duet quantizes to, with ggml's reference rounding.
QUANTIZED = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
ROWS = 6
BLOCKS_PER_ROW = 3


def random_blocks(rng: np.random.Generator, qtype: T) -> np.ndarray:
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n = ROWS * BLOCKS_PER_ROW
    raw = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    for offset in F16_FIELDS[qtype]:
        # Finite scales across many binades, either sign, subnormals included.
        scale = rng.uniform(-1.0, 1.0, size=n) * np.exp2(rng.integers(-24, 8, size=n))
        raw[:, offset:offset + 2] = scale.astype(np.float16).view(np.uint8).reshape(n, 2)
    return raw.reshape(ROWS, BLOCKS_PER_ROW * block_bytes), BLOCKS_PER_ROW * block_elems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    rng = np.random.default_rng(20261202)
    writer = GGUFWriter(args.out, "duet-quant-oracle")
    for qtype in F16_FIELDS:
        blocks, cols = random_blocks(rng, qtype)
        name = qtype.name.lower()
        writer.add_tensor(f"blocks.{name}", blocks, raw_dtype=qtype)
        expect = dequantize(blocks, qtype).astype(np.float32).reshape(ROWS, cols)
        writer.add_tensor(f"expect.{name}", expect)
    for qtype in QUANTIZED:
        cols = BLOCKS_PER_ROW * GGML_QUANT_SIZES[qtype][0]
        floats = (rng.standard_normal((ROWS, cols)) * np.exp2(rng.integers(-8, 8, (ROWS, 1))))
        floats = floats.astype(np.float32)
        floats[0, :32] = 0.0   # an all-zero block
        floats[1, :32] = 0.75  # a constant block
        name = qtype.name.lower()
        writer.add_tensor(f"floats.{name}", floats)
        writer.add_tensor(f"quantized.{name}", quantize(floats, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"quant_oracle: {len(F16_FIELDS)} types dequantized, {len(QUANTIZED)} quantized, "
          f"{ROWS} rows of {BLOCKS_PER_ROW} blocks each, written to {args.out}")


if __name__ == "__main__":
    main()
