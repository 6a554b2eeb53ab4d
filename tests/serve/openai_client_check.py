#!/usr/bin/env python3
"""Checks a live `lmstack serve` with the official `openai` Python client (PyPI: openai).

Run by tests/serve/openai_client_heavytest.cc:  python3 openai_client_check.py --port P
Covers chat and completions, streaming and not, n=2, stop, logprobs, usage, a set of
malformed requests (each must get a 4xx while a parallel stream continues unharmed) and 64
parallel clients. Every wait is bounded. Exits non-zero with a message on the first failure.

Tools and response_format: the server runs with --tool-call-parser hermes. A random-weight
model never calls a tool on its own, so the checks force calls (tool_choice "required" or a
named function): the grammar makes the model write a hermes <tool_call> block, the server's
parser turns it into tool_calls, and the client checks names, arguments against the tool's
JSON schema (with `jsonschema` when installed), streaming deltas against the non-streamed
reply of the same seed, and a round trip of the call and its result. response_format replies
must parse and validate the same way over several seeds.

With --reference-port R (the server under test runs a serving mode such as --spec ngram, --spec
draft or the disaggregated router, R a plain server on the same model) every temperature-0 reply
of a fixed set, streamed and not, plain and constrained, must equal R's token for token; with
--expect-metric NAME the server's /metrics must show NAME > 0 afterwards (e.g. accepted draft
tokens), so the mode was really exercised. With --disaggregated (the router of `serve --role
router`, docs/disaggregation.md) the checks that ask for n=2 ask for n=1, n=2 must be refused
with a 400 naming `n`, and seeded samples and logprobs must equal R's too.
"""
import argparse
import concurrent.futures
import json
import sys
import threading
import urllib.error
import urllib.request

import openai

try:
    import jsonschema
except ImportError:  # the checks below fall back to a few hand-written ones
    jsonschema = None


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


API_KEY = "test-key"
N = 2  # choices where a check asks for several; 1 against a disaggregated stack


def raw_post(base, path, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {API_KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def basic(client, model):
    models = client.models.list()
    check([m.id for m in models.data] == [model], f"models: {models}")
    c = client.completions.create(model=model, prompt="Hello there", max_tokens=8,
                                  temperature=0, logprobs=3)
    ch = c.choices[0]
    check(c.object == "text_completion" and ch.finish_reason in ("length", "stop"), f"{c}")
    check(c.usage.completion_tokens == len(ch.logprobs.tokens) and c.usage.prompt_tokens > 0,
          f"usage vs logprobs: {c.usage} {ch.logprobs}")
    check(all(len(t) <= 3 for t in ch.logprobs.top_logprobs), "top_logprobs has at most 3")
    again = client.completions.create(model=model, prompt="Hello there", max_tokens=8, temperature=0)
    check(again.choices[0].text == ch.text, "greedy completion is deterministic")

    chat = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=6, temperature=0,
        logprobs=True, top_logprobs=2, n=N)
    check(len(chat.choices) == N and chat.choices[0].message.role == "assistant", f"{chat}")
    check(chat.choices[0].message.content == chat.choices[-1].message.content,
          "greedy n=2 choices agree")
    check(len(chat.choices[0].logprobs.content[0].top_logprobs) == 2, "chat top_logprobs")
    check(chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens, "usage")

    seeded = [client.completions.create(model=model, prompt="Seed", max_tokens=10, seed=7,
                                        temperature=1.0, n=N) for _ in range(2)]
    check([c.text for c in seeded[0].choices] == [c.text for c in seeded[1].choices],
          "same seed, same sampled choices")

    full = client.completions.create(model=model, prompt="Stop test", max_tokens=12, temperature=0)
    text = full.choices[0].text
    if len(text) >= 4:
        stop = text[2:4]
        s = client.completions.create(model=model, prompt="Stop test", max_tokens=12,
                                      temperature=0, stop=[stop])
        check(s.choices[0].text == text[:text.find(stop)] and s.choices[0].finish_reason == "stop",
              f"stop {stop!r}: {s.choices[0].text!r} vs {text!r}")


def streaming(client, model):
    pieces, roles, finish, usage = [], 0, None, None
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Tell me"}], max_tokens=10,
        temperature=0, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
            check(chunk.choices == [], "the usage chunk has no choices")
            continue
        d = chunk.choices[0].delta
        roles += d.role == "assistant"
        pieces.append(d.content or "")
        finish = chunk.choices[0].finish_reason or finish
    check(roles == 1 and finish in ("length", "stop") and usage is not None, "stream shape")
    whole = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Tell me"}], max_tokens=10, temperature=0)
    check("".join(pieces) == whole.choices[0].message.content, "stream == non-stream text")
    check(usage.completion_tokens == whole.usage.completion_tokens, "stream usage")
    text = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt="Stream", max_tokens=6, temperature=0, stream=True) if c.choices)
    check(text == client.completions.create(model=model, prompt="Stream", max_tokens=6,
                                            temperature=0).choices[0].text, "completion stream")


