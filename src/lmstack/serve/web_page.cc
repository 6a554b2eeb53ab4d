// The web chat page at "/": one self-contained HTML file (no external scripts or styles)
// that streams replies from /v1/chat/completions. Before each send it counts the
// conversation's tokens with /tokenize and leaves out the oldest turns until the prompt plus
// max_tokens fits the context (max_model_len of /v1/models), so a long chat keeps working;
// "New chat" starts over. Replies render a markdown subset (paragraphs, headings, lists,
// **bold**, *italic*, `code`, fenced code blocks) built with textContent only, so no text
// from the model or the user is ever parsed as HTML. Shows prefill and decode tokens/s and
// the cached prompt tokens (stream_options.include_usage). Query parameters prefill the
// form and can send at once: /?prompt=Hi&max_tokens=16&temperature=0&autosend=1 (bookmarks,
// and tests/serve/web_chat_page_heavytest.cc). When a reply ends the page sets
// <body data-state="done"> ("error" on failure), the reply's data-chunks and data-raw, and
// <body data-dropped> (messages left out of the last request).
#include "lmstack/serve/http_server.h"

namespace lmstack::serve {

const std::string& web_chat_page() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lmstack chat</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;max-width:760px;margin:2em auto;padding:0 1em;color:#222}
#log{border:1px solid #ccc;border-radius:6px;padding:1em;min-height:300px;max-height:60vh;
 overflow-y:auto}
