// scalechat client: many rooms over one WebSocket to a scalechat server, in
// browsers and in Node >= 22 (both have WebSocket and fetch built in).
//
// The wire protocol is docs/protocol.md of the scalechat repository. The
// client speaks its subprotocol "scalechat.v1", keeps for every room the
// stream (epoch) and the last seq it delivered, and after a lost connection
// reconnects with backoff and joins every room again with `since` and
// `epoch`: the server replays exactly what was missed, and anything at or
// below the last seq is dropped, so the application sees no gap and no
// duplicate while the server still holds the messages (a `gap` event says
// when it no longer does).

/** The subprotocol of the whole scalechat protocol. */
export const SUBPROTOCOL = "scalechat.v1";

/** Close code of a connection closed through the server API: no reconnect. */
export const CLOSE_DISCONNECTED = 4001;

/**
 * Whether a close code is the application's backend refusing the
 * connection (its connect hook, or the join hook of the first room): 4000
 * plus the HTTP status it chose, 4400–4499. The reason is the backend's,
 * for the user; the client does not reconnect. (4503, a backend that did
 * not answer, is retried like any other close.)
 */
export function refusedByBackend(code: number): boolean {
  return code >= 4400 && code <= 4499;
}

/** A chat message as members receive it. */
export interface ChatMessage {
  room: string;
  seq: number;
  /** When the server accepted it: RFC 3339 with microseconds, UTC. */
  server_at: string;
  text: string;
  sender?: string;
  message_id?: number;
  sent_at?: string;
  /** Any other field the sender added. */
  [field: string]: unknown;
}

/** Who is in a room, on every node of a cluster. */
export interface Presence {
  room: string;
  members: number;
  users: { user: string; connections: number }[];
  anonymous: number;
}

/** What the server says when a room is joined. */
export interface Joined {
  room: string;
  epoch: string;
  seq: number;
  members: number;
  history: number;
  /** This connection's id, for the server API's disconnect. */
  connection?: string;
}

/** Messages that can no longer be had. */
export interface Gap {
  room: string;
  since: number;
  first_seq: number;
  /** The room's stream was restarted: seqs begin again. */
  reset: boolean;
}

/** A refusal of the server, as an error frame carries it. */
export class ScalechatError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly room?: string,
  ) {
    super(message);
    this.name = "ScalechatError";
  }
}

/** The state of the connection. */
export type State = "idle" | "connecting" | "open" | "reconnecting" | "closed";

/** The client's events and what each carries. */
export interface Events {
  message: ChatMessage;
  joined: Joined;
  left: { room: string; seq: number };
  presence: Presence;
  presence_join: { room: string; user: string };
  presence_leave: { room: string; user: string };
  gap: Gap;
  error: ScalechatError;
  state: { state: State; attempt: number; delay?: number };
  /** The connection ended: code and reason of its close. */
  disconnect: { code: number; reason: string; reconnect: boolean };
}

/** Options of a Client. */
export interface Options {
  /** Server base URL: ws://host:port or wss://host:port (http(s) works too). */
  url: string;
  /** JWT, when the server requires one. A function is asked at every connection. */
  token?: string | (() => string | Promise<string>);
  /** Who the client is in presence, when no token says it. */
  name?: string;
  /** Receive presence_join and presence_leave events. */
  presenceEvents?: boolean;
  /** Reconnect backoff in ms: the first delay, the longest, and the growth. */
  backoff?: { initial?: number; max?: number; factor?: number };
  /** How long a send, join, leave or presence waits for its answer, ms. */
  timeout?: number;
  /** A WebSocket constructor other than the global one. */
  WebSocket?: typeof WebSocket;
  /** A fetch other than the global one (for history). */
  fetch?: typeof fetch;
}

type Listener<T> = (event: T) => void;

interface RoomState {
  epoch: string;
  seq: number; // last delivered; 0 before any
  joined: boolean; // on the current connection
  wanted: boolean; // the application wants to be in it
  waiters: Waiter<Joined>[];
  leaveWaiters: Waiter<{ room: string; seq: number }>[];
  presenceWaiters: Waiter<Presence>[];
}

