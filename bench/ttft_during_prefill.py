"""Time to first token of a short request that arrives while the server is
prefilling a long prompt: how long a long prompt holds others back.

usage: ttft_during_prefill.py URL [--long-tokens 3000] [--delays 0.1,0.3,0.5,0.7,0.9]
                                  [--short-tokens 8] [--label NAME]

For each delay D: one streamed POST /v1/completions with a prompt of
--long-tokens token ids (max_tokens 1) starts; D seconds later a short
streamed chat request (about 30 prompt tokens, greedy, --short-tokens
tokens) follows. Measured from the moment each request is sent: the short
request's time to its first text chunk, and the long request's time to its
end. Prints one JSON object with every sample and the short request's
median and maximum time to first token. Different delays land the short
request in different phases of the long prompt's forward passes.

Python standard library only; the server must be on this machine (no TLS).
"""

import argparse
import json
import socket
import statistics
import sys
import threading
import time
import urllib.parse


def stream(url, path, body, key, first_chunk):
    """Sends `body`, reads the event stream; returns (seconds to the first
    text chunk, seconds to [DONE]) from the moment it was sent."""
    u = urllib.parse.urlsplit(url)
    sock = socket.create_connection((u.hostname, u.port or 80), timeout=600)
    data = json.dumps(body).encode()
    head = ("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n" % (path, u.hostname, len(data)))
    if key:
        head += "Authorization: Bearer %s\r\n" % key
    start = time.monotonic()
    sock.sendall((head + "\r\n").encode() + data)
    first = None
    with sock, sock.makefile("rb") as f:
        status = f.readline()
        if not status.startswith(b"HTTP/1.1 200"):
            raise SystemExit("%s: %s" % (path, status.decode(errors="replace").strip()))
        for line in f:
            if not line.startswith(b"data: "):
                continue
            payload = line[6:].strip()
            if payload == b"[DONE]":
                return first, time.monotonic() - start
            if first is None and first_chunk(json.loads(payload)):
                first = time.monotonic() - start
    raise SystemExit("%s: the stream ended without [DONE]" % path)


def has_text(chunk):
    for c in chunk.get("choices", []):
        if c.get("text") or (c.get("delta") or {}).get("content"):
            return True
    return False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("--long-tokens", type=int, default=3000)
    p.add_argument("--delays", default="0.1,0.3,0.5,0.7,0.9")
    p.add_argument("--short-tokens", type=int, default=8)
    p.add_argument("--key", default="")
    p.add_argument("--label", default="")
    a = p.parse_args()
    # Token ids of ordinary text (SmolLM2's 300..9000 are word pieces), so
    # the prompt is as costly as text and shares no prefix across samples.
    samples = []
    for i, delay in enumerate(float(d) for d in a.delays.split(",")):
        long_prompt = [300 + (i * 7919 + j * 104729) % 8700 for j in range(a.long_tokens)]
        result = {}

        def run_long():
            result["long"] = stream(a.url, "/v1/completions",
                                    {"prompt": long_prompt, "max_tokens": 1, "stream": True,
                                     "temperature": 0}, a.key, has_text)

        t = threading.Thread(target=run_long)
        t.start()
        time.sleep(delay)
        ttft, _ = stream(a.url, "/v1/chat/completions",
                         {"messages": [{"role": "user",
                                        "content": "Name a colour. (sample %d)" % i}],
                          "max_tokens": a.short_tokens, "stream": True, "temperature": 0},
                         a.key, has_text)
        t.join()
        samples.append({"delay_s": delay, "short_ttft_s": round(ttft, 3),
                        "long_total_s": round(result["long"][1], 3)})
    ttfts = [s["short_ttft_s"] for s in samples]
    print(json.dumps({"label": a.label, "long_tokens": a.long_tokens,
                      "short_ttft_median_s": statistics.median(ttfts),
                      "short_ttft_max_s": max(ttfts),
                      "long_total_median_s": statistics.median(s["long_total_s"] for s in samples),
                      "samples": samples}))


if __name__ == "__main__":
    sys.exit(main())
