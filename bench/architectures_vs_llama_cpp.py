"""llama.cpp on the small random-weight files of every architecture that
tests/architecture_test.cc writes and checks against the NumPy oracle
(tests/oracle/llama_oracle.py): per file and prompt, the logits NMSE of
llama.cpp against the oracle's (which Duet's reference and onednn backends
match to ~1e-12) at every prompt position, and whether llama.cpp's greedy
continuation equals the oracle's. Exits 1 when an NMSE exceeds 1e-6 or a
greedy continuation differs.

usage: architectures_vs_llama_cpp.py [BUILD_DIR]   (default: build)
Run tests/architecture_test first (it writes BUILD_DIR/architecture_oracle),
in the venv that bench/llama_cpp_venv.sh builds (llama-cpp-python, numpy).
"""

import json
import pathlib
import sys

import llama_cpp
import numpy as np
from llama_cpp import Llama


def main() -> int:
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build")
    root = build / "architecture_oracle"
    failed = False
    print(f"llama-cpp-python {llama_cpp.__version__}")
    for arch_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        oracle = json.loads((arch_dir / "oracle.json").read_text())
        inputs = {p["name"]: p["ids"] for p in json.loads((arch_dir / "input.json").read_text())["prompts"]}
        llm = Llama(model_path=str(arch_dir / "model.gguf"), n_ctx=128, logits_all=True,
                    n_threads=2, verbose=False, type_k=0, type_v=0, flash_attn=False)
        vocab = llm.n_vocab()
        for p in oracle["prompts"]:
            ids = inputs[p["name"]]
            want = np.fromfile(arch_dir / f"{p['name']}.logits.f32", dtype="<f4").reshape(-1, vocab)
            llm.reset()
            llm.eval(ids)
            got = np.array(llm.scores[: len(ids)], dtype=np.float64)
            nmse = float(((got - want) ** 2).sum() / (want.astype(np.float64) ** 2).sum())
            greedy = []
            for _ in range(len(p["greedy"])):
                tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
                greedy.append(tok)
                llm.eval([tok])
            same = greedy == p["greedy"]
            failed |= nmse > 1e-6 or not same
            print(f"{arch_dir.name:8s} {p['name']:8s} {len(ids):3d} positions: logits NMSE {nmse:.3g}, "
                  f"greedy {len(greedy)} tokens {'equal' if same else 'DIFFER'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
