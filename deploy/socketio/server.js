// A Socket.IO 4 chat server with rooms: the convention scalechat's load
// tester and audit speak with --protocol socketio (docs/loadtest.md).
//
//   emit("join", room, ack)   the socket joins room; ack() once it is in it
//   emit("chat", message)     message = {room, ...}: the server emits
//                             "chat" with it to every socket in
//                             message.room, the sender included
//
//   node server.js [--host 127.0.0.1] [--port 3000] [--namespace /]
//                  [--ping-interval 25000] [--ping-timeout 20000]
//
// It prints "listening HOST:PORT" once it accepts connections (--port 0
// picks a free port) and stops on SIGTERM or SIGINT.
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { Server } from "socket.io";

const { values: opt } = parseArgs({
  options: {
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "3000" },
    namespace: { type: "string", default: "/" },
    "ping-interval": { type: "string", default: "25000" },
    "ping-timeout": { type: "string", default: "20000" },
  },
});

const http = createServer();
const io = new Server(http, {
  pingInterval: Number(opt["ping-interval"]),
  pingTimeout: Number(opt["ping-timeout"]),
});

// The two handlers a Socket.IO app needs to be load tested by scalechat.
io.of(opt.namespace).on("connection", (socket) => {
  socket.on("join", (room, ack) => {
    socket.join(room);
    if (typeof ack === "function") ack();
  });
  socket.on("chat", (message) => {
    if (message && typeof message.room === "string") {
      io.of(opt.namespace).to(message.room).emit("chat", message);
    }
  });
});

http.listen(Number(opt.port), opt.host, () => {
  const a = http.address();
  console.log(`listening ${a.address}:${a.port}`);
});

for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => io.close(() => process.exit(0)));
}