def malformed(base, client, model):
    """Each bad request gets a 4xx naming the field while a long stream keeps going."""
    result = {}

    def long_stream():
        for chunk in client.completions.create(model=model, prompt="Long", max_tokens=200,
                                               temperature=0, stream=True,
                                               stream_options={"include_usage": True},
                                               extra_body={"ignore_eos": True}):
            if chunk.usage:
                result["tokens"] = chunk.usage.completion_tokens

    t = threading.Thread(target=long_stream)
    t.start()
    cases = [
        (b"{not json", 400, None),
        ({"model": "nope", "prompt": "x"}, 404, "model"),
        ({"model": model, "prompt": "x", "max_tokens": -1}, 400, "max_tokens"),
        ({"model": model, "prompt": "x", "max_tokens": "ten"}, 400, "max_tokens"),
        ({"model": model, "prompt": "x", "temperature": "hot"}, 400, "temperature"),
        ({"model": model, "prompt": "x", "top_p": 7}, 400, "top_p"),
        ({"model": model, "prompt": "x", "n": 0}, 400, "n"),
        ({"model": model, "prompt": "x", "stop": 5}, 400, "stop"),
        ({"model": model, "prompt": "word " * 100000}, 400, "prompt"),
        ({"model": model, "prompt": [10**9]}, 400, "prompt"),
        ({"model": model}, 400, "prompt"),
    ]
    for body, status, param in cases:
        code, err = raw_post(base, "/v1/completions", body)
        check(code == status and "error" in err, f"{body!r:.60}: got {code} {err}")
        if param:
            check(err["error"]["param"] == param, f"param of {body!r:.60}: {err}")
    code, err = raw_post(base, "/v1/chat/completions", {"model": model, "messages": "hi"})
    check(code == 400 and err["error"]["param"] == "messages", f"messages: {err}")
    t.join(timeout=300)
    check(result.get("tokens", 0) == 200, f"the parallel stream was harmed: {result}")


