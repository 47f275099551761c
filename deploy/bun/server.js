// A chat server on Bun's WebSocket pub/sub (uWebSockets underneath): the
// bar for one scalechat node in scenarios/bun.yaml (scalechat bench
// compare; docs/benchmarks.md). It speaks enough of scalechat's protocol
// (docs/protocol.md) for `scalechat loadtest --protocol scalechat`, and
// does per chat message the work scalechat serve does on its hot path:
//
//   parse the frame as JSON; check it (an object, "text" a string,
//   "message_id" an unsigned integer, "sender" a string of at most 64
//   bytes, "sent_at" a string, "room" the connection's room); stamp the
//   room's next seq and server_at; encode it again; publish it to the
//   room's topic (every member, the sender included).
//
// What it does:
//   GET /ws/{room}   upgrade; the connection subscribes to topic {room}.
//                    Room names as scalechat's: 1-64 of [A-Za-z0-9._-],
//                    else HTTP 400. A client offering the subprotocol
//                    scalechat.v1 gets it back, a "joined" frame with the
//                    room and its latest seq, and "error" frames for what
//                    it sends wrong; a client offering none gets chat
//                    frames only and is closed (1007) on a bad frame.
//   GET /readyz      200 once listening.
//
// What it does not do (so its figures are a floor for the same work, not
// for scalechat's features): no history or replay, no resume (since,
// epoch), no join/leave/presence frames (refused as unknown_type), one
// room per connection, no rate limits, tokens, origins or connection caps,
// no cluster. server_at has milliseconds (JavaScript's Date), not µs.
//
//   bun server.js [--host 127.0.0.1] [--port 8080] [--tls-cert FILE --tls-key FILE]
//
// With --tls-cert and --tls-key it serves wss:// (Bun.serve's tls option),
// as scenarios/tls.yaml measures.
// It prints "listening HOST:PORT" once it accepts connections (--port 0
// picks a free port) and stops on SIGTERM or SIGINT.
import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  options: {
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "8080" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
  },
});

const subprotocol = "scalechat.v1";
const roomName = /^[A-Za-z0-9._-]{1,64}$/;
const owned = new Set(["type", "seq", "server_at", "room"]);
const seqs = new Map(); // room -> latest seq

// refuse answers a bad frame: an error frame for a subprotocol client, a
// close with the code scalechat would use for a five-field one.
function refuse(ws, code, message, close) {
  if (ws.data.full) {
    ws.send(JSON.stringify({ type: "error", code, message }));
  } else {
    ws.close(close, message);
  }
}

// check returns why m is not a chat message scalechat accepts, or "".
function check(m, room) {
  if (m === null || typeof m !== "object" || Array.isArray(m)) return ["invalid_json", "not a JSON object"];
  if (m.type !== undefined && m.type !== "message") return ["unknown_type", "unknown type"];
  if (typeof m.text !== "string") return ["invalid_message", "text must be a string"];
  const id = m.message_id;
  if (id !== undefined && !(Number.isInteger(id) && id >= 0)) return ["invalid_message", "message_id must be an unsigned integer"];
  if (m.sender !== undefined && (typeof m.sender !== "string" || Buffer.byteLength(m.sender) > 64)) {
    return ["invalid_message", "sender must be a string of at most 64 bytes"];
  }
  if (m.sent_at !== undefined && typeof m.sent_at !== "string") return ["invalid_message", "sent_at must be a string"];
  if (m.room !== undefined && m.room !== room) {
    return roomName.test(String(m.room)) ? ["not_joined", "not in that room"] : ["invalid_room", "invalid room name"];
  }
  return null;
}

const tls = opt["tls-cert"] ? { cert: Bun.file(opt["tls-cert"]), key: Bun.file(opt["tls-key"]) } : undefined;

const server = Bun.serve({
  hostname: opt.host,
  port: Number(opt.port),
  tls,
  fetch(req, server) {
    const path = new URL(req.url).pathname;
    if (path === "/readyz") return new Response("ok\n");
    if (!path.startsWith("/ws/")) return new Response("not found\n", { status: 404 });
    const room = path.slice(4);
    if (!roomName.test(room)) return new Response("invalid room name\n", { status: 400 });
    const offered = (req.headers.get("sec-websocket-protocol") || "").split(",").map((s) => s.trim());
    const full = offered.includes(subprotocol);
    const headers = full ? { "Sec-WebSocket-Protocol": subprotocol } : undefined;
    if (server.upgrade(req, { data: { room, full }, headers })) return undefined;
    return new Response("expected a WebSocket upgrade\n", { status: 426 });
  },
  websocket: {
    open(ws) {
      const room = ws.data.room;
      ws.subscribe(room);
      if (ws.data.full) {
        ws.send(JSON.stringify({ type: "joined", room, seq: seqs.get(room) || 0, history: 0 }));
      }
    },
    message(ws, raw) {
      if (typeof raw !== "string") {
        ws.close(1003, "binary frames are not accepted");
        return;
      }
      let m;
      try {
        m = JSON.parse(raw);
      } catch {
        refuse(ws, "invalid_json", "not JSON", 1007);
        return;
      }
      const room = ws.data.room;
      const bad = check(m, room);
      if (bad) {
        refuse(ws, bad[0], bad[1], bad[0] === "not_joined" ? 1008 : 1007);
        return;
      }
      const seq = (seqs.get(room) || 0) + 1;
      seqs.set(room, seq);
      // The server's fields first, then the client's as sent (as scalechat).
      const out = { room, seq, server_at: new Date().toISOString() };
      for (const k in m) if (!owned.has(k)) out[k] = m[k];
      server.publish(room, JSON.stringify(out));
    },
  },
});

console.log(`listening ${server.hostname}:${server.port}`);

for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => {
    server.stop(true);
    process.exit(0);
  });
}
