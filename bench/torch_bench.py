#!/usr/bin/env python3
"""bench/torch_bench.py — PyTorch + transformers on the shapes gpu-check.sh
gives duet, for the cuda backend's "faster than torch.compile" target
(issue 19).

Builds a randomly initialised LlamaForCausalLM of one of the shapes of
core/random_model/random_llama.h (smollm2-135m, llama-1b; SmolLM2's vocabulary, tied
embeddings) in fp16 on the GPU (f32 with --device cpu) and times, for each mode:

  eager    model.generate with transformers' default (dynamic) cache;
  compile  model.generate with cache_implementation="static" and the
           forward compiled with torch.compile(mode="reduce-overhead",
           fullgraph=True) — CUDA graphs, as transformers documents for
           fast generation (recent transformers versions also compile the
           decode step themselves when the cache is static).

Figures, each the median of --repeats runs after the warm-up runs (which
include compilation; their time is reported as warmup_seconds):
  pp_tok_s  prompt tokens / time of generate(prompt, 1 new token);
  tg_tok_s  new tokens / (time of generate(prompt, 1 + N) minus the above),
            so decode runs at depth --prompt (512 by default, where duet's
            tg128 starts at depth 0: attention over 512 positions is a small
            part of a step at these shapes).
Greedy, every run generating exactly the tokens asked (min_new_tokens).

Writes one JSON line per mode to --out (appended) as
{"name": "torch-SHAPE-MODE", "result": {...}} and prints it. Needs
torch with CUDA and transformers; exits 2 when they are missing.

  python3 bench/torch_bench.py --shape smollm2-135m --modes eager,compile \
      --out bench.jsonl
"""

import argparse
import json
import statistics
import sys
import time

SHAPES = {
    "smollm2-135m": dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, intermediate_size=1536),
    "llama-1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                     num_key_value_heads=8, intermediate_size=8192),
    # For trying the script itself, on a CPU (--device cpu).
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=128),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-135m")
    p.add_argument("--modes", default="eager,compile",
                   help="comma-separated: eager, compile (default: both)")
    p.add_argument("--prompt", type=int, default=512, help="prompt tokens (default 512)")
    p.add_argument("--new", type=int, default=128, help="decode tokens timed (default 128)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per figure (default 3)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    p.add_argument("--out", help="append the JSON lines to this file")
    p.add_argument("--device", default="cuda", help="torch device (default cuda)")
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in ("eager", "compile")]
    if bad or not modes:
        p.error(f"--modes: unknown mode(s) {bad or modes}; choose from eager, compile")
    if args.prompt < 1 or args.new < 1 or args.repeats < 1 or args.warmup < 0:
        p.error("--prompt, --new and --repeats must be at least 1, --warmup at least 0")
    args.modes = modes
    return args


def main():
    args = parse_args()
    try:
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"torch_bench.py: needs torch and transformers: {e}", file=sys.stderr)
        return 2
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("torch_bench.py: torch sees no CUDA device", file=sys.stderr)
        return 2

    def synchronize():
        if cuda:
            torch.cuda.synchronize()

    config = LlamaConfig(vocab_size=49152, max_position_embeddings=8192, rms_norm_eps=1e-5,
                         rope_theta=100000.0, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2, pad_token_id=0, **SHAPES[args.shape])
    torch.manual_seed(1)
    dtype = torch.float16 if cuda else torch.float32
    with torch.device(args.device):
        model = LlamaForCausalLM(config).to(dtype).eval()
    weights = sum(p.numel() for p in model.parameters())
    prompt = torch.randint(3, config.vocab_size, (1, args.prompt), device=args.device)

    def generate(new, static):
        kwargs = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False,
                      pad_token_id=config.pad_token_id)
        if static:
            kwargs["cache_implementation"] = "static"
        synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(prompt, **kwargs)
        synchronize()
        seconds = time.perf_counter() - start
        if out.shape[1] != args.prompt + new:
            raise RuntimeError(f"generated {out.shape[1] - args.prompt} tokens, not {new}")
        return seconds

    eager_forward = model.forward
    for mode in args.modes:
        static = mode == "compile"
        model.forward = eager_forward
        if static:
            model.forward = torch.compile(eager_forward, mode="reduce-overhead", fullgraph=True)
        start = time.perf_counter()
        for _ in range(args.warmup):
            generate(1, static)
            generate(1 + args.new, static)
        warmup = time.perf_counter() - start
        prefill = statistics.median(generate(1, static) for _ in range(args.repeats))
        whole = statistics.median(generate(1 + args.new, static) for _ in range(args.repeats))
        result = {
            "shape": args.shape, "mode": mode, "weights": weights, "dtype": str(dtype).removeprefix("torch."),
            "prompt_tokens": args.prompt, "new_tokens": args.new, "repeats": args.repeats,
            "pp_tok_s": args.prompt / prefill,
            "tg_tok_s": args.new / (whole - prefill) if whole > prefill else None,
            "prefill_seconds": prefill, "generate_seconds": whole, "warmup_seconds": warmup,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name() if cuda else args.device,
            "peak_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        }
        line = json.dumps({"name": f"torch-{args.shape}-{mode}", "result": result})
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
