"""Duet from Python: pipelines, generation, logits and plugins (docs/python.md).

    import duet
    p = duet.Pipeline("configs/smollm2.yaml")
    print(p.generate("What is the capital of France?").text)

Requests run through the batching scheduler, the engine `duet serve` runs;
their settings are those of a `duet run --prompts-file` line
(docs/batching.md). Errors are the classes of duet.errors.
"""

import json as _json
import operator as _operator
import subprocess as _subprocess

from . import errors
from ._cli import executable as _executable
from ._duet import Generation, plugins as _plugins
from ._duet import Pipeline as _Pipeline
from .errors import (ConfigError, Error, InputRejectedError, InternalError, MissingToolError,
                     ModelFileError, OutOfMemoryError, PluginError, RequestError, UsageError)

__all__ = ["Pipeline", "Generation", "Stream", "plugins", "compare", "errors", "Error",
           "UsageError",
           "ConfigError", "RequestError", "ModelFileError", "PluginError", "OutOfMemoryError",
           "InputRejectedError", "MissingToolError", "InternalError"]


def _dumps(value, what):
    """`value` as JSON text; what JSON cannot hold (NaN, infinity, other
    types) is a RequestError naming `what`."""
    try:
        return _json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise RequestError("%s: %s" % (what, e), what) from None


def _override(key, value):
    """"key=value" as `--set` takes it: the value as JSON, which YAML reads
    as itself (a string stays a string, a list a list)."""
    return "%s=%s" % (key, _dumps(value, key))


def _request(prompt=None, messages=None, **settings):
    """The JSON object of one request; settings set to None are left out."""
    request = {}
    if prompt is not None:
        if isinstance(prompt, (bytes, bytearray)):
            raise RequestError("prompt: bytes; give text (str) or token ids", "prompt")
        if isinstance(prompt, str):
            request["prompt"] = prompt
        else:
            try:
                request["prompt"] = [_operator.index(t) for t in prompt]
            except TypeError:
                raise RequestError("prompt: expected text or token ids (integers)",
                                   "prompt") from None
    if messages is not None:
        request["messages"] = list(messages)
    for key, value in settings.items():
        if value is not None:
            request[key] = value
    return request


def plugins():
    """Every plugin Duet can see (its own folder, DUET_PLUGIN_PATH): a list of
    dicts with name, path, version, summary, loaded, refusal (why it was
    refused) and components (kind, name, summary, backend)."""
    return _plugins()


def compare(experiment, overrides=None, full=False):
    """Runs `duet compare EXPERIMENT -o json` (docs/compare.md) and
    returns one flat dict per variant, the baseline first — pandas.DataFrame
    takes the list as it is: variant, backend, status, failure (the reason,
    or None), load_seconds, peak_rss_bytes, device_bytes, TEST_tps_median /
    _min / _max and TEST_ttft_ms for each speed test (pp128, tg32, ...), the
    fidelity figures (perplexity, kld_mean, top1_agreement, ...) and
    greedy_matching_tokens (summed over the prompts). `overrides` are the
    experiment's --set key paths; `full=True` returns the whole JSON object
    instead. Raises duet.MissingToolError without the `duet` executable and
    duet.Error (the class of its exit code) when the command fails."""
    cli = _executable()
    if cli is None:
        raise MissingToolError("duet.compare runs the duet executable, which is not beside this "
                               "package; reinstall it or set DUET_CLI")
    cmd = [cli, "compare", str(experiment), "-o", "json"]
    for key, value in (overrides or {}).items():
        cmd += ["--set", _override(key, value)]
    run = _subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        message = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "failed"
        cls = {2: ConfigError, 3: ModelFileError, 4: PluginError, 5: OutOfMemoryError,
               6: InputRejectedError, 7: MissingToolError}.get(run.returncode, InternalError)
        raise cls("duet compare exited with %d: %s" % (run.returncode, message))
    result = _json.loads(run.stdout)
    if full:
        return result
    rows = []
    for v in result["variants"]:
        row = {"variant": v["name"], "backend": v["backend"], "status": v["status"],
               "failure": v["failure"]["reason"] if v["failure"] else None,
               "load_seconds": v["load_seconds"], "peak_rss_bytes": v["peak_rss_bytes"],
               "device_bytes": v["device_bytes"]}
        for s in v["speed"]:
            for stat in ("median", "min", "max"):
                row["%s_tps_%s" % (s["test"], stat)] = s["tokens_per_second"][stat]
            row["%s_ttft_ms" % s["test"]] = s["ttft_ms"]
        row.update(v["fidelity"] or {})
        row["greedy_matching_tokens"] = sum(g["matching_tokens"] for g in v["greedy"])
        rows.append(row)
    return rows