interface Waiter<T> {
  resolve(v: T): void;
  reject(e: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

interface PendingSend {
  room: string;
  frame: string;
  written: boolean;
  waiter: Waiter<ChatMessage>;
}

/**
 * A connection to a scalechat server holding any number of rooms. It
 * connects when the first room is joined, and reconnects by itself until
 * close() or a disconnect through the server API (close code 4001).
 */
export class Client {
  private readonly opts: Required<Pick<Options, "url" | "timeout">> & Options;
  private readonly WS: typeof WebSocket;
  private ws: WebSocket | null = null;
  private st: State = "idle";
  private attempt = 0;
  private retry: ReturnType<typeof setTimeout> | undefined;
  private readonly rooms = new Map<string, RoomState>();
  private readonly listeners = new Map<keyof Events, Set<Listener<never>>>();
  private readonly sends = new Map<number, PendingSend>();
  private nextID: number;
  private readonly firstID: number;
  private opening = false; // open() is getting a token
  private conn = "";

  constructor(options: Options) {
    this.opts = { timeout: 10_000, ...options };
    const WS = options.WebSocket ?? globalThis.WebSocket;
    if (!WS) throw new Error("no WebSocket: use Node >= 22 or a browser, or pass options.WebSocket");
    this.WS = WS;
    // Ids other clients are unlikely to use: the echo of a send is matched by it.
    this.nextID = this.firstID = Math.floor(Math.random() * 2 ** 40) * 1000 + 1;
  }

  /** Whether this client sent m (its message_id is one this client gave). */
  sentByMe(m: ChatMessage): boolean {
    return typeof m.message_id === "number" && m.message_id >= this.firstID && m.message_id < this.nextID;
  }

  /** The name the client gives in presence. */
  get name(): string | undefined {
    return this.opts.name;
  }

  /**
   * Changes the name the client gives in presence and as the sender of its
   * messages; an open connection is made again under it (every room resumes
   * where it was).
   */
  setName(name: string): void {
    if (name === this.opts.name) return;
    this.opts.name = name;
    if (this.ws) this.reconnect();
  }

  /**
   * Connects again at once: a client waiting to reconnect stops waiting,
   * an open connection is replaced (rooms resume where they were).
   */
  reconnect(): void {
    if (this.st === "closed" || this.opening) return;
    clearTimeout(this.retry);
    const ws = this.ws;
    if (ws) {
      this.ws = null;
      this.onClose(1000, "reconnecting");
      ws.close(1000, "reconnecting");
      clearTimeout(this.retry); // onClose scheduled one
    }
    this.attempt = 0;
    void this.open();
  }

  /** The state of the connection. */
  get state(): State {
    return this.st;
  }

  /** This connection's id (for the server API), once a room is joined. */
  get connection(): string {
    return this.conn;
  }

  /** The rooms the client is in, or joining. */
  get joinedRooms(): string[] {
    return [...this.rooms].filter(([, r]) => r.wanted).map(([name]) => name);
  }

  /** The last seq delivered in a room, and the stream it belongs to. */
  position(room: string): { epoch: string; seq: number } | undefined {
    const r = this.rooms.get(room);
    return r && { epoch: r.epoch, seq: r.seq };
  }

  /** Calls fn for every event of type; returns what removes it. */
  on<K extends keyof Events>(type: K, fn: Listener<Events[K]>): () => void {
    let set = this.listeners.get(type);
    if (!set) this.listeners.set(type, (set = new Set()));
    set.add(fn as Listener<never>);
    return () => set.delete(fn as Listener<never>);
  }

  private emit<K extends keyof Events>(type: K, event: Events[K]): void {
    for (const fn of this.listeners.get(type) ?? []) {
      try {
        (fn as Listener<Events[K]>)(event);
      } catch (e) {
        setTimeout(() => {
          throw e; // a listener's error is the application's, reported as uncaught
        });
      }
    }
  }

  /**
   * Joins room and resolves with its joined frame once the server answers;
   * its history comes before, and its messages after, as message events.
   * A room joined before resumes where it was left off.
   */
  join(room: string): Promise<Joined> {
    if (this.st === "closed") return Promise.reject(new Error("the client is closed"));
    let r = this.rooms.get(room);
    if (!r) {
      r = { epoch: "", seq: 0, joined: false, wanted: false, waiters: [], leaveWaiters: [], presenceWaiters: [] };
      this.rooms.set(room, r);
    }
    const rs = r;
    if (rs.wanted && rs.joined) {
      // Already in: answer with what is known.
      return Promise.resolve({ room, epoch: rs.epoch, seq: rs.seq, members: 0, history: 0, connection: this.conn });
    }
    return new Promise<Joined>((resolve, reject) => {
      const w: Waiter<Joined> = this.waiter(resolve, reject, `join ${room}`, () => {
        rs.waiters = rs.waiters.filter((x) => x !== w);
      });
      rs.waiters.push(w);
      const first = !rs.wanted;
      rs.wanted = true;
      if (!first) return;
      if (this.isOpen()) {
        this.sendJoin(room, rs);
      } else if (!this.ws && !this.opening && this.st !== "reconnecting") {
        void this.open();
      }
    });
  }

  /** Leaves room; resolves once the server answered. */
  leave(room: string): Promise<{ room: string; seq: number }> {
    const r = this.rooms.get(room);
    if (!r || !r.wanted) return Promise.reject(new ScalechatError("not_joined", `not in room ${room}`, room));
    r.wanted = false;
    for (const w of r.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new ScalechatError("left", `left room ${room} before it was joined`, room));
    }
    if (!r.joined || !this.isOpen()) {
      this.rooms.delete(room);
      return Promise.resolve({ room, seq: r.seq });
    }
    return new Promise((resolve, reject) => {
      r.leaveWaiters.push(this.waiter(resolve, reject, `leave ${room}`));
      this.write({ type: "leave", room });
    });
  }

  /**
   * Sends a chat message to a joined room and resolves with it as the
   * server ordered it (its seq and server_at), or rejects with the
   * server's refusal (a ScalechatError: rate_limited, not_joined, …) or
   * when no answer comes in time. While the connection is down the message
   * waits for the next one.
   */
  send(room: string, text: string, fields: Record<string, unknown> = {}): Promise<ChatMessage> {
    const r = this.rooms.get(room);
    if (!r || !r.wanted) return Promise.reject(new ScalechatError("not_joined", `join room ${room} before sending to it`, room));
    const id = this.nextID++;
    const msg: Record<string, unknown> = { ...fields, room, text, message_id: id };
    if (this.opts.name !== undefined && msg.sender === undefined) msg.sender = this.opts.name;
    return new Promise<ChatMessage>((resolve, reject) => {
      const p: PendingSend = {
        room,
        frame: JSON.stringify(msg),
        written: false,
        waiter: this.waiter(resolve, reject, `send to ${room}`, () => this.sends.delete(id)),
      };
      this.sends.set(id, p);
      if (this.isOpen() && r.joined) this.writeSend(p);
    });
  }

  /** Asks who is in a joined room, on every node. */
  presence(room: string): Promise<Presence> {
    const r = this.rooms.get(room);
    if (!r || !r.joined || !this.isOpen()) return Promise.reject(new ScalechatError("not_joined", `not in room ${room}`, room));
    return new Promise((resolve, reject) => {
      r.presenceWaiters.push(this.waiter(resolve, reject, `presence of ${room}`));
      this.write({ type: "presence", room });
    });
  }

  /**
   * Reads a room's history over HTTP (no need to join it): the first
   * `limit` messages after `since`, or the last `limit` without it. The
   * server keeps its last --history messages of each room.
   */
  async history(room: string, opts: { since?: number; epoch?: string; limit?: number } = {}): Promise<{
    room: string;
    epoch: string;
    seq: number;
    messages: ChatMessage[];
    gap?: Gap;
  }> {
    const q = new URLSearchParams();
    if (opts.since !== undefined) q.set("since", String(opts.since));
    if (opts.epoch) q.set("epoch", opts.epoch);
    const url = `${httpBase(this.opts.url)}/rooms/${encodeURIComponent(room)}/messages?${q}`;
    const headers: Record<string, string> = {};
    const token = await this.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    const f = this.opts.fetch ?? globalThis.fetch;
    const res = await f(url, { headers });
    const body = (await res.json()) as Record<string, unknown>;
    if (!res.ok) throw new ScalechatError(String(body.code ?? res.status), String(body.message ?? res.statusText), room);
    let messages = body.messages as ChatMessage[];
    if (opts.limit !== undefined && messages.length > opts.limit) {
      messages = opts.since !== undefined ? messages.slice(0, opts.limit) : messages.slice(-opts.limit);
    }
    const gap = body.history_gap as Gap | undefined;
    return { room, epoch: body.epoch as string, seq: body.seq as number, messages, gap: gap && { ...gap, reset: !!gap.reset } };
  }

  /** Closes the connection for good; pending requests are rejected. */
  close(): void {
    if (this.st === "closed") return;
    clearTimeout(this.retry);
    const ws = this.ws;
    this.ws = null;
    this.setState("closed");
    ws?.close(1000, "bye");
    this.failAll(new Error("the client is closed"));
    for (const r of this.rooms.values()) r.joined = false;
  }

  // ---- connection -------------------------------------------------------

  private isOpen(): boolean {
    return !!this.ws && this.ws.readyState === this.WS.OPEN;
  }

  private async token(): Promise<string | undefined> {
    const t = this.opts.token;
    return typeof t === "function" ? await t() : t;
  }

  private async open(): Promise<void> {
    const wanted = this.joinedRooms;
    if (wanted.length === 0 || this.st === "closed") {
      if (this.st !== "closed") this.setState("idle");
      return;
    }
    this.setState(this.attempt > 0 ? "reconnecting" : "connecting");
    // The URL joins the first room; the others follow as join frames.
    const first = wanted[0];
    const r = this.rooms.get(first)!;
    const q = new URLSearchParams();
    if (r.epoch) {
      q.set("since", String(r.seq));
      q.set("epoch", r.epoch);
    }
    if (this.opts.name !== undefined) q.set("name", this.opts.name);
    if (this.opts.presenceEvents) q.set("presence", "1");
    let token: string | undefined;
    this.opening = true;
    try {
      token = await this.token();
    } catch (e) {
      this.emit("error", new ScalechatError("token", `could not get a token: ${(e as Error).message}`));
      this.scheduleReconnect();
      return;
    } finally {
      this.opening = false;
    }
    if (token) q.set("token", token);
    if ((this.st as State) === "closed" || this.ws) return; // closed while the token came
    const qs = q.toString();
    let ws: WebSocket;
    try {
      ws = new this.WS(`${wsBase(this.opts.url)}/ws/${encodeURIComponent(first)}${qs ? "?" + qs : ""}`, SUBPROTOCOL);
    } catch (e) {
      this.emit("error", new ScalechatError("connect", (e as Error).message));
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      if (this.ws !== ws) return;
      this.attempt = 0;
      this.setState("open");
      for (const name of this.joinedRooms) {
        if (name !== first) this.sendJoin(name, this.rooms.get(name)!);
      }
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (this.ws === ws) this.onFrame(String(ev.data));
    };
    ws.onclose = (ev: CloseEvent) => {
      if (this.ws === ws) this.onClose(ev.code, ev.reason);
    };
    // A refused handshake (401, 403, 503, …) fires error; some WebSocket
    // implementations (Node 20's) never fire close after it.
    ws.onerror = () => {
      if (this.ws === ws && ws.readyState === this.WS.CONNECTING) {
        this.onClose(1006, "the connection could not be opened");
        try {
          ws.close();
        } catch {
          // not open: nothing to close
        }
      }
    };
  }

  private onClose(code: number, reason: string): void {
    this.ws = null;
    this.conn = "";
    for (const [name, r] of this.rooms) {
      r.joined = false;
      for (const w of r.presenceWaiters.splice(0)) {
        clearTimeout(w.timer);
        w.reject(new ScalechatError("disconnected", "the connection closed before the answer came", name));
      }
      for (const w of r.leaveWaiters.splice(0)) {
        clearTimeout(w.timer);
        w.resolve({ room: name, seq: r.seq }); // left: the connection is gone
      }
    }
    for (const [name, r] of this.rooms) if (!r.wanted) this.rooms.delete(name);
    // Sends written on the lost connection may have been ordered: their
    // echo comes with the replay. The others go on the next connection.
    const reconnect = code !== CLOSE_DISCONNECTED && !refusedByBackend(code) && this.st !== "closed";
    this.emit("disconnect", { code, reason, reconnect });
    if (!reconnect) {
      if (this.st !== "closed") {
        this.setState("closed");
        this.failAll(new ScalechatError("disconnected", reason || "disconnected by the server"));
      }
      return;
    }
    this.scheduleReconnect(code === 1012 ? 0 : undefined);
  }

  private scheduleReconnect(delay?: number): void {
    if (this.st === "closed") return;
    const b = { initial: 250, max: 10_000, factor: 2, ...this.opts.backoff };
    if (delay === undefined) {
      // Full jitter: clients cut off together do not come back together.
      const ceiling = Math.min(b.max, b.initial * b.factor ** this.attempt);
      delay = Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
    }
    this.attempt++;
    this.setState("reconnecting", delay);
    clearTimeout(this.retry);
    this.retry = setTimeout(() => void this.open(), delay);
  }

  private setState(state: State, delay?: number): void {
    const changed = state !== this.st;
    this.st = state;
    if (changed || delay !== undefined) this.emit("state", { state, attempt: this.attempt, delay });
  }

  private write(v: unknown): void {
    this.ws?.send(JSON.stringify(v));
  }

  private sendJoin(room: string, r: RoomState): void {
    const f: Record<string, unknown> = { type: "join", room };
    if (r.epoch) {
      f.since = r.seq;
      f.epoch = r.epoch;
    }
    this.write(f);
  }

  private writeSend(p: PendingSend): void {
    p.written = true;
    this.ws!.send(p.frame);
  }

  private waiter<T>(resolve: (v: T) => void, reject: (e: Error) => void, what: string, onTimeout?: () => void): Waiter<T> {
    const w: Waiter<T> = {
      resolve,
      reject,
      timer: setTimeout(() => {
        onTimeout?.();
        reject(new ScalechatError("timeout", `${what}: no answer within ${this.opts.timeout} ms`));
      }, this.opts.timeout),
    };
    return w;
  }

  private failAll(e: Error): void {
    for (const r of this.rooms.values()) {
      for (const w of [...r.waiters.splice(0), ...r.presenceWaiters.splice(0), ...r.leaveWaiters.splice(0)]) {
        clearTimeout(w.timer);
        w.reject(e);
      }
    }
    for (const p of this.sends.values()) {
      clearTimeout(p.waiter.timer);
      p.waiter.reject(e);
    }
    this.sends.clear();
  }

  // ---- frames -----------------------------------------------------------

  private onFrame(data: string): void {
    let f: Record<string, unknown>;
    try {
      f = JSON.parse(data);
    } catch {
      this.emit("error", new ScalechatError("invalid_frame", "the server sent a frame that is not JSON"));
      return;
    }
    const room = typeof f.room === "string" ? f.room : "";
    const r = this.rooms.get(room);
    switch (f.type) {
      case undefined:
        this.onChat(f as unknown as ChatMessage, r);
        return;
      case "joined": {
        const j = f as unknown as Joined;
        if (j.connection) this.conn = j.connection;
        if (!r) return;
        r.joined = true;
        if (r.epoch !== j.epoch) {
          // A new stream (or the first join): its seqs are its own.
          if (r.epoch) r.seq = 0;
          r.epoch = j.epoch;
        }
        if (!r.wanted) {
          this.write({ type: "leave", room }); // left while the join was on its way
          return;
        }
        this.emit("joined", j);
        for (const w of r.waiters.splice(0)) {
          clearTimeout(w.timer);
          w.resolve(j);
        }
        for (const p of this.sends.values()) if (p.room === room && !p.written) this.writeSend(p);
        return;
      }
      case "history_gap": {
        const g = { ...(f as unknown as Gap), reset: !!f.reset };
        if (r && g.reset) r.seq = 0; // the replay that follows starts a new stream
        this.emit("gap", g);
        return;
      }
      case "left": {
        if (r) {
          r.joined = false;
          for (const w of r.leaveWaiters.splice(0)) {
            clearTimeout(w.timer);
            w.resolve({ room, seq: f.seq as number });
          }
          if (!r.wanted) this.rooms.delete(room);
        }
        this.emit("left", { room, seq: f.seq as number });
        return;
      }
      case "presence": {
        const p = f as unknown as Presence;
        const w = r?.presenceWaiters.shift();
        if (w) {
          clearTimeout(w.timer);
          w.resolve(p);
        }
        this.emit("presence", p);
        return;
      }
      case "presence_join":
      case "presence_leave":
        this.emit(f.type, { room, user: String(f.user ?? "") });
        return;
      case "error":
        this.onError(f, r);
        return;
    }
  }

  private onChat(m: ChatMessage, r: RoomState | undefined): void {
    if (!r || typeof m.seq !== "number") return;
    if (m.seq <= r.seq) return; // seen before this reconnect: a duplicate
    r.seq = m.seq;
    const id = m.message_id;
    if (typeof id === "number") {
      const p = this.sends.get(id);
      if (p && p.room === m.room && p.written) {
        this.sends.delete(id);
        clearTimeout(p.waiter.timer);
        p.waiter.resolve(m);
      }
    }
    if (r.wanted) this.emit("message", m);
  }

  private onError(f: Record<string, unknown>, r: RoomState | undefined): void {
    const room = typeof f.room === "string" ? f.room : undefined;
    const err = new ScalechatError(String(f.code), String(f.message), room);
    const id = f.message_id;
    if (typeof id === "number" && this.sends.has(id)) {
      const p = this.sends.get(id)!;
      this.sends.delete(id);
      clearTimeout(p.waiter.timer);
      p.waiter.reject(err);
      return;
    }
    if (r && r.waiters.length > 0 && !r.joined) {
      // The join was refused (forbidden, too_many_rooms, rooms_full, …).
      for (const w of r.waiters.splice(0)) {
        clearTimeout(w.timer);
        w.reject(err);
      }
      if (room) this.rooms.delete(room);
      return;
    }
    this.emit("error", err);
  }
}

/** The WebSocket base URL of a server URL. */
function wsBase(url: string): string {
  return url.replace(/^http/, "ws").replace(/\/+$/, "");
}

/** The HTTP base URL of a server URL. */
function httpBase(url: string): string {
  return url.replace(/^ws/, "http").replace(/\/+$/, "");
}
