#!/usr/bin/env python3
"""Golden renders of the chat templates in tests/data/tokenizer/chat_templates/.

Renders every <name>.jinja over a set of conversations with Python jinja2, configured the way
Hugging Face transformers does (ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, the loopcontrols extension, raise_exception, strftime_now and HF's tojson),
and writes tests/data/tokenizer/chat_templates/goldens.json: one case per
(template, conversation, add_generation_prompt) with the full render context (keys sorted, as
lmstack::Json holds them; "context_text" cases keep insertion order, for ordered_json) and
either the expected text or, when the template raises, the raise_exception message. The C++ test
(tests/tokenizer/chat_template_test.cc) renders the same contexts and compares byte for byte.

Usage: python3 tools/ref/gen_chat_templates.py   (needs `pip install jinja2`; deterministic)
"""
import json
import os
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer", "chat_templates")


class TemplateRaised(Exception):
    pass


def raise_exception(message):
    raise TemplateRaised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override: no HTML escaping, non-ASCII kept.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


SYSTEM = {"role": "system", "content": "You are a concise assistant."}
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}]
TOOL_CALL = {"type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}

CONVERSATIONS = {
    "system_user": [SYSTEM, {"role": "user", "content": "Hello!"}],
    "user_only": [{"role": "user", "content": "What is 2+2?"}],
    "multi_turn": [SYSTEM,
                   {"role": "user", "content": "Hi there."},
                   {"role": "assistant", "content": "Hello! How can I help?"},
                   {"role": "user", "content": "Tell me a joke."}],
    "multi_turn_no_system": [{"role": "user", "content": "  padded question  \n"},
                             {"role": "assistant", "content": "\n padded answer \t"},
                             {"role": "user", "content": "next"}],
    "unicode": [{"role": "user", "content": "héllo 世界 🤖 \"quoted\" 'single' \\ back\ttab\nnewline"},
                {"role": "assistant", "content": "Ünïcödé ✓ — ok"},
                {"role": "user", "content": "{{ not a template }} {% neither %}"}],
    "bad_alternation": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
}
TOOL_CONVERSATIONS = {
    "tool_call": [SYSTEM,
                  {"role": "user", "content": "Weather in Zürich?"},
                  {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
                  {"role": "tool", "content": "{\"temperature\": 21}"},
                  {"role": "assistant", "content": "It is 21 °C."},
                  {"role": "user", "content": "Thanks"}],
}
THINK_CONVERSATIONS = {
    "thinking": [{"role": "user", "content": "Solve x+1=2."},
                 {"role": "assistant", "content": "<think>\nSubtract 1.\n</think>\n\nx = 1"},
                 {"role": "user", "content": "And x+2=4?"},
                 {"role": "assistant", "content": "<think>\nSubtract 2.\n</think>\n\nx = 2"}],
    "multi_step_tool": [{"role": "user", "content": "Weather?"},
                        {"role": "assistant", "content": "<think>need tool</think>Checking.",
                         "tool_calls": [TOOL_CALL, {"function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}}]},
                        {"role": "tool", "content": "sunny"},
                        {"role": "tool", "content": "12:00"},
                        {"role": "assistant", "content": "Sunny at noon.", "reasoning_content": "\nboth tools answered\n"}],
}

TOKENS = {
    "llama-2-chat": ("<s>", "</s>"),
    "mistral-instruct-v0.1": ("<s>", "</s>"),
    "mistral-instruct-v0.2": ("<s>", "</s>"),
    "tinyllama-chat": ("<s>", "</s>"),
    "llama-3-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.1-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.2-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "chatml": ("<|im_start|>", "<|im_end|>"),
    "smollm2-instruct": ("<|im_start|>", "<|im_end|>"),
    "qwen2-instruct": ("", "<|im_end|>"),
    "qwen2.5-instruct": ("", "<|im_end|>"),
    "qwen3": ("", "<|im_end|>"),
}
TOOL_TEMPLATES = {"llama-3.1-instruct", "llama-3.2-instruct", "qwen2.5-instruct", "qwen3"}


def cases_for(name):
    """(case name, extra context) pairs for one template."""
    convs = dict(CONVERSATIONS)
    if name in TOOL_TEMPLATES:
        convs.update(TOOL_CONVERSATIONS)
    if name == "qwen3":
        convs.update(THINK_CONVERSATIONS)
    out = []
    for conv_name, messages in convs.items():
        for agp in (False, True):
            extra = {}
            if name in TOOL_TEMPLATES and conv_name in ("tool_call", "multi_step_tool"):
                extra["tools"] = TOOLS
            out.append((f"{conv_name}/agp={int(agp)}", messages, agp, extra))
    if name == "qwen3":
        out.append(("thinking/disabled", CONVERSATIONS["user_only"], True, {"enable_thinking": False}))
    if name.startswith("llama-3.") and name != "llama-3-instruct":
        out.append(("tools_in_system", CONVERSATIONS["system_user"], True,
                    {"tools": TOOLS, "tools_in_user_message": False}))
        out.append(("tools_without_user", [SYSTEM], True, {"tools": TOOLS}))
    if name == "llama-3.1-instruct":
        builtin_call = {"function": {"name": "brave_search", "arguments": {"query": "lmstack"}}}
        out.append(("builtin_tools", [{"role": "user", "content": "Search it"},
                                      {"role": "assistant", "tool_calls": [builtin_call]},
                                      {"role": "ipython", "content": {"result": "found"}}], True,
                    {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}))
    return out


def main():
    env = make_env()
    cases = []
    for path in sorted(os.listdir(DATA)):
        if not path.endswith(".jinja"):
            continue
        name = path[:-len(".jinja")]
        with open(os.path.join(DATA, path), encoding="utf-8", newline="") as f:
            template = env.from_string(f.read())
        bos, eos = TOKENS[name]
        for case_name, messages, agp, extra in cases_for(name):
            # transformers passes tools and documents (None when absent) and the special tokens.
            context = {"messages": messages, "tools": None, "documents": None,
                       "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos}
            if name == "llama-3.2-instruct":
                context["date_string"] = "09 Mar 2025"  # strftime_now would make it time-dependent
            context.update(extra)
            if case_name == "tool_call/agp=1":
                # Insertion-ordered variant, for ChatTemplate::render(nlohmann::ordered_json):
                # stored as text because this file is written with sorted keys.
                cases.append({"template": name, "case": "tool_call/ordered",
                              "context_text": json.dumps(context, ensure_ascii=False),
                              "expected": template.render(**context)})
            # lmstack's Json keeps object keys sorted; render the same order here.
            context = json.loads(json.dumps(context, sort_keys=True))
            case = {"template": name, "case": case_name, "context": context}
            try:
                case["expected"] = template.render(**context)
            except TemplateRaised as e:
                case["error"] = "raise_exception: " + str(e)
            cases.append(case)
    out = {"generator": "python3 tools/ref/gen_chat_templates.py",
           "jinja2_version": jinja2.__version__, "cases": cases}
    with open(os.path.join(DATA, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(cases)} cases")


if __name__ == "__main__":
    main()
