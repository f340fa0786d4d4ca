#!/usr/bin/env python3
"""A client of serve in another language: python3, standard library only.

Streams one chat completion (or, with --completions, one text completion)
from an OpenAI-compatible server over Server-Sent Events and prints the
answer's text to standard output, exactly as received (no newline added).
On standard error it prints one line: the finish reason and, when the server
sent one, the usage block as JSON. Any protocol error exits with status 1
and a one-line message.

    serve_client.py URL MODEL PROMPT [--max-tokens N] [--completions]

URL is the server's base, e.g. http://127.0.0.1:8080 (the client adds /v1/...).
"""

import argparse
import json
import sys
import urllib.error
import urllib.request


def events(resp):
    """Yields the data field of each SSE event of resp (a byte stream)."""
    data = []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):  # a comment (keep-alive)
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
    if data:
        yield "\n".join(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("prompt")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--completions", action="store_true")
    a = ap.parse_args()

    body = {
        "model": a.model,
        "max_tokens": a.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if a.completions:
        path = "/v1/completions"
        body["prompt"] = a.prompt
    else:
        path = "/v1/chat/completions"
        body["messages"] = [{"role": "user", "content": a.prompt}]
    req = urllib.request.Request(
        a.url.rstrip("/") + path,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        method="POST",
    )
    try:
        resp = urllib.request.urlopen(req, timeout=60)
    except urllib.error.HTTPError as e:
        sys.exit("serve_client: HTTP %d: %s" % (e.code, e.read().decode("utf-8", "replace").strip()))
    ctype = resp.headers.get("Content-Type", "")
    if not ctype.startswith("text/event-stream"):
        sys.exit("serve_client: Content-Type %r, want text/event-stream" % ctype)

    text, finish, usage, done, ident = [], None, None, False, None
    for data in events(resp):
        if done:
            sys.exit("serve_client: an event after [DONE]: %r" % data)
        if data == "[DONE]":
            done = True
            continue
        chunk = json.loads(data)
        if "error" in chunk:
            sys.exit("serve_client: error event: %s" % json.dumps(chunk["error"]))
        if ident is None:
            ident = chunk.get("id")
        elif chunk.get("id") != ident:
            sys.exit("serve_client: chunk id %r, the stream's is %r" % (chunk.get("id"), ident))
        if chunk.get("usage"):
            usage = chunk["usage"]
        for c in chunk.get("choices") or []:
            if a.completions:
                text.append(c.get("text") or "")
            else:
                text.append((c.get("delta") or {}).get("content") or "")
            if c.get("finish_reason"):
                finish = c["finish_reason"]
    if not done:
        sys.exit("serve_client: the stream ended without [DONE]")
    if finish is None:
        sys.exit("serve_client: no finish_reason in the stream")
    sys.stdout.write("".join(text))
    sys.stdout.flush()
    sys.stderr.write("finish_reason=%s usage=%s\n" % (finish, json.dumps(usage, sort_keys=True)))


if __name__ == "__main__":
    main()
