// Runs the tests with node's test runner. Node 22 has WebSocket built in;
// Node 20 (10 and later) has the same implementation behind a flag.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const major = Number(process.versions.node.split(".")[0]);
const flags = major < 22 ? ["--experimental-websocket"] : [];
const files = readdirSync(join(root, "test")).filter((f) => f.endsWith(".test.mjs")).map((f) => join(root, "test", f));
const r = spawnSync(process.execPath, [...flags, "--test", "--test-concurrency=1", ...files], { stdio: "inherit", cwd: root });
process.exit(r.status ?? 1);
