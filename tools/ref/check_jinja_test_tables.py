#!/usr/bin/env python3
"""Checks the expected strings of tests/tokenizer/jinja_test.cc against Python jinja2.

Extracts every {template, context, expected} row of the run_cases({...}) tables, renders the
template with the Hugging Face environment of gen_chat_templates.py (context keys sorted, as
lmstack's Json keeps them) and prints each row where Python disagrees with the C++ table.
Usage: python3 tools/ref/check_jinja_test_tables.py   (needs jinja2; exit status 1 on mismatch)
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_chat_templates import make_env  # noqa: E402

TEST_FILE = os.path.join(HERE, "..", "..", "tests", "tokenizer", "jinja_test.cc")
# A raw string R"(...)", a C string "...", an identifier, or punctuation.
TOKEN = re.compile(r'R"\((.*?)\)"|"((?:[^"\\]|\\.)*)"|(\w+)|([{},;()])', re.S)
SIMPLE_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", '"': b'"', "'": b"'"}


def c_unescape(body):
    """The bytes of a C string literal body, decoded as UTF-8."""
    out = bytearray()
    i = 0
    while i < len(body):
        if body[i] != "\\":
            out += body[i].encode()
            i += 1
        elif body[i + 1] == "x":
            digits = re.match(r"[0-9a-fA-F]+", body[i + 2:]).group(0)
            out.append(int(digits, 16))
            i += 2 + len(digits)
        else:
            out += SIMPLE_ESCAPES[body[i + 1]]
            i += 2
    return out.decode("utf-8")


def table_rows(test_body):
    """(template, context, expected) triples of the run_cases tables in one TEST."""
    constants = dict(re.findall(r'const char\* (\w+) =\s*R"\((.*?)\)";', test_body, re.S))
    for table in re.finditer(r"run_cases\(\{(.*?)\}\);", test_body, re.S):
        strings, previous_was_string = [], False
        for m in TOKEN.finditer(table.group(1)):
            raw, cstr, word, _ = m.groups()
            value = raw if raw is not None else c_unescape(cstr) if cstr is not None else \
                constants.get(word) if word else None
            if value is None:
                previous_was_string = False
                continue
            if previous_was_string and cstr is not None:  # adjacent literals concatenate
                strings[-1] += value
            else:
                strings.append(value)
            previous_was_string = True
        for i in range(0, len(strings), 3):
            yield strings[i:i + 3]


def main():
    env = make_env()
    with open(TEST_FILE, encoding="utf-8") as f:
        source = f.read()
    rows = mismatches = 0
    for test_body in re.split(r"\nTEST\(", source):
        for template, context, expected in table_rows(test_body):
            rows += 1
            try:
                ctx = json.loads(json.dumps(json.loads(context), sort_keys=True))
                got = env.from_string(template).render(**ctx)
            except Exception as e:  # noqa: BLE001 - report any failure as a mismatch
                got = f"EXCEPTION {e!r}"
            if got != expected:
                mismatches += 1
                print(f"MISMATCH {template!r}\n  jinja2: {got!r}\n  table:  {expected!r}")
    print(f"{rows} rows, {mismatches} mismatches")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