class Stream:
    """The text of one request as it is generated: iterate for its pieces;
    once they are exhausted, `result` holds the Generation. Closing it (or
    letting go of it) before the end cancels the request."""

    def __init__(self, pipeline, handle):
        self._pipeline = pipeline
        self._handle = handle
        self.result = None

    def __iter__(self):
        return self

    def __next__(self):
        if self.result is not None or self._pipeline is None:
            raise StopIteration
        try:
            piece = self._pipeline.next(self._handle)
            if piece is None:
                self.result = self._pipeline.finished(self._handle)
                raise StopIteration
        except StopIteration:
            raise
        except BaseException:
            # Ctrl-C or an error: the request is gone; the stream ends here.
            self._pipeline = None
            raise
        return piece

    def close(self):
        if self.result is None and self._pipeline is not None:
            self._pipeline.cancel(self._handle)
            self._pipeline = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # the interpreter is shutting down
            pass


class Pipeline:
    """A pipeline built from a YAML file or a model file (*.gguf, for which
    Duet builds its default pipeline as `duet run MODEL.gguf` does), with
    `overrides` {"key.path": value} applied as `--set` would. The checks,
    errors and plugin folders are the `duet` command's; the weights are
    loaded and the KV cache allocated here."""

    def __init__(self, source, overrides=None):
        items = (overrides or {}).items()
        self._p = _Pipeline(str(source), [_override(k, v) for k, v in items])

    @property
    def backend(self):
        """The backend the pipeline runs on ("onednn", "reference", ...)."""
        return self._p.backend

    @property
    def sampler(self):
        """The sampler chain's order, e.g. "temperature -> top_p"."""
        return self._p.sampler

    @property
    def n_vocab(self):
        return self._p.n_vocab

    @property
    def kv_cache_bytes(self):
        return self._p.kv_cache_bytes

    def describe(self):
        """The pipeline as YAML, every default written out."""
        return self._p.describe

    def generate(self, prompt=None, *, messages=None, logits=False, **settings):
        """One answer. `prompt` is text (through the chat template when the
        pipeline's model.chat says so, as `duet run` does) or token ids;
        `messages` a list of {"role", "content"} dicts instead. Settings:
        max_tokens, seed, stop, temperature, top_k, top_p, min_p,
        presence_penalty, frequency_penalty, repetition_penalty, ignore_eos,
        min_tokens, sampler ({"LINK": {"OPTION": value}}), response_format,
        grammar, prompt_logprobs. `logits=True` keeps each generated token's
        logits (Generation.logits, a NumPy array [tokens, n_vocab])."""
        request = _request(prompt, messages, **settings)
        return self._p.run(_dumps([request], "request"), logits)[0]

    def generate_batch(self, requests, *, logits=False):
        """Many answers, batched: `requests` is a list of dicts with "prompt"
        or "messages" and any settings generate() takes. Results in order."""
        return self._p.run(_dumps([_request(**dict(r)) for r in requests], "requests"), logits)

    def stream(self, prompt=None, *, messages=None, **settings):
        """A Stream of one answer's text pieces (settings as generate())."""
        request = _request(prompt, messages, **settings)
        return Stream(self._p, self._p.start(_dumps(request, "request")))

    def perplexity(self, text, ctx=0):
        """The perplexity of `text` as `duet perplexity --ctx CTX` scores it:
        its tokens without the chat template, in windows of `ctx` tokens
        whose second halves are scored (0: the whole text at once, every
        token after the first)."""
        return self._p.perplexity(text, ctx)

    def tokenize(self, text, special=False):
        """The token ids of `text` (no BOS, no chat template); `special`
        parses control-token spellings such as "<|im_end|>"."""
        return self._p.tokenize(text, special)

    def detokenize(self, ids):
        """The text of token ids."""
        return self._p.detokenize(list(ids))

    def logits(self, tokens):
        """The logits of the token after `tokens` (ids), a NumPy array of
        n_vocab float32."""
        return self.generate(list(tokens), max_tokens=1, logits=True).logits[0]
