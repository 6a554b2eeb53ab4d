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

src = open(os.path.join(HERE, '..', '..', 'tests', 'tokenizer', 'jinja_test.cc'), encoding='utf-8').read()
# tokenize C string literals
def c_unescape(body):
    out = bytearray(); i = 0
    while i < len(body):
        c = body[i]
        if c == '\\':
            n = body[i+1]
            if n == 'x':
                m = re.match(r'[0-9a-fA-F]+', body[i+2:]); out.append(int(m.group(0),16)); i += 2+len(m.group(0)); continue
            out += {'n':b'\n','t':b'\t','\\':b'\\','"':b'"',"'":b"'",'r':b'\r'}[n]; i += 2; continue
        out += c.encode(); i += 1
    return out.decode('utf-8')
tok_re = re.compile(r'R"\((.*?)\)"|"((?:[^"\\]|\\.)*)"|(\w+)|([{},;()])', re.S)
env = make_env()
bad = 0; n = 0
for test in re.split(r'\nTEST\(', src):
 consts = {}
 for m in re.finditer(r'const char\* (\w+) =\s*R"\((.*?)\)";', test, re.S):
    consts[m.group(1)] = m.group(2)
 for block in re.finditer(r'run_cases\(\{(.*?)\}\);', test, re.S):
    toks = []
    for m in tok_re.finditer(block.group(1)):
        if m.group(1) is not None: toks.append(('s', m.group(1)))
        elif m.group(2) is not None:
            v = c_unescape(m.group(2))
            if toks and toks[-1][0] == 's': toks[-1] = ('s', toks[-1][1] + v)
            else: toks.append(('s', v))
        elif m.group(3): toks.append(('s', consts[m.group(3)]) if m.group(3) in consts else ('w', m.group(3)))
        else: toks.append(('p', m.group(4)))
    vals = [t[1] for t in toks if t[0] == 's']
    for i in range(0, len(vals), 3):
        srcs, ctx, exp = vals[i:i+3]
        n += 1
        try:
            got = env.from_string(srcs).render(**json.loads(json.dumps(json.loads(ctx), sort_keys=True)))
        except Exception as e:
            got = 'EXC ' + repr(e)
        if got != exp:
            bad += 1; print('MISMATCH', repr(srcs), '\n  py :', repr(got), '\n  c++:', repr(exp))
print(n, 'cases,', bad, 'mismatches')
sys.exit(1 if bad else 0)
