"""The duet Python package (docs/python.md) on the real model, against the
`duet` command: the same tokens for the same pipeline and seed, a batch equal
to its requests alone, a stream equal to the whole answer, logits that are
the rows the tokens were drawn from and bit for bit the CLI's saved logits,
perplexity equal to the CLI's, errors of the documented classes, no
leak over 1,000 generations, Ctrl-C and the GIL.

Run by ctest (python_package) as
    PYTHONPATH=build/python DUET_CLI=build/bin/duet DUET_SOURCE_DIR=. \\
        build/venv/bin/python -m pytest python/tests
on the onednn backend in batch-invariant mode, where a request's tokens do
not depend on what else runs.
"""

import json
import os
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import duet

SOURCE = os.path.abspath(os.environ["DUET_SOURCE_DIR"])
DUET = os.environ["DUET_CLI"]
MODEL = os.path.abspath(os.environ.get("DUET_MODEL") or os.path.join(
    SOURCE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
CONFIG = os.path.join(SOURCE, "configs", "smollm2-serve.yaml")  # batches; every sampler link
SETS = {
    "backend.plugin": "onednn",
    "backend.options.threads": 1,
    "backend.options.batch_invariant": True,
    "model.path": MODEL,
}
PROMPTS = ["What is the capital of France?", "Name three rivers.", "Count to five.",
           "Write a haiku about the sea.", "What is 2 + 2?", "Say hello in Spanish.",
           "Name a prime number.", "What colour is the sky?"]


@pytest.fixture(scope="module")
def pipeline():
    if not os.path.isfile(MODEL):
        raise AssertionError("model file %s is missing; run `bash scripts/fetch-model.sh`" % MODEL)
    return duet.Pipeline(CONFIG, overrides=SETS)


def cli_run(prompt, sets):
    """`duet run CONFIG --json` with `sets` (a dict) as --set flags."""
    cmd = [DUET, "run", CONFIG, "--json", "--prompt", prompt]
    for key, value in sets.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        cmd += ["--set", "%s=%s" % (key, text)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_tokens_equal_the_cli_greedy_and_sampled(pipeline):
    greedy = pipeline.generate(PROMPTS[0])
    out = cli_run(PROMPTS[0], SETS)
    assert greedy.token_ids == out["generated_token_ids"]
    assert greedy.prompt_token_ids == out["prompt_token_ids"]
    assert greedy.text == out["text"]
    assert greedy.finish_reason == out["finish_reason"] == "stop"
    # Sampled: the CLI's pipeline carries the setting; Python gives it per call.
    sets = dict(SETS)
    sets.update({"components.sampler.seed": 11, "components.sampler.chain.4.temperature": 0.9,
                 "stages.1.decode.max_new_tokens": 24})
    out = cli_run(PROMPTS[3], sets)
    sampled = pipeline.generate(PROMPTS[3], seed=11, temperature=0.9, max_tokens=24)
    assert sampled.token_ids == out["generated_token_ids"]
    # And a pipeline built with the same overrides gives them with no settings.
    assert duet.Pipeline(CONFIG, overrides=sets).generate(PROMPTS[3]).token_ids == \
        out["generated_token_ids"]


def test_a_batch_equals_each_request_alone(pipeline):
    requests = [{"prompt": p, "seed": i, "temperature": 0.8, "max_tokens": 16}
                for i, p in enumerate(PROMPTS)]
    requests.append({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8})
    batch = pipeline.generate_batch(requests)
    assert len(batch) == len(requests)
    for request, got in zip(requests, batch):
        fields = dict(request)
        prompt = fields.pop("prompt", None)
        alone = pipeline.generate(prompt, **fields)
        assert got.token_ids == alone.token_ids, request
        assert got.text == alone.text


def test_a_stream_is_the_whole_answer(pipeline):
    whole = pipeline.generate(PROMPTS[1], max_tokens=40)
    stream = pipeline.stream(PROMPTS[1], max_tokens=40)
    pieces = list(stream)
    assert len(pieces) > 1
    assert "".join(pieces) == whole.text
    assert stream.result.token_ids == whole.token_ids
    # Let go of half-way: the request is cancelled, the pipeline goes on.
    with pipeline.stream(PROMPTS[2], max_tokens=40) as s:
        next(s)
    assert pipeline.generate(PROMPTS[1], max_tokens=40).token_ids == whole.token_ids


def test_logits_are_the_rows_the_tokens_were_drawn_from(pipeline):
    r = pipeline.generate(PROMPTS[0], max_tokens=6, logits=True)
    assert isinstance(r.logits, np.ndarray)
    assert r.logits.dtype == np.float32
    assert r.logits.shape == (len(r.token_ids), pipeline.n_vocab)
    assert list(r.logits.argmax(axis=1)) == r.token_ids  # greedy
    # The next-token logits after the prompt are the first row.
    first = pipeline.logits(r.prompt_token_ids)
    assert np.array_equal(first, r.logits[0])
    assert pipeline.generate(PROMPTS[0], max_tokens=2).logits is None


def test_logits_equal_the_clis_saved_logits_bit_for_bit(pipeline, tmp_path):
    """`duet perplexity --save-logits` writes each position's next-token
    logits (core/cli/logits_file.h): "DUETLGT1", n_vocab u32, ctx i32,
    n_tokens u64, the token ids, then f32 rows."""
    saved = tmp_path / "logits.bin"
    cmd = [DUET, "perplexity", CONFIG, os.path.join(SOURCE, "tests", "data",
                                                    "perplexity_paragraph.txt"),
           "--save-logits", str(saved)]
    for key, value in SETS.items():
        cmd += ["--set", "%s=%s" % (key, "true" if value is True else value)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = saved.read_bytes()
    assert data[:8] == b"DUETLGT1"
    n_vocab, ctx, n = struct.unpack_from("<IiQ", data, 8)
    assert (n_vocab, ctx) == (pipeline.n_vocab, 0)
    tokens = np.frombuffer(data, dtype=np.int32, count=n, offset=24)
    rows = np.frombuffer(data, dtype=np.float32, offset=24 + 4 * n).reshape(-1, n_vocab)
    for k in (1, 2, 10, 100, n - 1):
        assert np.array_equal(pipeline.logits(tokens[:k]), rows[k - 1]), k


def test_perplexity_equals_the_cli(pipeline):
    text_file = os.path.join(SOURCE, "tests", "data", "perplexity_paragraph.txt")
    with open(text_file) as f:
        text = f.read()
    for ctx in (0, 64):
        cmd = [DUET, "perplexity", CONFIG, text_file, "--json", "--ctx", str(ctx)]
        for key, value in SETS.items():
            cmd += ["--set", "%s=%s" % (key, "true" if value is True else value)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        cli = json.loads(r.stdout)["perplexity"]
        assert abs(pipeline.perplexity(text, ctx=ctx) - cli) <= 1e-6 * cli, ctx


def test_what_a_review_found(pipeline):
    # A batch the scheduler refuses one request of runs none of them.
    with pytest.raises(duet.InputRejectedError) as e:
        pipeline.generate_batch([{"prompt": PROMPTS[0], "max_tokens": 128, "ignore_eos": True},
                                 {"prompt": [1] * 9000}])
    assert str(e.value).startswith("requests[1] has a prompt of 9000 tokens"), str(e.value)
    assert pipeline.generate(PROMPTS[0], max_tokens=1).queued_s < 0.5  # nothing left running
    # A stream closed, or cancelled, ends; its result is gone.
    s = pipeline.stream(PROMPTS[1], max_tokens=40)
    next(s)
    s.close()
    assert list(s) == []
    handle = pipeline._p.start(json.dumps({"prompt": PROMPTS[1]}))
    pipeline._p.cancel(handle)
    with pytest.raises(duet.UsageError):
        pipeline._p.finished(handle)
    # Perplexity's window bounds, as the CLI's.
    for ctx in (1, 3, 100000):
        with pytest.raises(duet.RequestError) as e:
            pipeline.perplexity("Hello world, and more words here.", ctx=ctx)
        assert e.value.param == "ctx"
    with pytest.raises(duet.InputRejectedError):
        pipeline.perplexity("Hello world", ctx=64)
    # Values as Python has them: strings stay strings, NaN is refused,
    # NumPy ids are ids, bytes are not text, None is a setting left out.
    p = duet.Pipeline(CONFIG, overrides=dict(SETS, **{"model.system": "Answer: briefly"}))
    assert p.generate(PROMPTS[0], max_tokens=2).finish_reason in ("stop", "length")
    with pytest.raises(duet.RequestError):
        pipeline.generate("x", temperature=float("nan"))
    ids = np.array(pipeline.tokenize("The capital of France is"), dtype=np.int64)
    assert np.array_equal(pipeline.logits(ids), pipeline.logits(list(ids)))
    with pytest.raises(duet.RequestError):
        pipeline.generate(b"hi")
    assert pipeline.generate_batch([{"prompt": "Hi", "seed": None, "max_tokens": 2}])[0].token_ids
    with pytest.raises(duet.RequestError):
        pipeline.generate("")
    # Logits are shared: read-only.
    assert not pipeline.generate("Hi", max_tokens=1, logits=True).logits.flags.writeable


def test_tokenize_and_detokenize(pipeline):
    ids = pipeline.tokenize("The capital of France is Paris.")
    assert pipeline.detokenize(ids) == "The capital of France is Paris."
    assert pipeline.tokenize("<|im_end|>", special=True) != pipeline.tokenize("<|im_end|>")
    with pytest.raises(duet.InputRejectedError):
        pipeline.detokenize([pipeline.n_vocab])


def test_errors_are_the_documented_classes(pipeline):
    with pytest.raises(duet.ConfigError) as e:
        duet.Pipeline(CONFIG, overrides=dict(SETS, **{"components.kv_cache.dtype": "q9"}))
    assert e.value.exit_code == 2 and "components.kv_cache.dtype" in str(e.value)
    with pytest.raises(duet.ConfigError):
        duet.Pipeline("/nonexistent.yaml")
    with pytest.raises(duet.ModelFileError) as e:
        duet.Pipeline(CONFIG, overrides=dict(SETS, **{"model.path": "/nonexistent.gguf"}))
    assert e.value.exit_code == 3
    with pytest.raises(duet.RequestError) as e:
        pipeline.generate("x", temperature="warm")
    assert e.value.param == "temperature"
    assert isinstance(e.value, ValueError)
    with pytest.raises(duet.RequestError) as e:
        pipeline.generate("x", frobnicate=1)
    assert e.value.param == "frobnicate"
    with pytest.raises(duet.InputRejectedError) as e:
        pipeline.generate([1] * 9000)
    assert e.value.exit_code == 6 and "KV cache holds 8192" in str(e.value)
    with pytest.raises(duet.ConfigError):  # the link's own range, checked when it is made
        pipeline.generate("x", top_p=3)
    # The pipeline is unharmed.
    assert pipeline.generate(PROMPTS[0]).finish_reason == "stop"


def test_structured_output(pipeline):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
              "required": ["city"]}
    r = pipeline.generate(messages=[{"role": "user", "content": "Where is the Louvre? JSON."}],
                          response_format={"type": "json_schema",
                                           "json_schema": {"name": "c", "schema": schema}})
    assert isinstance(json.loads(r.text)["city"], str)


def test_plugins_lists_what_loaded_and_why_not():
    records = {r["name"]: r for r in duet.plugins()}
    assert records["reference"]["loaded"]
    assert any(c["kind"] == "backend" and c["name"] == "reference"
               for c in records["reference"]["components"])
    assert "grammar" in records
    for r in records.values():
        assert r["loaded"] or r["refusal"]


def test_compare_returns_rows_a_data_frame_takes(tmp_path):
    experiment = tmp_path / "e.yaml"
    experiment.write_text(textwrap.dedent("""
        pipeline: %s
        baseline: f16
        variants:
          - {name: f16, set: {components.kv_cache.dtype: f16, model.path: "%s", backend.plugin: onednn}}
          - {name: q8, set: {components.kv_cache.dtype: q8_0, model.path: "%s", backend.plugin: onednn}}
        workload:
          speed: {prompt_tokens: [16], gen_tokens: [4], rounds: 1}
          fidelity: {text: %s, ctx: 0}
          greedy: {prompts: ["What is the capital of France?"], tokens: 8}
        """ % (os.path.join(SOURCE, "configs", "smollm2.yaml"), MODEL, MODEL,
               os.path.join(SOURCE, "tests", "data", "perplexity_paragraph.txt"))))
    rows = duet.compare(str(experiment), overrides={"workload.greedy.tokens": 6})
    assert [r["variant"] for r in rows] == ["f16", "q8"]
    for r in rows:
        assert r["status"] == "ok" and r["failure"] is None
        assert r["pp16_tps_median"] > 0 and r["tg4_tps_median"] > 0
        assert r["perplexity"] > 1
    assert rows[0]["kld_mean"] == 0  # the baseline against itself
    assert rows[0]["greedy_matching_tokens"] == 6  # the override: 6 tokens, all the baseline's
    assert duet.compare(str(experiment), full=True)["workload"]["greedy_tokens"] == 8
    with pytest.raises(duet.ConfigError):
        duet.compare(str(tmp_path / "missing.yaml"))


def process_state():
    """(VmRSS in KiB, open file descriptors) of this process."""
    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return rss, len(os.listdir("/proc/self/fd"))


def test_no_leak_over_a_thousand_generations(pipeline):
    for i in range(100):  # warm: allocators, caches
        pipeline.generate(PROMPTS[i % 8], max_tokens=2, seed=i, temperature=0.7)
        list(pipeline.stream(PROMPTS[i % 8], max_tokens=2))
    rss, fds = process_state()
    for i in range(1000):
        pipeline.generate(PROMPTS[i % 8], max_tokens=2, seed=i, temperature=0.7)
        if i % 10 == 0:
            list(pipeline.stream(PROMPTS[i % 8], max_tokens=2))
    rss_after, fds_after = process_state()
    assert fds_after == fds
    assert rss_after - rss < 2048, "RSS grew %d KiB over 1,000 generations" % (rss_after - rss)


def test_the_gil_is_released_while_generating(pipeline):
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    start = len(ticks)
    pipeline.generate(PROMPTS[1], max_tokens=64, ignore_eos=True, stop=[])
    done.set()
    counter.join()
    assert len(ticks) - start > 20  # Python ran while the forward passes did


def test_ctrl_c_interrupts_a_generation_cleanly():
    script = textwrap.dedent("""
        import sys, duet
        p = duet.Pipeline(sys.argv[1], overrides={"backend.plugin": "onednn",
                                                  "model.path": sys.argv[2]})
        print("ready", flush=True)
        try:
            p.generate("Count to a thousand.", max_tokens=4000, ignore_eos=True, stop=[])
            print("not interrupted")
        except KeyboardInterrupt:
            r = p.generate("What is the capital of France?")
            print("interrupted; then", r.finish_reason, flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script, CONFIG, MODEL],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ))
    assert child.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    child.send_signal(2)  # SIGINT
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.strip() == "interrupted; then stop", out + err
