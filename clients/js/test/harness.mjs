// Starts real processes for the tests: scalechat serve (the binary of
// $SCALECHAT_BIN, or one built from this repository) and redis-server.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

let built;
/** The scalechat binary: $SCALECHAT_BIN, or built once from the repository. */
export function binary() {
  if (process.env.SCALECHAT_BIN) return process.env.SCALECHAT_BIN;
  if (!built) {
    built = join(mkdtempSync(join(tmpdir(), "scalechat-js-")), "scalechat");
    execFileSync("go", ["build", "-o", built, "./cmd/scalechat"], { cwd: repo, stdio: "inherit" });
  }
  return built;
}

/** A free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function until(what, ms, check) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A running scalechat serve; stop() ends it with SIGTERM (graceful). */
export class Server {
  constructor(port, args) {
    this.port = port;
    this.args = args;
    this.url = `ws://127.0.0.1:${port}`;
    this.http = `http://127.0.0.1:${port}`;
  }

  static async start(args = [], port) {
    const s = new Server(port ?? (await freePort()), args);
    await s.run();
    return s;
  }

  async run() {
    this.stderr = "";
    this.proc = spawn(binary(), ["serve", "--addr", `127.0.0.1:${this.port}`, "--metrics-addr", "", "--log-level", "warn", ...this.args], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.proc.stderr.on("data", (d) => (this.stderr += d));
    this.exited = new Promise((r) => this.proc.once("exit", r));
    await until(`scalechat on port ${this.port}`, 20_000, async () => {
      if (this.proc.exitCode !== null) throw new Error(`scalechat serve exited: ${this.stderr}`);
      try {
        return (await fetch(`${this.http}/readyz`)).ok;
      } catch {
        return false;
      }
    });
  }

  async stop() {
    if (this.proc.exitCode === null) this.proc.kill("SIGTERM");
    await this.exited;
  }

  /** Stops the server and starts it again on the same port. */
  async restart() {
    await this.stop();
    await this.run();
  }
}

/** A redis-server on a free port, or null when there is none here (outside CI). */
export async function startRedis() {
  try {
    execFileSync("redis-server", ["--version"], { stdio: "ignore" });
  } catch {
    if (process.env.CI) throw new Error("redis-server is not installed (.ci/run installs it)");
    return null;
  }
  const port = await freePort();
  const proc = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  const exited = new Promise((r) => proc.once("exit", r));
  await until(`redis on port ${port}`, 10_000, () => new Promise((resolve) => {
    const c = connect(port, "127.0.0.1");
    c.once("data", (d) => { c.destroy(); resolve(String(d).startsWith("+PONG")); });
    c.once("error", () => resolve(false));
    c.write("PING\r\n");
  }));
  return {
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      proc.kill("SIGKILL");
      await exited;
    },
  };
}

export { until };
