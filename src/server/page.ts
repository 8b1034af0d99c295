/**
 * The built-in chat page served at `/`: one HTML document with inline CSS and
 * script (no build step, no CDN, works offline and inside the single
 * executable). It streams replies from `/v1/chat/completions`, can stop one,
 * keeps the conversation (and re-sends it, so the server reuses its cached
 * prefix), and shows tokens per second. Replies are rendered as markdown
 * (`markdown.ts`: a tree of blocks turned into elements, model text only ever
 * as `textContent`); code blocks have a copy button. A settings panel (system
 * prompt, temperature, max tokens) is kept in `localStorage` and sent with
 * each request. Reasoning — `reasoning_content` deltas, or a reply that opens
 * with `<think>` — is shown apart from the answer in a collapsible block and
 * is not sent back with the conversation. The page is served with a
 * Content-Security-Policy that runs its own inline script and style (by hash)
 * and nothing else, and connects only to its own origin.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { MARKDOWN_SOURCE } from "./markdown.ts";

/** The page's HTML. */
export const CHAT_PAGE: string = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dotllm</title>
<style>
  :root { color-scheme: light dark; --bg: #fafafa; --fg: #1d1d1f; --muted: #6e6e73; --me: #dbeafe; --it: #eeeeee; --line: #d0d0d5; --code: #f4f4f6; --link: #1d5fd1; }
  @media (prefers-color-scheme: dark) { :root { --bg: #17171a; --fg: #ececf1; --muted: #9a9aa3; --me: #1e3a5f; --it: #26262b; --line: #3a3a40; --code: #1c1c20; --link: #8ab4f8; } }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, sans-serif; background: var(--bg); color: var(--fg); display: flex; flex-direction: column; height: 100vh; }
  header { padding: 10px 16px; border-bottom: 1px solid var(--line); display: flex; gap: 12px; align-items: baseline; }
  header b { font-size: 17px; }
  header span { color: var(--muted); font-size: 13px; }
  header .grow { flex: 1; }
  #settings { padding: 10px 16px; border-bottom: 1px solid var(--line); display: grid; grid-template-columns: max-content 1fr; gap: 6px 12px; align-items: center; }
  #settings[hidden] { display: none; }
  #settings label { color: var(--muted); font-size: 13px; }
  #settings textarea, #settings input { font: inherit; padding: 4px 8px; border-radius: 6px; border: 1px solid var(--line); background: transparent; color: inherit; }
  #settings input { width: 12ch; }
  #settings input:invalid { border-color: #c62828; }
  #settings .note { grid-column: 2; color: var(--muted); font-size: 12px; }
  #log { flex: 1; overflow-y: auto; padding: 16px; display: flex; flex-direction: column; gap: 10px; }
  .msg { max-width: 80ch; padding: 8px 12px; border-radius: 10px; word-wrap: break-word; overflow-wrap: anywhere; }
  .user { align-self: flex-end; background: var(--me); white-space: pre-wrap; }
  .assistant { align-self: flex-start; background: var(--it); min-width: 4ch; }
  .error { align-self: center; color: #c62828; }
  .stats { color: var(--muted); font-size: 12px; margin-top: 4px; }
  .content > :first-child, .reasoning-text > :first-child { margin-top: 0; }
  .content > :last-child, .reasoning-text > :last-child { margin-bottom: 0; }
  .content p, .reasoning-text p { margin: 0 0 .6em; }
  .content h1, .content h2, .content h3, .content h4, .content h5, .content h6 { margin: .6em 0 .3em; line-height: 1.25; }
  .content h1 { font-size: 1.4em; } .content h2 { font-size: 1.25em; } .content h3 { font-size: 1.1em; }
  .content ul, .content ol { margin: 0 0 .6em; padding-left: 1.6em; }
  .content li > p { margin: 0; }
  .content blockquote { margin: 0 0 .6em; padding-left: .8em; border-left: 3px solid var(--line); color: var(--muted); }
  .content hr { border: none; border-top: 1px solid var(--line); }
  .content a { color: var(--link); }
  .content table { border-collapse: collapse; margin: 0 0 .6em; }
  .content th, .content td { border: 1px solid var(--line); padding: 2px 8px; }
  code { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
  :not(pre) > code { background: var(--code); padding: 1px 4px; border-radius: 4px; }
  .code { margin: 0 0 .6em; border: 1px solid var(--line); border-radius: 8px; background: var(--code); overflow: hidden; }
  .code .bar { display: flex; justify-content: space-between; align-items: center; padding: 2px 4px 2px 10px; border-bottom: 1px solid var(--line); color: var(--muted); font-size: 12px; }
  .code .bar button { padding: 0 8px; font-size: 12px; }
  .code pre { margin: 0; padding: 8px 10px; overflow-x: auto; }
  details.reasoning { margin-bottom: 6px; border-left: 3px solid var(--line); padding-left: 8px; color: var(--muted); font-size: 14px; }
  details.reasoning summary { cursor: pointer; user-select: none; }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid var(--line); }
  textarea { flex: 1; resize: none; font: inherit; padding: 8px; border-radius: 8px; border: 1px solid var(--line); background: transparent; color: inherit; }
  button { font: inherit; padding: 0 16px; border-radius: 8px; border: 1px solid var(--line); background: var(--it); color: inherit; cursor: pointer; }
  button:disabled { opacity: .5; cursor: default; }
</style>
</head>
<body>
<header><b>dotllm</b><span id="model">loading…</span><span id="speed"></span><span class="grow"></span>
  <button id="settings-toggle" type="button" aria-expanded="false" aria-controls="settings">Settings</button>
  <button id="clear" type="button" title="Start a new conversation">New chat</button></header>
<section id="settings" hidden aria-label="Settings">
  <label for="set-system">System prompt</label>
  <textarea id="set-system" rows="2" placeholder="none (or the server's -sys)"></textarea>
  <label for="set-temperature">Temperature</label>
  <input id="set-temperature" type="number" min="0" max="2" step="0.05" placeholder="default">
  <label for="set-max-tokens">Max tokens</label>
  <input id="set-max-tokens" type="number" min="1" step="1" placeholder="default">
  <span class="note">Empty: the server's default. Kept in this browser, sent with each message.
    <button id="set-reset" type="button">Reset</button></span>
</section>
<main id="log" aria-live="polite"></main>
<form id="form">
  <textarea id="input" rows="2" placeholder="Message (Enter sends, Shift+Enter breaks the line)" autofocus></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script type="module">
const parseMarkdown = ${MARKDOWN_SOURCE};

const log = document.getElementById("log"), input = document.getElementById("input");
const sendButton = document.getElementById("send"), stopButton = document.getElementById("stop");
const speed = document.getElementById("speed");
let messages = [];
let controller;
let apiKey = localStorage.getItem("dotllm-api-key") || "";
const headers = () => ({ "content-type": "application/json", ...(apiKey ? { authorization: "Bearer " + apiKey } : {}) });

// Settings: kept in localStorage, each field sent only when set.
const fields = { system: "set-system", temperature: "set-temperature", maxTokens: "set-max-tokens" };
let settings = {};
try { settings = JSON.parse(localStorage.getItem("dotllm-settings") || "{}") || {}; } catch { settings = {}; }
for (const [key, id] of Object.entries(fields)) {
  const el = document.getElementById(id);
  el.value = typeof settings[key] === "string" ? settings[key] : "";
  el.addEventListener("input", () => {
    settings[key] = el.value;
    localStorage.setItem("dotllm-settings", JSON.stringify(settings));
  });
}
document.getElementById("set-reset").onclick = () => {
  settings = {};
  localStorage.removeItem("dotllm-settings");
  for (const id of Object.values(fields)) document.getElementById(id).value = "";
};
const toggle = document.getElementById("settings-toggle"), panel = document.getElementById("settings");
toggle.onclick = () => {
  panel.hidden = !panel.hidden;
  toggle.setAttribute("aria-expanded", String(!panel.hidden));
};

/** The request's fields from the settings; throws a message naming a bad one. */
function fromSettings() {
  const out = {};
  const temperature = (settings.temperature ?? "").trim();
  if (temperature !== "") {
    const t = Number(temperature);
    if (!Number.isFinite(t) || t < 0 || t > 2) throw new Error("Settings: temperature must be a number from 0 to 2");
    out.temperature = t;
  }
  const maxTokens = (settings.maxTokens ?? "").trim();
  if (maxTokens !== "") {
    const n = Number(maxTokens);
    if (!Number.isSafeInteger(n) || n < 1) throw new Error("Settings: max tokens must be a whole number of at least 1");
    out.max_tokens = n;
  }
  const system = settings.system ?? "";
  return { fields: out, system: system.trim() === "" ? undefined : system };
}

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

// Markdown to elements: tags from a fixed list, model text only as text nodes.
function element(tag, children) {
  const el = document.createElement(tag);
  if (children) inlines(children, el);
  return el;
}
function inlines(runs, parent) {
  for (const r of runs) {
    if (r.type === "text") parent.appendChild(document.createTextNode(r.text));
    else if (r.type === "break") parent.appendChild(document.createElement("br"));
    else if (r.type === "code") { const c = element("code"); c.textContent = r.text; parent.appendChild(c); }
    else if (r.type === "strong" || r.type === "em" || r.type === "del") parent.appendChild(element(r.type, r.children));
    else if (r.type === "link") {
      const a = element("a", r.children);
      a.href = r.href; a.target = "_blank"; a.rel = "noopener noreferrer nofollow";
      parent.appendChild(a);
    }
  }
}
function copyText(text, button) {
  const done = () => { button.textContent = "Copied"; setTimeout(() => (button.textContent = "Copy"), 1200); };
  if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).then(done, () => {}); return; }
  const area = document.createElement("textarea");
  area.value = text; document.body.appendChild(area); area.select();
  try { document.execCommand("copy"); done(); } finally { area.remove(); }
}
function blocks(list, parent) {
  for (const b of list) {
    let el;
    if (b.type === "paragraph") el = element("p", b.children);
    else if (b.type === "heading") el = element("h" + b.level, b.children);
    else if (b.type === "rule") el = element("hr");
    else if (b.type === "quote") { el = element("blockquote"); blocks(b.children, el); }
    else if (b.type === "list") {
      el = element(b.ordered ? "ol" : "ul");
      if (b.ordered && b.start !== 1) el.start = b.start;
      for (const item of b.items) { const li = element("li"); blocks(item, li); el.appendChild(li); }
    } else if (b.type === "code") {
      el = element("div"); el.className = "code";
      const bar = element("div"); bar.className = "bar";
      const lang = element("span"); lang.textContent = b.lang || "code";
      const copy = element("button"); copy.type = "button"; copy.textContent = "Copy";
      copy.onclick = () => copyText(b.text, copy);
      bar.append(lang, copy);
      const pre = element("pre"), code = element("code");
      if (b.lang) code.setAttribute("data-lang", b.lang);
      code.textContent = b.text;
      pre.appendChild(code);
      el.append(bar, pre);
    } else if (b.type === "table") {
      el = element("table");
      const row = (cells, tag) => {
        const tr = element("tr");
        cells.forEach((c, i) => { const td = element(tag, c); if (b.align[i]) td.style.textAlign = b.align[i]; tr.appendChild(td); });
        return tr;
      };
      const head = element("thead"); head.appendChild(row(b.head, "th"));
      const body = element("tbody"); for (const r of b.rows) body.appendChild(row(r, "td"));
      el.append(head, body);
    }
    if (el) parent.appendChild(el);
  }
}
function renderMarkdown(target, text) {
  const fragment = document.createDocumentFragment();
  blocks(parseMarkdown(text), fragment);
  target.replaceChildren(fragment);
}

/** A reply's view: a collapsible reasoning block (made when reasoning arrives) and the answer. */
function replyView(div) {
  const content = element("div");
  content.className = "content";
  div.appendChild(content);
  let details, body, summary, started = 0, pending = false, state = { reasoning: "", answer: "" };
  const paint = () => {
    pending = false;
    if (state.reasoning) {
      if (!details) {
        details = element("details"); details.className = "reasoning"; details.open = true;
        summary = element("summary"); body = element("div"); body.className = "reasoning-text";
        details.append(summary, body);
        div.insertBefore(details, content);
        started = performance.now();
      }
      renderMarkdown(body, state.reasoning);
      if (state.answer || state.done) {
        if (summary.textContent.startsWith("Thinking") || !summary.textContent) {
          details.open = false;
          summary.textContent = "Reasoning · " + ((performance.now() - started) / 1000).toFixed(1) + " s";
        }
      } else summary.textContent = "Thinking…";
    }
    renderMarkdown(content, state.answer);
    log.scrollTop = log.scrollHeight;
  };
  return {
    update(reasoning, answer, done = false) {
      state = { reasoning, answer, done };
      if (done) paint();
      else if (!pending) { pending = true; requestAnimationFrame(paint); }
    },
  };
}

/** Reasoning and answer of a reply: reasoning_content, else a leading <think> block of the content. */
function split(reasoning, content) {
  const m = /^\\s*<think>([\\s\\S]*?)(?:<\\/think>\\s*|$)/.exec(content);
  if (!m) return [reasoning, content];
  return [reasoning + m[1], content.slice(m[0].length)];
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
  let asked;
  try { asked = fromSettings(); } catch (err) { bubble("error", err.message); return; }
  input.value = "";
  messages.push({ role: "user", content: text });
  bubble("user", text);
  const div = bubble("assistant", "");
  div.setAttribute("data-state", "streaming");
  const view = replyView(div);
  controller = new AbortController();
  sendButton.disabled = true; stopButton.disabled = false;
  let reply = "", reasoning = "", tokens = 0, first = 0, timings;
  const started = performance.now();
  try {
    const sent = asked.system === undefined ? messages : [{ role: "system", content: asked.system }, ...messages];
    const res = await call("/v1/chat/completions", {
      method: "POST", signal: controller.signal,
      body: JSON.stringify({ messages: sent, ...asked.fields, stream: true, stream_options: { include_usage: true } }),
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
        const delta = chunk.choices?.[0]?.delta;
        const content = delta?.content, thought = delta?.reasoning_content;
        if (content || thought) {
          if (!first) first = performance.now();
          if (content) reply += content;
          if (thought) reasoning += thought;
          view.update(...split(reasoning, reply));
          const s = (performance.now() - first) / 1000;
          if (s > 0.2) speed.textContent = ((reply.length + reasoning.length) / s / 4).toFixed(1) + " tok/s (est.)";
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
    view.update(...split(reasoning, reply), true);
    messages.push({ role: "assistant", content: reply });
    const stats = document.createElement("div");
    stats.className = "stats";
    const rate = timings?.predicted_per_second ??
      (first && tokens ? tokens / ((performance.now() - first) / 1000) : 0);
    const count = tokens || timings?.predicted_n || 0;
    const seconds = ((performance.now() - started) / 1000).toFixed(1) + " s";
    stats.textContent = div.getAttribute("data-state") === "stopped" ? "stopped" :
      count ? count + " tokens · " + rate.toFixed(1) + " tok/s · " + seconds : seconds;
    if (rate) speed.textContent = rate.toFixed(1) + " tok/s";
    div.appendChild(stats);
    input.focus();
  }
};
</script>
</body>
</html>
`;

/** The CSP source of the page's one inline `<tag>` element: its text's sha256. */
function inlineHash(tag: "script" | "style"): string {
  const text = new RegExp(`<${tag}[^>]*>([\\s\\S]*?)</${tag}>`).exec(CHAT_PAGE)![1];
  return `'sha256-${createHash("sha256").update(text).digest("base64")}'`;
}

/** The page's response headers. */
export const CHAT_PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": `default-src 'none'; script-src ${inlineHash("script")}; ` +
    `style-src ${inlineHash("style")}; connect-src 'self'; img-src 'self'; base-uri 'none'; ` +
    "form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};
