#!/usr/bin/env python3
"""Chat-template file layouts and what transformers' apply_chat_template renders for each.

Writes tests/data/tokenizer/chat_layouts/<layout>/ (a small byte-level tokenizer.json plus the
template files of that layout) and tests/data/tokenizer/chat_layouts/goldens.json: per layout
and conversation (messages, tools or null, add_generation_prompt), the text
AutoTokenizer.from_pretrained(dir).apply_chat_template(..., tokenize=False) returns, or the
error it raises. Conversations keep insertion order (tool schemas and tool-call arguments are
deliberately not in sorted key order), so the C++ test, which reads them as ordered_json, checks
that `tojson` keeps the client's key order.

Layouts (the rules of PreTrainedTokenizerBase.from_pretrained / get_chat_template):
  config_string         tokenizer_config.json "chat_template": a string
  jinja_over_config     chat_template.jinja beside a different tokenizer_config template: the file wins
  config_named          tokenizer_config "chat_template": [{name: default}, {name: tool_use}]
  jinja_and_additional  chat_template.jinja + additional_chat_templates/tool_use.jinja (+ a config
                        template they replace)
  additional_no_default additional_chat_templates/tool_use.jinja only: no tools -> error
  processor_json        chat_template.json only (a processor's legacy file): AutoTokenizer has no
                        template; lmstack falls back to it, rendered here with chat_template=

Pinned: transformers 5.24.0, tokenizers 0.23.3, jinja2 3.1.6 (tests/data/MANIFEST).
Usage: /work/venv-ref/bin/python tools/ref/gen_chat_template_layouts.py   (deterministic)
"""
import json
import os
import shutil

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = os.path.join(ROOT, "tests", "data", "tokenizer", "chat_templates")
OUT = os.path.join(ROOT, "tests", "data", "tokenizer", "chat_layouts")


def template(name):
    with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
        return f.read()


CHATML = template("chatml")
QWEN25 = template("qwen2.5-instruct")  # renders tools and tool-call arguments with tojson
LLAMA3 = template("llama-3-instruct")

# Key order is not sorted anywhere below on purpose.
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "city": {"type": "string", "description": "City name"},
                "days": {"type": "integer"},
            },
            "required": ["city"],
        },
    },
}]
PLAIN = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi there"},
]
TOOL_TURN = [
    {"role": "user", "content": "Weather in Paris for 3 days?"},
    {"role": "assistant", "content": "", "tool_calls": [{
        "type": "function",
        "function": {"name": "get_weather",
                     "arguments": {"unit": "celsius", "city": "Paris", "days": 3}},
    }]},
    {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
]
CONVERSATIONS = [
    ("plain", PLAIN, None, True),
    ("plain_no_prompt", PLAIN, None, False),
    ("tools", TOOL_TURN, TOOLS, True),
]

LAYOUTS = {
    "config_string": {"config": CHATML},
    "jinja_over_config": {"config": LLAMA3, "chat_template.jinja": CHATML},
    "config_named": {"config": [{"name": "default", "template": CHATML},
                                {"name": "tool_use", "template": QWEN25}]},
    "jinja_and_additional": {"config": LLAMA3, "chat_template.jinja": CHATML,
                             "additional_chat_templates/tool_use.jinja": QWEN25},
    "additional_no_default": {"config": CHATML,
                              "additional_chat_templates/tool_use.jinja": QWEN25},
    "processor_json": {"chat_template.json": {"chat_template": CHATML}},
}


def tiny_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False)
    text = [json.dumps(c) for _, c, _, _ in CONVERSATIONS] + [CHATML, QWEN25]
    tok.train_from_iterator(text, trainer)
    return tok


def write_layout(name, files, tok):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    tok.save(os.path.join(d, "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>",
              "eos_token": "<|im_end|>", "add_bos_token": False}
    if "config" in files:
        config["chat_template"] = files["config"]
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
    for rel, content in files.items():
        if rel == "config":
            continue
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content if isinstance(content, str) else json.dumps(content, indent=2))
    return d


def render(hf, messages, tools, gen, chat_template=None):
    try:
        return {"text": hf.apply_chat_template(messages, tools=tools, tokenize=False,
                                               add_generation_prompt=gen,
                                               chat_template=chat_template)}
    except Exception as e:  # noqa: BLE001 - the error is the golden
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    tok = tiny_tokenizer()
    cases = []
    for name, files in LAYOUTS.items():
        d = write_layout(name, files, tok)
        hf = AutoTokenizer.from_pretrained(d)
        fallback = None
        if name == "processor_json":
            assert hf.chat_template is None  # AutoTokenizer ignores chat_template.json
            fallback = CHATML
        for conv, messages, tools, gen in CONVERSATIONS:
            case = {"layout": name, "conversation": conv, "messages": messages, "tools": tools,
                    "add_generation_prompt": gen}
            case.update(render(hf, messages, tools, gen, fallback))
            cases.append(case)
    with open(os.path.join(OUT, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
