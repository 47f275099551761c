// The client against a real scalechat serve (and a real Redis), started by
// the tests. Run with `npm test` after `npm run build`.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, test } from "node:test";

import { Client, ScalechatError } from "../dist/index.js";
import { Server, startRedis, until } from "./harness.mjs";

const cleanups = [];
after(async () => {
  for (const f of cleanups.reverse()) await f();
});

async function server(args = []) {
  const s = await Server.start(args);
  cleanups.push(() => s.stop());
  return s;
}

function client(s, opts = {}) {
  const c = new Client({ url: s.url, backoff: { initial: 50, max: 400 }, timeout: 5000, ...opts });
  cleanups.push(() => c.close());
  return c;
}

/** Collects a client's messages by room. */
function inbox(c) {
  const rooms = new Map();
  c.on("message", (m) => {
    if (!rooms.has(m.room)) rooms.set(m.room, []);
    rooms.get(m.room).push(m);
  });
  return rooms;
}

function hs256(payload, secret) {
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const head = `${b64({ alg: "HS256", typ: "JWT" })}.${b64(payload)}`;
  return `${head}.${createHmac("sha256", secret).update(head).digest("base64url")}`;
}

test("many rooms over one connection: acknowledged sends, messages, presence, history", async () => {
  const s = await server();
  const alice = client(s, { name: "alice" });
  const bob = client(s, { name: "bob" });
  const got = inbox(bob);
  const states = [];
  alice.on("state", (e) => states.push(e.state));

  const joined = [];
  for (const room of ["r1", "r2", "r3"]) joined.push(await alice.join(room));
  assert.equal(new Set(joined.map((j) => j.connection)).size, 1, "every room on one connection");
  assert.match(alice.connection, /^[a-z0-9]+-\d+$/);
  assert.deepEqual(states, ["connecting", "open"]);
  await bob.join("r1");
  await bob.join("r3");

  const acks = [];
  for (let i = 0; i < 5; i++) {
    for (const room of ["r1", "r2", "r3"]) acks.push(await alice.send(room, `${room}-${i}`, { kind: "test" }));
  }
  for (const a of acks) {
    assert.equal(a.sender, "alice");
    assert.equal(a.kind, "test");
    assert.ok(a.server_at);
  }
  assert.deepEqual(acks.filter((a) => a.room === "r2").map((a) => a.seq), [1, 2, 3, 4, 5]);

  await until("bob's messages", 5000, () => got.get("r1")?.length === 5 && got.get("r3")?.length === 5);
  assert.deepEqual(got.get("r1").map((m) => m.text), ["r1-0", "r1-1", "r1-2", "r1-3", "r1-4"]);
  assert.equal(got.get("r2"), undefined, "bob is not in r2");

  const p = await alice.presence("r1");
  assert.equal(p.members, 2);
  assert.deepEqual(p.users, [{ user: "alice", connections: 1 }, { user: "bob", connections: 1 }]);

  const h = await bob.history("r2", { since: 1, limit: 2 });
  assert.deepEqual(h.messages.map((m) => m.seq), [2, 3]);
  assert.equal(h.seq, 5);
  const last = await bob.history("r2", { limit: 1 });
  assert.deepEqual(last.messages.map((m) => m.text), ["r2-4"]);

  await bob.leave("r1");
  await alice.send("r1", "after bob left");
  await alice.send("r3", "r3 still");
  await until("r3's message", 5000, () => got.get("r3").length === 6);
  assert.equal(got.get("r1").length, 5, "nothing of r1 after leaving it");
  assert.deepEqual(bob.joinedRooms, ["r3"]);
});

test("refusals reject the request that caused them", async () => {
  const s = await server(["--rate-limit", "1", "--rate-burst", "1", "--max-rooms-per-connection", "2"]);
  const c = client(s);
  await c.join("a");
  await assert.rejects(c.send("nowhere", "x"), { name: "ScalechatError", code: "not_joined" });
  await c.join("b");
  await assert.rejects(c.join("c"), (e) => e instanceof ScalechatError && e.code === "too_many_rooms");
  await c.send("a", "one");
  await assert.rejects(c.send("a", "two"), (e) => e instanceof ScalechatError && e.code === "rate_limited" && /per second/.test(e.message));
  assert.equal(c.state, "open", "a refusal does not close the connection");
});

