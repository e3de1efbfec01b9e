"""Concurrent streaming clients against an OpenAI-compatible server.

usage: serve_bench.py URL [--clients 16] [--waves 3] [--warmup 1] [--max-tokens 64]
                          [--label NAME] [--ban-token ID ...] [--bias-pairs]

Each wave sends --clients streamed POST /v1/completions requests at once
(distinct prompts of about 32 tokens, greedy: temperature 0), each asking
for exactly --max-tokens tokens: the end-of-generation tokens given with
--ban-token get logit_bias -100 and "stop" is empty, so every answer must
end with finish_reason "length" (anything else is an error: the two engines
compared must do the same work). logit_bias is OpenAI's object {"ID": -100};
--bias-pairs sends it as a list of [ID, -100] pairs instead, the only form
llama.cpp's llama-server took before 2025-03. Prints one JSON object:

  aggregate_tokens_per_second  all tokens of a wave / its makespan (first
                               request sent to last answer done), median
                               over the timed waves
  steady_tokens_per_second     text chunks received while every request of
                               the wave was streaming (after the last first
                               token, before the first end) / that span,
                               median; null when no such span exists (a
                               server that answers one request at a time)
  ttft_p50_s, ttft_p99_s       time to the first text chunk, nearest rank
                               over every request of the timed waves
  waves                        each timed wave's figures

Python standard library only; the server must be on this machine or one
the caller trusts (no TLS).
"""

import argparse
import json
import math
import socket
import statistics
import sys
import threading
import time
import urllib.parse

WORDS = ("river stone lantern orchard meadow harbor violin copper maple falcon "
         "glacier thunder velvet canyon ember willow").split()


def prompt(i):
    """A distinct prompt of about 32 tokens (its first words differ by `i`)."""
    lead = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(4))
    return ("Request %d, %s. Write a short story about a traveller who crosses the mountains "
            "in winter and finds a village where nobody has seen the sea." % (i, lead))


def stream_one(url, body, timeout):
    """(time to first text chunk, [chunk arrival times], finish_reason, error)."""
    u = urllib.parse.urlsplit(url)
    data = json.dumps(body).encode()
    start = time.monotonic()
    sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
    try:
        sock.sendall(("POST %s/v1/completions HTTP/1.1\r\nHost: %s\r\n"
                      "Content-Type: application/json\r\nAuthorization: Bearer bench\r\n"
                      "Connection: close\r\nContent-Length: %d\r\n\r\n"
                      % (u.path.rstrip("/"), u.netloc, len(data))).encode() + data)
        f = sock.makefile("rb")
        status = f.readline()
        if b" 200 " not in status:
            return None, [], None, "status %s: %s" % (status.strip(), f.read(400))
        first, arrivals, finish = None, [], None
        for line in f:
            if not line.startswith(b"data: "):
                continue
            payload = line[len(b"data: "):].strip()
            if payload == b"[DONE]":
                break
            chunk = json.loads(payload)
            for choice in chunk.get("choices", []):
                if choice.get("text"):
                    now = time.monotonic()
                    arrivals.append(now)
                    if first is None:
                        first = now - start
                finish = choice.get("finish_reason") or finish
        return first, arrivals, finish, None
    finally:
        sock.close()


def wave(url, clients, first_index, max_tokens, logit_bias, timeout):
    results = [None] * clients
    barrier = threading.Barrier(clients)

    def client(k):
        body = {"prompt": prompt(first_index + k), "max_tokens": max_tokens, "stream": True,
                "temperature": 0, "stop": [],
                "logit_bias": logit_bias}
        barrier.wait()
        sent = time.monotonic()
        try:
            results[k] = (sent,) + stream_one(url, body, timeout) + (time.monotonic(),)
        except (OSError, ValueError) as e:
            results[k] = (sent, None, [], None, repr(e), time.monotonic())

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (_, first, arrivals, finish, error, _) in enumerate(results):
        if error or first is None:
            raise SystemExit("serve_bench: request %d failed: %s" % (first_index + k, error or "no text"))
        if finish != "length":
            raise SystemExit("serve_bench: request %d ended with finish_reason %r, not 'length' "
                             "(ban its end token with --ban-token)" % (first_index + k, finish))
    start = min(r[0] for r in results)
    end = max(r[5] for r in results)
    all_streaming_from = max(r[2][0] for r in results)
    all_streaming_until = min(r[2][-1] for r in results)
    steady = None
    if all_streaming_until > all_streaming_from:
        chunks = sum(1 for r in results for t in r[2] if all_streaming_from < t <= all_streaming_until)
        steady = chunks / (all_streaming_until - all_streaming_from)
    return {"makespan_s": end - start,
            "aggregate_tokens_per_second": clients * max_tokens / (end - start),
            "steady_tokens_per_second": steady,
            "ttft_s": [r[1] for r in results],
            "chunks": sum(len(r[2]) for r in results)}


def nearest_rank(values, q):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url", help="the server, e.g. http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--waves", type=int, default=3, help="timed waves")
    ap.add_argument("--warmup", type=int, default=1, help="untimed waves first")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--label", default="")
    ap.add_argument("--ban-token", type=int, action="append", default=[],
                    help="a token id given logit_bias -100 (the model's end tokens)")
    ap.add_argument("--bias-pairs", action="store_true",
                    help="send logit_bias as [[ID, -100], ...] (older llama-server builds)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--first-index", type=int, default=0,
                    help="prompt index of the first request (distinct prompts across runs)")
    a = ap.parse_args()
    if a.clients < 1 or a.waves < 1 or a.warmup < 0 or a.max_tokens < 1:
        ap.error("--clients, --waves and --max-tokens must be >= 1, --warmup >= 0")
    index = a.first_index
    bias = ([[t, -100] for t in a.ban_token] if a.bias_pairs
            else {str(t): -100 for t in a.ban_token})
    for _ in range(a.warmup):
        wave(a.url, a.clients, index, a.max_tokens, bias, a.timeout)
        index += a.clients
    waves = []
    for _ in range(a.waves):
        waves.append(wave(a.url, a.clients, index, a.max_tokens, bias, a.timeout))
        index += a.clients
    ttft = [t for w in waves for t in w["ttft_s"]]
    steady = [w["steady_tokens_per_second"] for w in waves]
    json.dump({"label": a.label, "url": a.url, "clients": a.clients, "max_tokens": a.max_tokens,
               "aggregate_tokens_per_second": statistics.median(
                   w["aggregate_tokens_per_second"] for w in waves),
               "steady_tokens_per_second": (statistics.median(steady)
                                            if all(s is not None for s in steady) else None),
               "ttft_p50_s": nearest_rank(ttft, 0.50), "ttft_p99_s": nearest_rank(ttft, 0.99),
               "waves": waves}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
