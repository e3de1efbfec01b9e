"""Cross-checks `duet quantize` against llama.cpp's quantizer, file type by
file type, on one f32 (or f16) model: llama.cpp's `llama_model_quantize`
(through llama-cpp-python, no importance matrix) and `duet quantize` each
write the model, then every tensor of the two files is compared — its type,
and its bytes block by block. Prints one line per file type: tensors whose
type differs (must be none), blocks compared, blocks that differ, and for
differing blocks the largest difference of their dequantized values relative
to the block's largest magnitude (gguf-py's dequantize). Exits 1 when a type
choice differs or a file fails to load.

Blocks can differ where llama.cpp's build fused a multiply-add that Duet
(built with -ffp-contract=off) rounds twice, moving a value across a
rounding tie; such blocks differ by one level in a few elements.

usage: quantize_vs_llama_cpp.py --duet build/bin/duet --model F32.gguf
           [--types q4_k_m,q6_k,...] [--workdir DIR] [--threads N]
Run it in the venv bench/llama_cpp_venv.sh builds (llama-cpp-python, gguf).
"""

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

import llama_cpp

FTYPES = {
    "f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9,
    "q2_k": 10, "q3_k_s": 11, "q3_k_m": 12, "q3_k_l": 13, "q4_k_s": 14, "iq4_nl": 25, "q4_k_m": 15, "q5_k_s": 16, "q5_k_m": 17, "q6_k": 18, "bf16": 32,
}


def llama_quantize(src: str, dst: str, ftype: int, threads: int) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize returned {rc} for ftype {ftype}")


def compare(duet_file: str, llama_file: str) -> dict:
    ours = {t.name: t for t in GGUFReader(duet_file).tensors}
    theirs = {t.name: t for t in GGUFReader(llama_file).tensors}
    if set(ours) != set(theirs):
        raise RuntimeError(f"tensor names differ: {sorted(set(ours) ^ set(theirs))[:5]}")
    out = {"type_mismatch": [], "blocks": 0, "blocks_differ": 0, "worst_rel": 0.0, "tensors_differ": 0}
    for name, a in ours.items():
        b = theirs[name]
        if a.tensor_type != b.tensor_type:
            out["type_mismatch"].append(f"{name}: duet {a.tensor_type.name}, llama.cpp {b.tensor_type.name}")
            continue
        block_elems, block_bytes = GGML_QUANT_SIZES[a.tensor_type]
        ra = np.asarray(a.data).reshape(-1).view(np.uint8).reshape(-1, block_bytes)
        rb = np.asarray(b.data).reshape(-1).view(np.uint8).reshape(-1, block_bytes)
        differ = np.any(ra != rb, axis=1)
        out["blocks"] += len(ra)
        n = int(differ.sum())
        if n == 0:
            continue
        out["blocks_differ"] += n
        out["tensors_differ"] += 1
        da = dequantize(ra[differ].reshape(-1), a.tensor_type).reshape(n, block_elems)
        db = dequantize(rb[differ].reshape(-1), a.tensor_type).reshape(n, block_elems)
        scale = np.maximum(np.abs(db).max(axis=1), 1e-30)
        out["worst_rel"] = max(out["worst_rel"], float((np.abs(da - db).max(axis=1) / scale).max()))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duet", required=True)
    parser.add_argument("--model", required=True, help="an f32 or f16 GGUF")
    parser.add_argument("--types", default="q4_0,q4_1,q5_0,q5_1,q8_0,q4_k_s,q4_k_m,q5_k_s,q5_k_m,q6_k")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="duet-quant-")
    failed = False
    print(f"{'type':8} {'type choices':>14} {'blocks':>10} {'differ':>8} {'tensors':>8} {'worst rel':>10}")
    for name in args.types.split(","):
        ours = os.path.join(workdir, f"duet.{name}.gguf")
        theirs = os.path.join(workdir, f"llama.{name}.gguf")
        subprocess.run([args.duet, "quantize", args.model, ours, "--type", name,
                        "--threads", str(args.threads)], check=True, stdout=subprocess.DEVNULL)
        llama_quantize(args.model, theirs, FTYPES[name], args.threads)
        r = compare(ours, theirs)
        choices = "same" if not r["type_mismatch"] else f"{len(r['type_mismatch'])} differ"
        failed |= bool(r["type_mismatch"])
        print(f"{name:8} {choices:>14} {r['blocks']:>10} {r['blocks_differ']:>8} "
              f"{r['tensors_differ']:>8} {r['worst_rel']:>10.3g}")
        for m in r["type_mismatch"][:5]:
            print("   ", m)
        os.remove(ours)
        os.remove(theirs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