test("a token says who the client is", async () => {
  const secret = "a-secret-of-at-least-16-bytes";
  const s = await server(["--auth-jwt-secret", secret]);
  const exp = Math.floor(Date.now() / 1000) + 600;
  let asked = 0;
  const c = client(s, { token: () => (asked++, hs256({ sub: "carol", exp }, secret)) });
  await c.join("t");
  const m = await c.send("t", "signed", { sender: "mallory" });
  assert.equal(m.sender, "carol", "the token's subject wins over the sender sent");
  assert.deepEqual((await c.presence("t")).users, [{ user: "carol", connections: 1 }]);
  assert.equal(asked, 1);
  const h = await c.history("t");
  assert.deepEqual(h.messages.map((x) => x.text), ["signed"]);

  const forged = client(s, { token: hs256({ sub: "carol", exp }, "another-secret-16-bytes-long") });
  const disconnects = [];
  forged.on("disconnect", (d) => disconnects.push(d));
  await assert.rejects(forged.history("t"), { code: "unauthorized" });
  forged.join("t").catch(() => {});
  await until("the refused connection", 5000, () => disconnects.length > 0);
  assert.equal(forged.state, "reconnecting");
});

// The server restarts mid-stream. With Redis the rooms' streams outlive it:
// every room resumes with since, and the consumer gets every message once,
// in order, with no gap.
test("a server restart mid-stream: every room resumes without gap or duplicate", async (t) => {
  const redis = await startRedis();
  if (!redis) return t.skip("no redis-server here");
  cleanups.push(() => redis.stop());
  const s = await server(["--redis", redis.url, "--rate-limit", "1000", "--rate-burst", "1000"]);
  const rooms = ["x", "y", "z"];
  const producer = client(s, { name: "producer" });
  const consumer = client(s, { name: "consumer" });
  const got = inbox(consumer);
  const disconnects = [];
  consumer.on("disconnect", (d) => disconnects.push(d.code));
  const gaps = [];
  consumer.on("gap", (g) => gaps.push(g));
  for (const r of rooms) {
    await producer.join(r);
    await consumer.join(r);
  }

  const total = 240;
  const acked = [];
  const sending = (async () => {
    for (let i = 0; i < total; i++) {
      const room = rooms[i % 3];
      // Sends made while the server is away wait for the next connection.
      const p = producer.send(room, `m${i}`);
      p.catch(() => {}); // settled below
      acked.push(p);
      await new Promise((r) => setTimeout(r, 8));
    }
  })();
  await until("a third of the stream", 10_000, () => [...got.values()].flat().length >= total / 3);
  await s.restart();
  await sending;
  const results = await Promise.allSettled(acked);
  const ok = results.filter((r) => r.status === "fulfilled").map((r) => r.value);
  // A send written just before the restart may have been lost with the
  // connection: it is rejected, never silently dropped.
  for (const r of results) if (r.status === "rejected") assert.equal(r.reason.code, "timeout");
  assert.ok(ok.length >= total - 10, `${ok.length} of ${total} sends acknowledged`);

  await until("every acknowledged message at the consumer", 15_000, () =>
    ok.every((m) => (got.get(m.room) ?? []).some((g) => g.seq === m.seq)));
  assert.ok(disconnects.includes(1001), `the consumer saw the restart (closes ${disconnects})`);
  assert.deepEqual(gaps, [], "no gap: the server had every missed message");
  for (const r of rooms) {
    const seqs = got.get(r).map((m) => m.seq);
    assert.deepEqual(seqs, seqs.map((_, i) => i + 1), `room ${r}: seqs 1..n, each once, in order`);
    const texts = got.get(r).map((m) => m.text);
    assert.equal(new Set(texts).size, texts.length, `room ${r}: no duplicate`);
  }
  assert.deepEqual(consumer.joinedRooms, rooms);
});

