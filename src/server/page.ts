/**
 * The built-in chat page served at `/`: one HTML document with inline CSS and
 * script (no build step, no CDN, works offline and inside the single
 * executable). It streams replies from `/v1/chat/completions`, can stop one,
 * keeps the conversation (and re-sends it, so the server reuses its cached
 * prefix), and shows tokens per second.
 *
 * @module
 */

/** The page's HTML. */
export const CHAT_PAGE: string = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dotllm</title>
<style>
  :root { color-scheme: light dark; --bg: #fafafa; --fg: #1d1d1f; --muted: #6e6e73; --me: #dbeafe; --it: #eeeeee; --line: #d0d0d5; }
  @media (prefers-color-scheme: dark) { :root { --bg: #17171a; --fg: #ececf1; --muted: #9a9aa3; --me: #1e3a5f; --it: #26262b; --line: #3a3a40; } }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, sans-serif; background: var(--bg); color: var(--fg); display: flex; flex-direction: column; height: 100vh; }
  header { padding: 10px 16px; border-bottom: 1px solid var(--line); display: flex; gap: 12px; align-items: baseline; }
  header b { font-size: 17px; }
  header span { color: var(--muted); font-size: 13px; }
  #log { flex: 1; overflow-y: auto; padding: 16px; display: flex; flex-direction: column; gap: 10px; }
  .msg { max-width: 80ch; padding: 8px 12px; border-radius: 10px; white-space: pre-wrap; word-wrap: break-word; }
  .user { align-self: flex-end; background: var(--me); }
  .assistant { align-self: flex-start; background: var(--it); }
  .error { align-self: center; color: #c62828; }
  .stats { color: var(--muted); font-size: 12px; margin-top: 4px; }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid var(--line); }
  textarea { flex: 1; resize: none; font: inherit; padding: 8px; border-radius: 8px; border: 1px solid var(--line); background: transparent; color: inherit; }
  button { font: inherit; padding: 0 16px; border-radius: 8px; border: 1px solid var(--line); background: var(--it); color: inherit; cursor: pointer; }
  button:disabled { opacity: .5; cursor: default; }
</style>
</head>
<body>
<header><b>dotllm</b><span id="model">loading…</span><span id="speed"></span>
  <button id="clear" type="button" title="Start a new conversation">New chat</button></header>
<main id="log" aria-live="polite"></main>
<form id="form">
  <textarea id="input" rows="2" placeholder="Message (Enter sends, Shift+Enter breaks the line)" autofocus></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script type="module">
const log = document.getElementById("log"), input = document.getElementById("input");
const sendButton = document.getElementById("send"), stopButton = document.getElementById("stop");
const speed = document.getElementById("speed");
let messages = [];
let controller;
let apiKey = localStorage.getItem("dotllm-api-key") || "";
const headers = () => ({ "content-type": "application/json", ...(apiKey ? { authorization: "Bearer " + apiKey } : {}) });

async function call(path, init) {
  for (;;) {
    const res = await fetch(path, { ...init, headers: headers() });
    if (res.status !== 401) return res;
    const key = prompt("This server needs an API key:");
    if (!key) return res;
    apiKey = key;
    localStorage.setItem("dotllm-api-key", key);
  }
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  log.appendChild(div);
  log.scrollTop = log.scrollHeight;
  return div;
}

call("/v1/models").then((r) => r.json()).then((j) => {
  document.getElementById("model").textContent = j.data[0].id + " · context " + j.data[0].meta.n_ctx;
}).catch(() => {});

document.getElementById("clear").onclick = () => { controller?.abort(); messages = []; log.textContent = ""; speed.textContent = ""; };
stopButton.onclick = () => controller?.abort();
input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); document.getElementById("form").requestSubmit(); }
});

document.getElementById("form").onsubmit = async (e) => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || controller) return;
  input.value = "";
  messages.push({ role: "user", content: text });
  bubble("user", text);
  const div = bubble("assistant", "");
  div.setAttribute("data-state", "streaming");
  controller = new AbortController();
  sendButton.disabled = true; stopButton.disabled = false;
  let reply = "", tokens = 0, first = 0, timings;
  const started = performance.now();
  try {
    const res = await call("/v1/chat/completions", {
      method: "POST", signal: controller.signal,
      body: JSON.stringify({ messages, stream: true, stream_options: { include_usage: true } }),
    });
    if (!res.ok) throw new Error((await res.json()).error?.message || res.statusText);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += value;
      let at;
      while ((at = buffer.indexOf("\\n\\n")) >= 0) {
        const line = buffer.slice(0, at); buffer = buffer.slice(at + 2);
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.timings) timings = chunk.timings;
        if (chunk.usage) tokens = chunk.usage.completion_tokens;
        const delta = chunk.choices?.[0]?.delta?.content;
        if (delta) {
          if (!first) first = performance.now();
          reply += delta;
          div.textContent = reply;
          log.scrollTop = log.scrollHeight;
          const s = (performance.now() - first) / 1000;
          if (s > 0.2) speed.textContent = (reply.length / s / 4).toFixed(1) + " tok/s (est.)";
        }
      }
    }
    div.setAttribute("data-state", "done");
  } catch (err) {
    div.setAttribute("data-state", err.name === "AbortError" ? "stopped" : "error");
    if (err.name !== "AbortError") bubble("error", String(err.message || err));
  } finally {
    controller = undefined;
    sendButton.disabled = false; stopButton.disabled = true;
    messages.push({ role: "assistant", content: reply });
    const stats = document.createElement("div");
    stats.className = "stats";
    const rate = timings?.predicted_per_second ??
      (first && tokens ? tokens / ((performance.now() - first) / 1000) : 0);
    stats.textContent = div.getAttribute("data-state") === "stopped" ? "stopped" :
      (tokens || timings?.predicted_n || 0) + " tokens · " + rate.toFixed(1) + " tok/s · " +
      ((performance.now() - started) / 1000).toFixed(1) + " s";
    if (rate) speed.textContent = rate.toFixed(1) + " tok/s";
    div.appendChild(stats);
    input.focus();
  }
};
</script>
</body>
</html>
`;