def error_shapes(client, model):
    """Refused requests raise the client's exception type for their status, with the field
    at fault as `param` (OpenAI's error object: message, type, param, code)."""
    big = "x" * (17 << 20)  # over the default 16 MiB body limit
    cases = [
        (openai.BadRequestError, "messages[0].role", lambda: client.chat.completions.create(
            model=model, messages=[{"role": "wizard", "content": "x"}])),
        (openai.BadRequestError, "stop",
         lambda: client.completions.create(model=model, prompt="x", stop="")),
        (openai.BadRequestError, "logit_bias",
         lambda: client.completions.create(model=model, prompt="x", logit_bias={"1": 5})),
        (openai.BadRequestError, "logit_bias", lambda: client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "x"}], logit_bias={"1": 5})),
        (openai.BadRequestError, "echo",
         lambda: client.completions.create(model=model, prompt="x", echo=True)),
        (openai.BadRequestError, "suffix",
         lambda: client.completions.create(model=model, prompt="x", suffix="end")),
        (openai.BadRequestError, "best_of",
         lambda: client.completions.create(model=model, prompt="x", best_of=3)),
        (openai.BadRequestError, "temperature",
         lambda: client.completions.create(model=model, prompt="x", temperature=-1)),
        (openai.NotFoundError, "model",
         lambda: client.completions.create(model="nope", prompt="x")),
        (openai.NotFoundError, "model", lambda: client.models.retrieve("nope")),
        (openai.NotFoundError, None, lambda: client.get("/nope", cast_to=object)),
        (openai.APIStatusError, None, lambda: client.get("/completions", cast_to=object)),
        (openai.APIStatusError, None,
         lambda: client.completions.create(model=model, prompt=big, max_tokens=1)),
    ]
    statuses = {openai.BadRequestError: 400, openai.NotFoundError: 404}
    for i, (kind, param, call) in enumerate(cases):
        try:
            call()
            check(False, f"case {i} was not refused")
        except openai.APIStatusError as e:
            check(type(e) is kind, f"case {i}: {type(e).__name__}, expected {kind.__name__}: {e}")
            want = statuses.get(kind, 405 if i == len(cases) - 2 else 413)
            check(e.status_code == want, f"case {i}: status {e.status_code}, expected {want}")
            check(e.param == param, f"case {i}: param {e.param!r}, expected {param!r}")
            check(isinstance(e.body, dict) and e.body.get("message") and e.body.get("type"),
                  f"case {i}: error body {e.body!r}")
    check(client.models.retrieve(model).id == model, "models.retrieve")


def parallel(client, model, count=64):
    def one(i):
        r = client.completions.create(model=model, prompt=f"Client {i} says", max_tokens=8,
                                      temperature=0)
        return r.usage.completion_tokens

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        done = list(pool.map(one, range(count), timeout=600))
    check(len(done) == count and all(n >= 1 for n in done), f"parallel: {done}")


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 8},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}},
        "required": ["city", "unit"]}}}
NOOP = {"type": "function", "function": {"name": "noop", "parameters": {"type": "object",
                                                                     "properties": {}}}}


def validate(value, schema, what):
    if jsonschema is not None:
        try:
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError as e:
            check(False, f"{what}: {value!r} does not validate: {e.message}")
    elif schema.get("type") == "object":
        check(isinstance(value, dict) and all(k in value for k in schema.get("required", [])),
              f"{what}: {value!r}")


def tools(client, model):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    for seed in range(6):
        choice = ("required" if seed % 2 else
                  {"type": "function", "function": {"name": "get_weather"}})
        r = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER, NOOP],
                                           tool_choice=choice, seed=seed, temperature=1.0,
                                           max_tokens=200)
        ch = r.choices[0]
        check(ch.finish_reason == "tool_calls" and ch.message.content is None, f"forced: {r}")
        check(len(ch.message.tool_calls) == 1, f"one call: {ch.message}")
        call = ch.message.tool_calls[0]
        check(call.type == "function" and call.id.startswith("call_"), f"call: {call}")
        if seed % 2 == 0:
            check(call.function.name == "get_weather", f"named tool_choice: {call}")
        schema = WEATHER if call.function.name == "get_weather" else NOOP
        args = json.loads(call.function.arguments)
        validate(args, schema["function"]["parameters"], "tool arguments")
        if call.function.name == "get_weather":
            check(list(args)[:2] == ["city", "unit"], f"schema key order: {args}")

        # The same seed streamed: deltas reassemble to the same call; nothing leaks as content.
        stream = client.chat.completions.create(model=model, messages=messages,
                                                tools=[WEATHER, NOOP], tool_choice=choice,
                                                seed=seed, temperature=1.0, max_tokens=200,
                                                stream=True)
        content, calls, finish = "", {}, None
        for chunk in stream:
            for c in chunk.choices:
                content += c.delta.content or ""
                for tc in c.delta.tool_calls or []:
                    entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    entry["id"] += tc.id or ""
                    entry["name"] += tc.function.name or ""
                    entry["arguments"] += tc.function.arguments or ""
                finish = c.finish_reason or finish
        check(content == "" and finish == "tool_calls", f"stream: {content!r} {finish}")
        check(list(calls) == [0] and calls[0]["name"] == call.function.name and
              calls[0]["arguments"] == call.function.arguments, f"stream {calls} vs {call}")

    # The call and its result go back in the next request (arguments as a JSON string; content
    # "" since the tiny model's ChatML template concatenates it).
    back = {"role": "assistant", "content": "",
            "tool_calls": [tc.model_dump() for tc in ch.message.tool_calls]}
    follow = client.chat.completions.create(
        model=model, max_tokens=4, temperature=0, tools=[WEATHER],
        messages=messages + [back, {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])
    check(follow.choices[0].message.role == "assistant", f"follow-up: {follow}")
    # "none" and "auto": a random model writes text; nothing is forced.
    for choice in ("none", "auto"):
        r = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER],
                                           tool_choice=choice, max_tokens=8, temperature=0)
        check(r.choices[0].finish_reason in ("stop", "length"), f"tool_choice {choice}: {r}")
        if choice == "none":
            check(not r.choices[0].message.tool_calls, f"tool_choice none: {r}")