.user{color:#035;font-weight:600;margin-top:.8em;white-space:pre-wrap}
.assistant{margin:.3em 0 .8em 0}.assistant p{margin:.3em 0}.note{color:#888;font-size:.85em}
.error{color:#a00}pre{background:#f4f4f4;padding:.6em;border-radius:4px;overflow-x:auto}
code{background:#f4f4f4;padding:0 .2em;border-radius:3px}
#stats{color:#666;font-size:.9em;margin:.5em 0}form{display:flex;flex-wrap:wrap;gap:.5em;
 margin-top:1em;align-items:center}#prompt{flex:1;min-width:12em;padding:.5em}
button{padding:.5em 1em}label{font-size:.85em;color:#444}
.sr{position:absolute;left:-9999px}
</style></head><body>
<h2>lmstack chat <small id="model"></small></h2>
<div id="log" role="log" aria-live="polite"></div>
<div id="stats">prefill: <span id="prefill">-</span> tok/s · decode: <span id="tps">-</span>
 tok/s · prompt tokens: <span id="ptok">-</span> (cached <span id="cached">-</span>) ·
 completion tokens: <span id="ntok">-</span></div>
<form id="form"><label for="prompt" class="sr">Message</label>
<input id="prompt" autocomplete="off" placeholder="Say something">
<label for="maxtok">max tokens</label>
<input id="maxtok" type="number" value="128" min="1" style="width:5em">
<label for="temp">temperature</label>
<input id="temp" type="number" value="0.7" min="0" max="2" step="0.1" style="width:4em">
<label for="key">API key</label>
<input id="key" type="password" placeholder="optional" style="width:7em">
<button id="send" type="submit">Send</button>
<button id="newchat" type="button">New chat</button></form>
<script>
"use strict";
let messages = [];
const $ = (id) => document.getElementById(id);
let model = null, maxLen = 0;
function headers() {
  const h = {"Content-Type": "application/json"};
  if ($("key").value) h["Authorization"] = "Bearer " + $("key").value;
  return h;
}
async function loadModel() {
  const r = await fetch("/v1/models", {headers: headers()});
  if (!r.ok) throw new Error("/v1/models: " + r.status + " " + (await r.text()));
  const m = (await r.json()).data[0];
  model = m.id; maxLen = m.max_model_len; $("model").textContent = model;
}
// `code`, **bold** and *italic* inside one line, as text nodes and elements.
function inline(parent, text) {
  const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*|\*[^*\n]+\*)/g;
  let last = 0, m;
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
    const t = m[0];
    const tag = t[0] === "`" ? "code" : t.startsWith("**") ? "strong" : "em";
    const cut = tag === "strong" ? 2 : 1;
    const el = document.createElement(tag); el.textContent = t.slice(cut, -cut);
    parent.appendChild(el); last = re.lastIndex;
  }
  if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
}
function renderMarkdown(text) {
  const root = document.createElement("div");
  const lines = text.split("\n");
  let para = null, list = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+#.-]*)\s*$/);
    if (fence) {  // to the closing fence, or to the end while the reply is still streaming
      const body = [];
      while (i + 1 < lines.length && !/^\s*```\s*$/.test(lines[i + 1])) body.push(lines[++i]);
      i++;
      const pre = document.createElement("pre"), code = document.createElement("code");
      if (fence[1]) code.dataset.lang = fence[1];
      code.textContent = body.join("\n"); pre.appendChild(code); root.appendChild(pre);
      para = list = null; continue;
    }
    const h = line.match(/^(#{1,6})\s+(.*)$/), li = line.match(/^\s*(?:[-*+]|\d+[.)])\s+(.*)$/);
    if (h) {
      const el = document.createElement("h" + Math.min(6, h[1].length + 2));
      inline(el, h[2]); root.appendChild(el); para = list = null;
    } else if (li) {
      if (!list) { list = document.createElement("ul"); root.appendChild(list); para = null; }
      const el = document.createElement("li"); inline(el, li[1]); list.appendChild(el);
    } else if (line.trim() === "") {
      para = list = null;
    } else {
      if (para) para.appendChild(document.createElement("br"));
      else { para = document.createElement("p"); root.appendChild(para); list = null; }
      inline(para, line);
    }
  }
  return root;
}
function addLine(cls, text) {
  const d = document.createElement("div"); d.className = cls; d.textContent = text;
  $("log").appendChild(d); scrollDown(); return d;
}
function scrollDown() { const l = $("log"); l.scrollTop = l.scrollHeight; }
async function countTokens(msgs) {
  const r = await fetch("/tokenize", {method: "POST", headers: headers(),
                                      body: JSON.stringify({messages: msgs})});
  if (!r.ok) throw new Error("/tokenize: " + (await r.text()));
  return (await r.json()).count;
}
// The newest turns whose prompt leaves room for `want` new tokens (at least 1): the oldest
// user message and the replies after it go first.
async function fitContext(msgs, want) {
  let count = await countTokens(msgs), dropped = 0;
  while (count + want > maxLen && msgs.length > 1) {
    let k = 1;
    while (k < msgs.length - 1 && msgs[k].role !== "user") k++;
    msgs = msgs.slice(k); dropped += k; count = await countTokens(msgs);
  }
  return {msgs, count, dropped};
}
async function send(text) {
  document.body.dataset.state = "sending"; $("send").disabled = true;
  try { await exchange(text); } finally { $("send").disabled = false; }
}
async function exchange(text) {
  if (!model) await loadModel();
  messages.push({role: "user", content: text});
  addLine("user", "you: " + text);
  let maxTokens = parseInt($("maxtok").value) || 128;
  const fit = await fitContext(messages, Math.min(maxTokens, Math.floor(maxLen / 4)));
  document.body.dataset.dropped = fit.dropped;
  if (fit.dropped > 0)
    addLine("note", "(" + fit.dropped + " earlier messages left out to fit the " + maxLen +
            "-token context)");
  const out = addLine("assistant", "");
  if (fit.count >= maxLen) {
    messages.pop();
    out.className = "assistant error";
    out.textContent = "error: this message alone is " + fit.count + " tokens; the context holds " +
                      maxLen;
    document.body.dataset.state = "error"; return;
  }
  maxTokens = Math.min(maxTokens, maxLen - fit.count);
  const body = {model, messages: fit.msgs, stream: true, max_tokens: maxTokens,
                temperature: parseFloat($("temp").value), stream_options: {include_usage: true}};
  const start = performance.now();
  let first = null, last = null, n = 0, reply = "", failed = false, usage = null;
  const r = await fetch("/v1/chat/completions", {method: "POST", headers: headers(),
                                                 body: JSON.stringify(body)});
  if (!r.ok) {
    messages.pop();
    out.className = "assistant error"; out.textContent = "error: " + (await r.text());
    document.body.dataset.state = "error"; return;
  }
  const reader = r.body.getReader(); const dec = new TextDecoder(); let buf = "";
  for (;;) {
    const {value, done} = await reader.read(); if (done) break;
    buf += dec.decode(value, {stream: true});
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, cut).trim(); buf = buf.slice(cut + 2);
      if (!line.startsWith("data: ")) continue;
      const data = line.slice(6); if (data === "[DONE]") continue;
      const j = JSON.parse(data);
      if (j.error) { failed = true; addLine("error", "error: " + j.error.message); }
      if (j.usage) usage = j.usage;
      for (const c of j.choices || []) {
        if (!c.delta || !("content" in c.delta) || c.delta.role || c.finish_reason) continue;
        last = performance.now(); if (first === null) first = last; n++;
        reply += c.delta.content;
      }
      out.replaceChildren(renderMarkdown(reply)); scrollDown();
      const dt = first === null ? 0 : (last - first) / 1000;
      $("tps").textContent = dt > 0 ? ((n - 1) / dt).toFixed(1) : "-";
    }
  }
  if (usage) {
    const cached = usage.prompt_tokens_details.cached_tokens;
    $("ptok").textContent = usage.prompt_tokens; $("cached").textContent = cached;
    $("ntok").textContent = usage.completion_tokens;
    // Prefill: the prompt tokens computed (not taken from the cache) over the time to the
    // first token (which includes one decode step and the round trip).
    const ttft = ((first === null ? performance.now() : first) - start) / 1000;
    $("prefill").textContent = ttft > 0 ? ((usage.prompt_tokens - cached) / ttft).toFixed(1) : "-";
  }
  messages.push({role: "assistant", content: reply});
  out.dataset.chunks = n; out.dataset.raw = reply; out.dataset.done = "1";
  document.body.dataset.state = failed ? "error" : "done";
}
function newChat() {
  messages = []; $("log").replaceChildren();
  for (const id of ["prefill", "tps", "ptok", "cached", "ntok"]) $(id).textContent = "-";
  document.body.dataset.dropped = 0; document.body.dataset.state = "new"; $("prompt").focus();
}
function fail(e) { addLine("error", String(e)); document.body.dataset.state = "error"; }
$("newchat").addEventListener("click", newChat);
$("form").addEventListener("submit", (e) => {
  e.preventDefault(); const t = $("prompt").value; if (!t || $("send").disabled) return;
  $("prompt").value = ""; send(t).catch(fail);
});
window.lmstack = {renderMarkdown, send, newChat, messages: () => messages};
// ?prompt=...&max_tokens=...&temperature=...&autosend=1
const params = new URLSearchParams(location.search);
if (params.has("max_tokens")) $("maxtok").value = params.get("max_tokens");
if (params.has("temperature")) $("temp").value = params.get("temperature");
if (params.has("prompt")) $("prompt").value = params.get("prompt");
if (params.get("autosend") === "1" && $("prompt").value) {
  const t = $("prompt").value; $("prompt").value = "";
  send(t).catch(fail);
} else {
  loadModel().catch(fail);
}
</script></body></html>
)HTML";
  return page;
}

}  // namespace lmstack::serve
