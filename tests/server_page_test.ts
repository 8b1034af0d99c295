/**
 * The built-in chat page in headless Chromium (Debian's `chromium`, installed
 * with apt-get when missing), driven over the DevTools protocol: it loads
 * from the server with no other origin, streams a reply, stops one midway,
 * keeps the conversation for the next message, shows tokens/s; on the real
 * SmolLM2-135M-Instruct it renders a reply's code block as `<pre><code>` and
 * sends the settings panel's values (seen in the request the browser sends);
 * the settings survive a reload; reasoning is shown apart from the answer, and
 * markup in a reply stays text. Screenshots go to `tests/out/` (ignored by
 * git; `DOTLLM_SCREENSHOT_DIR` overrides) and their paths are printed.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ensureDebianTool } from "./_apt.ts";
import { type ServerProcess, SMOLLM2_Q4_1, smollmQ8, startServer } from "./_server.ts";
import { repoRoot } from "./_testdata.ts";

function ensureChromium(): Promise<string> {
  return ensureDebianTool(["/usr/bin/chromium", "/usr/bin/chromium-browser"], "chromium");
}

/** A minimal DevTools protocol session over the page's WebSocket. */
class Cdp {
  #next = 1;
  readonly #waiting = new Map<number, (m: { result?: unknown; error?: unknown }) => void>();
  readonly #listeners = new Map<string, (params: Record<string, unknown>) => void>();
  private constructor(readonly ws: WebSocket) {
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.id !== undefined) this.#waiting.get(m.id)?.(m);
      else if (m.method !== undefined) this.#listeners.get(m.method)?.(m.params);
    };
  }

  /** Calls `listener` with each event `method` (one listener per event). */
  on(method: string, listener: (params: Record<string, unknown>) => void): void {
    this.#listeners.set(method, listener);
  }

  static connect(url: string): Promise<Cdp> {
    const ws = new WebSocket(url);
    return new Promise((resolve, reject) => {
      ws.onopen = () => resolve(new Cdp(ws));
      ws.onerror = () => reject(new Error(`cannot connect to ${url}`));
    });
  }

  send(method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.#next++;
    this.ws.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, (m) => {
        this.#waiting.delete(id);
        if (m.error) reject(new Error(`${method}: ${JSON.stringify(m.error)}`));
        else resolve(m.result as Record<string, unknown>);
      });
    });
  }

  async eval<T>(expression: string): Promise<T> {
    const r = await this.send("Runtime.evaluate", {
      expression,
      returnByValue: true,
      awaitPromise: true,
    });
    const result = r.result as { value: T };
    if (r.exceptionDetails) throw new Error(`page: ${JSON.stringify(r.exceptionDetails)}`);
    return result.value;
  }

  async until<T>(expression: string, what: string, timeoutMs = 60_000): Promise<T> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = await this.eval<T>(expression);
      if (v) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Where screenshots go: `tests/out/` (ignored by git) unless DOTLLM_SCREENSHOT_DIR says. */
async function screenshot(cdp: Cdp, name: string): Promise<string> {
  const dir = Deno.env.get("DOTLLM_SCREENSHOT_DIR") ?? join(repoRoot, "tests", "out");
  await Deno.mkdir(dir, { recursive: true });
  const shot = await cdp.send("Page.captureScreenshot", { format: "png" });
  const file = join(dir, name);
  Deno.writeFileSync(file, Uint8Array.from(atob(shot.data as string), (c) => c.charCodeAt(0)));
  console.log(`screenshot: ${file}`);
  return file;
}

