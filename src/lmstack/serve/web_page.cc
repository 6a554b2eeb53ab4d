// The web chat page at "/": one self-contained HTML file (no external scripts or styles)
// that streams replies from /v1/chat/completions and shows tokens/s and cached prompt
// tokens (from stream_options.include_usage). Tested in headless Chromium where available.
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
                stream_options: {include_usage: true}};
  const t0 = performance.now(); let first = null, n = 0, reply = "";
  const r = await fetch("/v1/chat/completions", {method: "POST", headers: headers(),
                                                 body: JSON.stringify(body)});
  if (!r.ok) { out.textContent = "error: " + (await r.text()); return; }
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
      if (j.usage) {
        $("cached").textContent = j.usage.prompt_tokens_details.cached_tokens;
        $("ntok").textContent = j.usage.completion_tokens;
      }
      for (const c of j.choices || []) {
        const piece = (c.delta && c.delta.content) || "";
        if (piece) { if (first === null) first = performance.now(); n++; reply += piece;
                     out.textContent = reply; }
      }
      const dt = first === null ? 0 : (performance.now() - first) / 1000;
      $("tps").textContent = dt > 0 ? (Math.max(n - 1, 0) / dt).toFixed(1) : "-";
    }
  }
  messages.push({role: "assistant", content: reply});
  out.dataset.done = "1";
}
$("form").addEventListener("submit", (e) => {
  e.preventDefault(); const t = $("prompt").value; if (!t) return;
  $("prompt").value = ""; send(t);
});
loadModel();
</script></body></html>
)HTML";
  return page;
}

}  // namespace lmstack::serve