def response_format(client, model):
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3},
        "ok": {"type": "boolean"}}, "required": ["name", "ok"]}
    for seed in range(8):
        r = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "JSON please"}], seed=seed,
            temperature=1.0, max_tokens=200,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": schema}})
        ch = r.choices[0]
        check(ch.finish_reason == "stop", f"json_schema reply not ended by EOS: {r}")
        validate(json.loads(ch.message.content), schema, "json_schema reply")
        r = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "JSON please"}], seed=seed,
            temperature=1.0, max_tokens=200, response_format={"type": "json_object"})
        ch = r.choices[0]
        if ch.finish_reason == "stop":
            check(isinstance(json.loads(ch.message.content), dict), f"json_object: {r}")
    bad = [({"type": "json_schema", "json_schema": {"name": "x", "schema": {
                "type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}}},
            "response_format.json_schema.schema.properties.a.pattern"),
           ({"type": "yaml"}, "response_format")]
    for fmt, param in bad:
        try:
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}],
                                           max_tokens=4, response_format=fmt)
            check(False, f"accepted response_format {fmt}")
        except openai.BadRequestError as e:
            check(e.body.get("param") == param, f"param of {fmt}: {e.body}")
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}],
                                       max_tokens=4, temperature=0)
    check(r.choices[0].finish_reason in ("stop", "length"), "serving after bad response_format")


def greedy_replies(client, model):
    """A fixed set of temperature-0 replies: text, finish reason and token counts of each."""
    out = []
    prompts = ["The cat sat on the mat. The cat sat on the", "one two three one two three one",
               "Hello there", "a b a b a b a b"]
    for p in prompts:
        c = client.completions.create(model=model, prompt=p, max_tokens=40, temperature=0)
        out.append(("completion", p, c.choices[0].text, c.choices[0].finish_reason,
                    c.usage.completion_tokens))
        text = "".join(x.choices[0].text for x in client.completions.create(
            model=model, prompt=p, max_tokens=40, temperature=0, stream=True) if x.choices)
        out.append(("completion stream", p, text))
        c = client.completions.create(model=model, prompt=p, max_tokens=8, temperature=0,
                                      logprobs=2)
        out.append(("completion logprobs", p, c.choices[0].text,
                    [round(x, 4) for x in c.choices[0].logprobs.token_logprobs]))
    messages = [{"role": "user", "content": "Repeat: x y z x y z x y z"}]
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=40, temperature=0)
    out.append(("chat", r.choices[0].message.content, r.choices[0].finish_reason))
    text = "".join(x.choices[0].delta.content or "" for x in client.chat.completions.create(
        model=model, messages=messages, max_tokens=40, temperature=0, stream=True) if x.choices)
    out.append(("chat stream", text))
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=200,
                                       temperature=0, tools=[WEATHER], tool_choice="required")
    call = r.choices[0].message.tool_calls[0].function
    out.append(("tool call", call.name, call.arguments))
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=200,
                                       temperature=0, response_format={"type": "json_object"})
    out.append(("json_object", r.choices[0].message.content))
    return out


