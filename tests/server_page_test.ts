/**
 * The built-in chat page in headless Chromium (Debian's `chromium`, installed
 * with apt-get when missing), driven over the DevTools protocol: it loads
 * from the server with no other origin, streams a reply, stops one midway,
 * keeps the conversation for the next message, shows tokens/s, and a
 * screenshot is saved (its path is printed).
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { smollmQ8, startServer } from "./_server.ts";

function findChromium(): string | undefined {
  return ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
}

async function ensureChromium(): Promise<string> {
  let path = findChromium();
  if (path !== undefined) return path;
  const env = { DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [["update"], ["install", "-y", "--no-install-recommends", "chromium"]]) {
    const out = await new Deno.Command("apt-get", { args, env, stdout: "null", stderr: "piped" })
      .output();
    if (!out.success) {
      throw new Error(`apt-get ${args[0]} failed: ${new TextDecoder().decode(out.stderr)}`);
    }
  }
  path = findChromium();
  if (path === undefined) {
    throw new Error("chromium is not installed after apt-get install chromium");
  }
  return path;
}

/** A minimal DevTools protocol session over the page's WebSocket. */
class Cdp {
  #next = 1;
  readonly #waiting = new Map<number, (m: { result?: unknown; error?: unknown }) => void>();
  private constructor(readonly ws: WebSocket) {
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.id !== undefined) this.#waiting.get(m.id)?.(m);
    };
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

Deno.test({
  name:
    "serve: the chat page streams, stops, keeps the conversation, shows tok/s (headless Chromium)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const chromium = await ensureChromium();
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
      await cdp.until(
        "document.getElementById('model')?.textContent?.includes('smollm') ?? false",
        "the page to load its model name",
      );

      const send = (text: string) =>
        cdp.eval(
          `(() => { const i = document.getElementById('input'); i.value = ${JSON.stringify(text)};
          document.getElementById('form').requestSubmit(); return true; })()`,
        );
      const state = (n: number) =>
        `document.querySelectorAll('.assistant')[${n}]?.getAttribute('data-state')`;

      // 1: stop a reply midway.
      await send("Tell me a long story.");
      await cdp.until(
        `(document.querySelectorAll('.assistant')[0]?.textContent ?? '').length > 10`,
        "streamed text",
      );
      assert.equal(await cdp.eval(state(0)), "streaming");
      await cdp.eval("document.getElementById('stop').click(), true");
      await cdp.until(`${state(0)} === 'stopped'`, "the reply to stop");
      assert.equal(await cdp.eval("document.getElementById('stop').disabled"), true);

      // 2: the next message streams to the end; the conversation is kept.
      await send("Thanks. Now a short one.");
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
        "document.querySelectorAll('.assistant')[1].firstChild.textContent",
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

      const shot = await cdp.send("Page.captureScreenshot", { format: "png" });
      const file = join(
        Deno.env.get("DOTLLM_SCREENSHOT_DIR") ?? Deno.makeTempDirSync(),
        "chat_page.png",
      );
      Deno.writeFileSync(file, Uint8Array.from(atob(shot.data as string), (c) => c.charCodeAt(0)));
      console.log(`screenshot: ${file}`);
      cdp.ws.close();
    } finally {
      try {
        browser.kill("SIGKILL");
      } catch { /* gone */ }
      await browser.status;
      await server.stop();
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    }
  },
});
