// Builds the client: TypeScript to dist/ (ES module and declarations), and
// the copy that scalechat's browser page loads (internal/webui/static), so
// that the Go binary embeds the very client this package ships.
import { execFileSync } from "node:child_process";
import { copyFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
rmSync(join(root, "dist"), { recursive: true, force: true });
execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(root, "tsconfig.json")], {
  stdio: "inherit",
});
copyFileSync(join(root, "dist", "index.js"), join(root, "..", "..", "internal", "webui", "static", "scalechat.js"));
console.log("built dist/ and internal/webui/static/scalechat.js");
