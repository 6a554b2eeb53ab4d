// The web chat page at "/": one self-contained HTML file (no external scripts or styles)
// that streams replies from /v1/chat/completions and shows tokens/s and cached prompt
// tokens (from stream_options.include_usage). Query parameters prefill the form and can
// send at once: /?prompt=Hi&max_tokens=16&temperature=0&autosend=1 (bookmarks, and the
// headless-Chromium test tests/serve/web_chat_page_heavytest.cc). When a reply ends the
// page sets <body data-state="done"> ("error" on failure) and the reply's data-chunks.
#include "lmstack/serve/http_server.h"

namespace lmstack::serve {

const std::string& web_chat_page() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lmstack chat</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;max-width:760px;margin:2em auto;padding:0 1em;color:#222}
#log{border:1px solid #ccc;border-radius:6px;padding:1em;min-height:300px;white-space:pre-wrap}
.user{color:#035;font-weight:600;margin-top:.8em}.assistant{margin:.3em 0 .8em 0}
#stats{color:#666;font-size:.9em;margin:.5em 0}form{display:flex;gap:.5em;margin-top:1em}
#prompt{flex:1;padding:.5em}button{padding:.5em 1em}
</style></head><body>
<h2>lmstack chat <small id="model"></small></h2>
<div id="log"></div>
<div id="stats">tokens/s: <span id="tps">-</span> · completion tokens: <span id="ntok">-</span>
 · cached prompt tokens: <span id="cached">-</span></div>
<form id="form"><input id="prompt" autocomplete="off" placeholder="Say something">
<input id="maxtok" type="number" value="128" min="1" style="width:5em" title="max_tokens">
<input id="temp" type="number" value="0.7" min="0" max="2" step="0.1" style="width:4em"
 title="temperature">
<input id="key" type="password" placeholder="API key" style="width:7em">
<button id="send" type="submit">Send</button></form>
<script>
const messages = [];
const $ = (id) => document.getElementById(id);
let model = null;
function headers() {
  const h = {"Content-Type": "application/json"};
  if ($("key").value) h["Authorization"] = "Bearer " + $("key").value;
  return h;
}
async function loadModel() {
  const r = await fetch("/v1/models", {headers: headers()});
  if (r.ok) { model = (await r.json()).data[0].id; $("model").textContent = model; }
}
function addLine(cls, text) {
  const d = document.createElement("div"); d.className = cls; d.textContent = text;
  $("log").appendChild(d); return d;
}
async function send(text) {
  if (!model) await loadModel();
  messages.push({role: "user", content: text});
  addLine("user", "you: " + text);
  const out = addLine("assistant", "");
  const body = {model, messages, stream: true, max_tokens: parseInt($("maxtok").value),
                temperature: parseFloat($("temp").value), stream_options: {include_usage: true}};
  document.body.dataset.state = "sending";
  // tokens/s: token chunks (one per generated token) after the first, over their time span.
  let first = null, last = null, n = 0, reply = "", failed = false;
  const r = await fetch("/v1/chat/completions", {method: "POST", headers: headers(),
                                                 body: JSON.stringify(body)});
  if (!r.ok) {
    out.textContent = "error: " + (await r.text()); document.body.dataset.state = "error";
    return;
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
      if (j.error) { out.textContent = reply + "\nerror: " + j.error.message; failed = true; }
      if (j.usage) {
        $("cached").textContent = j.usage.prompt_tokens_details.cached_tokens;
        $("ntok").textContent = j.usage.completion_tokens;
      }
      for (const c of j.choices || []) {
        if (!c.delta || !("content" in c.delta) || c.delta.role || c.finish_reason) continue;
        last = performance.now(); if (first === null) first = last; n++;
        reply += c.delta.content; out.textContent = reply;
      }
      const dt = first === null ? 0 : (last - first) / 1000;
      $("tps").textContent = dt > 0 ? ((n - 1) / dt).toFixed(1) : "-";
    }
  }
  messages.push({role: "assistant", content: reply});
  out.dataset.chunks = n; out.dataset.done = "1";
  document.body.dataset.state = failed ? "error" : "done";
}
$("form").addEventListener("submit", (e) => {
  e.preventDefault(); const t = $("prompt").value; if (!t) return;
  $("prompt").value = ""; send(t);
});
// ?prompt=...&max_tokens=...&temperature=...&autosend=1
const params = new URLSearchParams(location.search);
if (params.has("max_tokens")) $("maxtok").value = params.get("max_tokens");
if (params.has("temperature")) $("temp").value = params.get("temperature");
if (params.has("prompt")) $("prompt").value = params.get("prompt");
if (params.get("autosend") === "1" && $("prompt").value) {
  const t = $("prompt").value; $("prompt").value = "";
  send(t).catch((e) => { addLine("error", String(e)); document.body.dataset.state = "error"; });
} else {
  loadModel();
}
</script></body></html>
)HTML";
  return page;
}

}  // namespace lmstack::serve