// Without Redis the restarted server starts every room anew: the client says
// so with a reset gap, then delivers the new stream from seq 1.
test("a single node's restart starts the rooms' streams anew, announced by a reset", async () => {
  const s = await server();
  const c = client(s);
  const got = inbox(c);
  const gaps = [];
  c.on("gap", (g) => gaps.push(g));
  await c.join("solo");
  await c.send("solo", "before");
  await s.restart();
  await until("the rejoin", 10_000, () => c.state === "open" && gaps.length === 1);
  const m = await c.send("solo", "after");
  assert.equal(m.seq, 1);
  assert.equal(gaps[0].reset, true);
  assert.deepEqual(got.get("solo").map((x) => `${x.seq}:${x.text}`), ["1:before", "1:after"]);
});

test("a new name reconnects under it, and every room resumes where it was", async () => {
  const s = await server();
  const c = client(s, { name: "before" });
  const got = inbox(c);
  await c.join("n1");
  await c.join("n2");
  const mine = await c.send("n1", "one");
  assert.ok(c.sentByMe(mine));
  const first = c.connection;
  c.setName("after");
  await until("the new connection", 5000, () => c.state === "open" && c.connection !== "" && c.connection !== first);
  await until("presence under the new name", 5000, async () => {
    try {
      return JSON.stringify((await c.presence("n2")).users) === JSON.stringify([{ user: "after", connections: 1 }]);
    } catch {
      return false;
    }
  });
  const m = await c.send("n1", "two");
  assert.equal(m.sender, "after");
  assert.deepEqual(got.get("n1").map((x) => `${x.seq}:${x.text}`), ["1:one", "2:two"], "nothing twice after the reconnect");
  assert.equal(c.sentByMe({ ...m, message_id: 7 }), false);
});

test("a disconnect through the server API ends the client", async () => {
  const key = "js-test-api-key-0123456";
  const s = await server(["--api-key", key]);
  const c = client(s, { name: "zed" });
  const disconnects = [];
  c.on("disconnect", (d) => disconnects.push(d));
  await c.join("z");
  const res = await fetch(`${s.http}/api/users/zed/disconnect`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}` },
    body: JSON.stringify({ reason: "go away" }),
  });
  assert.equal(res.status, 200);
  await until("the disconnect", 5000, () => disconnects.length === 1);
  assert.deepEqual(disconnects[0], { code: 4001, reason: "go away", reconnect: false });
  assert.equal(c.state, "closed");
  await assert.rejects(c.join("z2"), /closed/);
});

/** The application's backend: a real HTTP server answering scalechat's hooks with decide(body). */
async function hookBackend(decide) {
  const { createServer } = await import("node:http");
  const srv = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify(decide(JSON.parse(body))));
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise((r) => srv.close(r)));
  return `http://127.0.0.1:${srv.address().port}`;
}

test("a hook's refusals reach the client as readable errors", async () => {
  const url = await hookBackend((req) => {
    if (req.hook === "connect") return req.name === "mallory" ? { allow: false, status: 403, reason: "mallory is banned" } : { allow: true };
    if (req.hook === "join") return req.room === "vip" ? { allow: false, reason: "members only" } : { allow: true };
    return req.message.text.includes("spam") ? { allow: false, reason: "no spam here" } : { allow: true };
  });
  const s = await server(["--hook-connect", `${url}/connect`, "--hook-join", `${url}/join`, "--hook-publish", `${url}/publish`]);

  // Refused at connect: a close 4403 with the backend's reason, no reconnect.
  const banned = client(s, { name: "mallory" });
  const disconnects = [];
  banned.on("disconnect", (d) => disconnects.push(d));
  await assert.rejects(banned.join("lobby"), /mallory is banned/);
  assert.deepEqual(disconnects, [{ code: 4403, reason: "mallory is banned", reconnect: false }]);
  assert.equal(banned.state, "closed");

  // Refused join and message: the backend's reason, with the code refused.
  const c = client(s, { name: "ann" });
  await c.join("lobby");
  await assert.rejects(c.join("vip"), (e) => e instanceof ScalechatError && e.code === "refused" && e.message === "members only");
  await assert.rejects(c.send("lobby", "buy spam"), (e) => e.code === "refused" && e.message === "no spam here");
  const m = await c.send("lobby", "hello");
  assert.equal(m.text, "hello");
});