def same_as_reference(client, ref_client, model, expect_metric, base):
    # Concurrently too: the mode batches several sequences per step.
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        jobs = [pool.submit(greedy_replies, client, model) for _ in range(3)]
        got = [j.result(timeout=600) for j in jobs]
    want = greedy_replies(ref_client, model)
    for g in got:
        for a, b in zip(g, want):
            check(a == b, f"differs from the plain server:\n  got  {a!r}\n  want {b!r}")
        check(len(g) == len(want), "reply count")
    if expect_metric:
        req = urllib.request.Request(base + "/metrics",
                                     headers={"Authorization": f"Bearer {API_KEY}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            lines = r.read().decode().splitlines()
        values = [float(l.split()[-1]) for l in lines if l.split(" ")[0] == expect_metric]
        check(values and values[0] > 0, f"{expect_metric} is not > 0 in /metrics: {values}")


def disaggregated(client, ref, model):
    """--disaggregated: n > 1 is refused; seeded samples and logprobs equal the plain server's."""
    try:
        client.completions.create(model=model, prompt="x", max_tokens=2, n=2)
        check(False, "n=2 was accepted by the disaggregated stack")
    except openai.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        check(body.get("param", body.get("error", {}).get("param")) == "n",
              f"n=2 refusal names n: {e.body}")
    for p in ["Hello there", "The quick brown fox jumps over", "a" * 200]:
        for kw in (dict(temperature=0.8, seed=11), dict(temperature=0, logprobs=2)):
            a = client.completions.create(model=model, prompt=p, max_tokens=12, **kw)
            b = ref.completions.create(model=model, prompt=p, max_tokens=12, **kw)
            check(a.choices[0].text == b.choices[0].text, f"{kw} {p[:20]!r}: "
                  f"{a.choices[0].text!r} vs plain {b.choices[0].text!r}")
            check(a.usage == b.usage, f"usage {a.usage} vs {b.usage}")
            if "logprobs" in kw:
                check(a.choices[0].logprobs.top_logprobs == b.choices[0].logprobs.top_logprobs,
                      f"top logprobs of {p[:20]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--api-key", default="test-key")
    ap.add_argument("--reference-port", type=int, help="a plain server on the same model")
    ap.add_argument("--expect-metric", help="a /metrics counter that must be > 0 at the end")
    ap.add_argument("--disaggregated", action="store_true",
                    help="--port is a disaggregated router: n=1 only (see the docstring)")
    args = ap.parse_args()
    global API_KEY, N
    API_KEY = args.api_key
    N = 1 if args.disaggregated else 2
    base = f"http://127.0.0.1:{args.port}"
    client = openai.OpenAI(base_url=base + "/v1", api_key=args.api_key, timeout=120, max_retries=0)
    model = client.models.list().data[0].id
    try:
        openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
        check(False, "a wrong API key was accepted")
    except openai.AuthenticationError:
        pass
    basic(client, model)
    streaming(client, model)
    malformed(base, client, model)
    error_shapes(client, model)
    tools(client, model)
    response_format(client, model)
    parallel(client, model)
    if args.reference_port:
        ref = openai.OpenAI(base_url=f"http://127.0.0.1:{args.reference_port}/v1",
                            api_key=args.api_key, timeout=120, max_retries=0)
        same_as_reference(client, ref, model, args.expect_metric, base)
        if args.disaggregated:
            disaggregated(client, ref, model)
    print("openai client checks passed")


if __name__ == "__main__":
    main()