/** Opens the server's page in headless Chromium and runs `fn` on it; cleans up after. */
async function withPage(server: ServerProcess, fn: (cdp: Cdp) => Promise<void>): Promise<void> {
  const chromium = await ensureChromium();
  const profile = await Deno.makeTempDir({ prefix: "dotllm-chromium-" });
  const browser = new Deno.Command(chromium, {
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--remote-debugging-port=0",
      `--user-data-dir=${profile}`,
      "--window-size=1000,760",
      server.url + "/",
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  try {
    let log = "";
    let ws = "";
    const decoder = new TextDecoder();
    const reader = browser.stderr.getReader();
    while (!ws) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`chromium exited: ${log}`);
      log += decoder.decode(value);
      ws = /DevTools listening on (ws:\/\/\S+)/.exec(log)?.[1] ?? "";
    }
    reader.releaseLock();
    browser.stderr.cancel().catch(() => {});
    const port = new URL(ws).port;
    type Target = { type: string; url: string; webSocketDebuggerUrl: string };
    let page: Target | undefined;
    for (let i = 0; i < 100 && page === undefined; i++) {
      const list: Target[] = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
      page = list.find((t) => t.type === "page" && t.url.startsWith(server.url));
      if (page === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(page, "the page target");
    const cdp = await Cdp.connect(page.webSocketDebuggerUrl);
    try {
      await fn(cdp);
    } finally {
      cdp.ws.close();
    }
  } finally {
    try {
      browser.kill("SIGKILL");
    } catch { /* gone */ }
    await browser.status;
    await Deno.remove(profile, { recursive: true }).catch(() => {});
  }
}

/** Types `text` into the message box and submits it. */
function send(cdp: Cdp, text: string): Promise<unknown> {
  return cdp.eval(
    `(() => { const i = document.getElementById('input'); i.value = ${JSON.stringify(text)};
    document.getElementById('form').requestSubmit(); return true; })()`,
  );
}

const state = (n: number) =>
  `document.querySelectorAll('.assistant')[${n}]?.getAttribute('data-state')`;

Deno.test({
  name:
    "serve: the chat page streams, stops, keeps the conversation, shows tok/s (headless Chromium)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    // One slot with a short context: each unstopped reply ends within seconds.
    const server = await startServer(smollmQ8(), [
      "--metrics",
      "--parallel",
      "1",
      "-c",
      "160",
      "-t",
      "2",
      "--temp",
      "0",
    ]);
    try {
      await withPage(server, async (cdp) => {
        await cdp.until(
          "document.getElementById('model')?.textContent?.includes('smollm') ?? false",
          "the page to load its model name",
        );

        // 1: stop a reply midway.
        await send(cdp, "Tell me a long story.");
        await cdp.until(
          `(document.querySelectorAll('.assistant')[0]?.textContent ?? '').length > 10`,
          "streamed text",
        );
        assert.equal(await cdp.eval(state(0)), "streaming");
        await cdp.eval("document.getElementById('stop').click(), true");
        await cdp.until(`${state(0)} === 'stopped'`, "the reply to stop");
        assert.equal(await cdp.eval("document.getElementById('stop').disabled"), true);

        // 2: the next message streams to the end; the conversation is kept.
        await send(cdp, "Thanks. Now a short one.");
        await cdp.until(
          `${state(1)} === 'done' || ${state(1)} === 'error'`,
          "the second reply",
          90_000,
        );
        assert.equal(await cdp.eval(state(1)), "done", await cdp.eval("document.body.innerText"));
        const bubbles = await cdp.eval<string[]>(
          "[...document.querySelectorAll('.msg')].map((d) => d.className)",
        );
        assert.deepEqual(bubbles, ["msg user", "msg assistant", "msg user", "msg assistant"]);
        const reply = await cdp.eval<string>(
          "document.querySelectorAll('.assistant')[1].querySelector('.content').textContent",
        );
        assert.ok(reply.length > 0);
        const speed = await cdp.eval<string>("document.getElementById('speed').textContent");
        assert.match(speed, /^\d+(\.\d)? tok\/s$/);
        assert.match(
          await cdp.eval<string>("document.querySelectorAll('.stats')[1].textContent"),
          /tokens · [\d.]+ tok\/s/,
        );

        // The second request re-sent the history, and the server reused its cached prefix.
        const metrics = await (await fetch(server.url + "/metrics")).text();
        const cached = Number(/dotllm_prompt_tokens_cached_total (\d+)/.exec(metrics)?.[1]);
        assert.ok(cached > 0, "prefix reuse across turns");
        await screenshot(cdp, "chat_page.png");
      });
    } finally {
      await server.stop();
    }
  },
});

Deno.test({
  name:
    "serve: the chat page renders a real model's code block and sends its settings; reasoning apart, markup as text (headless Chromium)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    // The server's own default temperature (not 0): the settings panel asks for 0.
    const server = await startServer(SMOLLM2_Q4_1, ["--parallel", "1", "-c", "512", "-t", "2"]);
    try {
      await withPage(server, async (cdp) => {
        // The page runs under a CSP that allows its own inline script and style only.
        const csp = (await fetch(server.url + "/")).headers.get("content-security-policy") ?? "";
        assert.match(csp, /script-src 'sha256-[\w+/]+=*';/);
        assert.match(csp, /default-src 'none'/);
        await cdp.until(
          "document.getElementById('model')?.textContent?.includes('SmolLM2') ?? false",
          "the page to load its model name",
        );
        // Every chat request the browser sends, as sent.
        const sent: Record<string, unknown>[] = [];
        await cdp.send("Network.enable");
        cdp.on("Network.requestWillBeSent", (p) => {
          const request = p.request as { url: string; method: string; postData?: string };
          if (request.url.endsWith("/v1/chat/completions") && request.method === "POST") {
            sent.push(JSON.parse(request.postData ?? "null"));
          }
        });

        // The settings panel: a system prompt, temperature 0, at most 64 tokens.
        const system = "You write Python code.";
        const setField = (id: string, value: string) =>
          cdp.eval(`(() => { const el = document.getElementById(${JSON.stringify(id)});
            el.value = ${JSON.stringify(value)}; el.dispatchEvent(new Event('input'));
            return true; })()`);
        await cdp.eval("document.getElementById('settings-toggle').click(), true");
        assert.equal(await cdp.eval("document.getElementById('settings').hidden"), false);
        await setField("set-system", system);
        await setField("set-temperature", "0");
        await setField("set-max-tokens", "64");

        await send(cdp, "Write a Python function that adds two numbers.");
        await cdp.until(
          `${state(0)} === 'done' || ${state(0)} === 'error'`,
          "the reply",
          120_000,
        );
        assert.equal(await cdp.eval(state(0)), "done", await cdp.eval("document.body.innerText"));

        // The request carried the settings.
        assert.equal(sent.length, 1);
        assert.deepEqual(sent[0].messages, [
          { role: "system", content: system },
          { role: "user", content: "Write a Python function that adds two numbers." },
        ]);
        assert.equal(sent[0].temperature, 0);
        assert.equal(sent[0].max_tokens, 64);
        // The server applied max_tokens: the reply was cut at 64 tokens.
        assert.match(
          await cdp.eval<string>("document.querySelector('.assistant .stats').textContent"),
          /^64 tokens · /,
        );

        // The reply's fenced code block is a <pre><code>, its fences gone.
        const code = await cdp.eval<{ lang: string; text: string; parent: string }[]>(
          `[...document.querySelectorAll('.assistant .content pre > code')].map((c) =>
            ({ lang: c.getAttribute('data-lang'), text: c.textContent, parent: c.parentElement.tagName }))`,
        );
        assert.ok(code.length >= 1, await cdp.eval("document.body.innerText"));
        assert.equal(code[0].lang, "python");
        assert.equal(code[0].parent, "PRE");
        assert.match(code[0].text, /^def \w+\(.*\):\n {4}return /);
        const shown = await cdp.eval<string>(
          "document.querySelector('.assistant .content').textContent",
        );
        assert.ok(!shown.includes("```"), shown);
        await screenshot(cdp, "chat_page_markdown.png");

        // The settings survive a reload (localStorage).
        await cdp.send("Page.reload");
        await cdp.until(
          "document.getElementById('model')?.textContent?.includes('SmolLM2') ?? false",
          "the reloaded page",
        );
        assert.deepEqual(
          await cdp.eval(
            "['set-system', 'set-temperature', 'set-max-tokens'].map((id) => document.getElementById(id).value)",
          ),
          [system, "0", "64"],
        );

        // Reasoning: the server sends reasoning_content once a reasoning template is served;
        // no model of the test data reasons, so the browser's request is answered here with
        // such a stream (DevTools' Fetch domain), made as the server makes its chunks.
        const chunk = (delta: Record<string, unknown>) =>
          `data: ${
            JSON.stringify({
              id: "chatcmpl-1",
              object: "chat.completion.chunk",
              choices: [{ index: 0, delta, finish_reason: null }],
            })
          }\n\n`;
        const answer = '**Yes.** <img src=x onerror="window.hacked=1"> ' +
          "[click](javascript:window.hacked=2) and [docs](https://example.org/a).";
        const stream = chunk({ role: "assistant", content: "" }) +
          chunk({ reasoning_content: "The user asks *whether*" }) +
          chunk({ reasoning_content: " it works. <b>think</b>" }) +
          answer.match(/.{1,12}/g)!.map((part) => chunk({ content: part })).join("") +
          "data: [DONE]\n\n";
        await cdp.send("Fetch.enable", {
          patterns: [{ urlPattern: "*/v1/chat/completions", requestStage: "Request" }],
        });
        cdp.on("Fetch.requestPaused", (p) => {
          void cdp.send("Fetch.fulfillRequest", {
            requestId: p.requestId,
            responseCode: 200,
            responseHeaders: [{ name: "content-type", value: "text/event-stream" }],
            body: btoa(stream),
          });
        });
        await send(cdp, "Does it work?");
        await cdp.until(`${state(0)} === 'done' || ${state(0)} === 'error'`, "the reply");
        assert.equal(await cdp.eval(state(0)), "done", await cdp.eval("document.body.innerText"));
        const view = await cdp.eval<Record<string, unknown>>(`(() => {
          const a = document.querySelector('.assistant'), r = a.querySelector('details.reasoning');
          const c = a.querySelector('.content');
          return { reasoning: r?.querySelector('.reasoning-text').textContent, open: r?.open,
            summary: r?.querySelector('summary').textContent, answer: c.textContent,
            strong: c.querySelector('strong')?.textContent, em: r?.querySelector('em')?.textContent,
            elements: [...a.querySelectorAll('img, b, script')].length,
            links: [...a.querySelectorAll('a')].map((l) => l.getAttribute('href')),
            hacked: window.hacked ?? null };
        })()`);
        assert.deepEqual(view, {
          reasoning: "The user asks whether it works. <b>think</b>",
          open: false,
          summary: view.summary,
          answer: 'Yes. <img src=x onerror="window.hacked=1"> click and docs.',
          strong: "Yes.",
          em: "whether",
          elements: 0,
          links: ["https://example.org/a"],
          hacked: null,
        });
        assert.match(view.summary as string, /^Reasoning · [\d.]+ s$/);
        // No usage in that stream: the time only, no made-up token count.
        assert.match(
          await cdp.eval<string>("document.querySelector('.assistant .stats').textContent"),
          /^[\d.]+ s$/,
        );
        // The next request sends the answer back, not the reasoning.
        await send(cdp, "Thanks.");
        await cdp.until(`${state(1)} === 'done' || ${state(1)} === 'error'`, "the next reply");
        const history = sent.at(-1)!.messages as { role: string; content: string }[];
        assert.deepEqual(history.slice(1, 3), [
          { role: "user", content: "Does it work?" },
          { role: "assistant", content: answer },
        ]);
        await cdp.eval("document.querySelector('details.reasoning summary').click(), true");
        await screenshot(cdp, "chat_page_reasoning.png");
      });
    } finally {
      await server.stop();
    }
  },
});
