// scalechat's browser page: several rooms over one connection, through the
// JavaScript client of clients/js (scalechat.js is its build). The rooms of
// the URL hash (#a,b,c; default "lobby") are joined at once; the side list
// counts the unread messages of the rooms not shown; the room shown lists who
// is in it, says who joins and leaves, and loads earlier messages from the
// server's history when scrolled back to its top. The client reconnects with
// backoff and resumes every room where it was, so no message is missed or
// shown twice. Every text from the network goes into the page through
// textContent, never as HTML.
import { Client, refusedByBackend } from './scalechat.js';

// Room names as the server takes them (protocol.RoomRule): ns:name is a room of namespace ns.
const ROOM_RE = /^(?!:)[A-Za-z0-9._:-]{1,64}(?<!:)$/;
const FIRST_SHOWN = 30;      // messages of a room's history shown at first
const PAGE = 30;             // earlier messages loaded per scroll back
const MAX_SHOWN = 1000;      // messages kept per room
const MAX_TEXT_BYTES = 15 * 1024; // under the server's default 16 KiB

const $ = (id) => document.getElementById(id);
const el = {
  name: $('name'), state: $('state'),
  rooms: $('rooms'), join: $('join'), room: $('room'),
  title: $('room-title'), members: $('members'), leave: $('leave'),
  scroller: $('scroller'), earlier: $('earlier'), messages: $('messages'),
  send: $('send'), text: $('text'), sendButton: $('send-button'),
  people: $('people'),
};

// A server started with --auth-jwt-secret wants a token: open the page as
// /?token=<JWT>#room and it is passed on (see docs/security.md).
const token = new URLSearchParams(location.search).get('token') || undefined;
const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
const storedName = localStorage.getItem('scalechat.name') || '';

const client = new Client({
  url: `${scheme}//${location.host}`,
  token,
  name: storedName || undefined,
  presenceEvents: true,
  backoff: { initial: 500, max: 10000 },
});

/** Per room: its list in the page and what the page knows of it. */
const rooms = new Map();
let active = '';
let countdown = 0;

function roomView(name) {
  let r = rooms.get(name);
  if (r) return r;
  const log = document.createElement('ol');
  log.className = 'log';
  log.dataset.room = name;
  log.hidden = true;
  el.messages.append(log);
  const item = document.createElement('li');
  item.className = 'room';
  item.dataset.room = name;
  const link = document.createElement('button');
  link.type = 'button';
  link.className = 'room-link';
  const label = document.createElement('span');
  label.className = 'room-name';
  label.textContent = name;
  const badge = document.createElement('span');
  badge.className = 'unread';
  badge.hidden = true;
  link.append(label, badge);
  link.addEventListener('click', () => show(name));
  item.append(link);
  el.rooms.append(item);
  r = {
    name, log, item, badge,
    unread: 0,
    baseline: 0,     // live messages are those above it: the seq at the first join
    firstJoin: true,
    replaying: 0,    // messages of the first join's replay still to come
    replay: [],      // that replay, of which the last FIRST_SHOWN are shown
    oldest: 0,       // seq of the oldest message shown (0: none)
    epoch: '',
    exhausted: false, // the server holds nothing older
    loading: false,
    presence: null,
  };
  rooms.set(name, r);
  return r;
}

// ---- rooms -------------------------------------------------------------------

async function enter(name, showIt) {
  const r = roomView(name);
  if (showIt) show(name);
  try {
    await client.join(name);
  } catch (e) {
    notice(r, 'error', `Could not join ${name}: ${e.message}`);
  }
}

function show(name) {
  const r = rooms.get(name);
  if (!r) return;
  active = name;
  for (const x of rooms.values()) {
    x.log.hidden = x !== r;
    x.item.classList.toggle('active', x === r);
    x.item.setAttribute('aria-current', x === r ? 'true' : 'false');
  }
  r.unread = 0;
  badge(r);
  el.title.textContent = name;
  document.title = `${name} · scalechat`;
  renderPeople(r);
  el.scroller.scrollTop = el.scroller.scrollHeight;
  updateSend();
  refreshPresence(name);
  writeHash();
}

async function leaveRoom(name) {
  const r = rooms.get(name);
  if (!r) return;
  rooms.delete(name);
  r.log.remove();
  r.item.remove();
  try {
    await client.leave(name);
  } catch { /* not joined yet: nothing to leave */ }
  const next = rooms.keys().next();
  if (next.done) {
    active = '';
    el.title.textContent = '';
    el.members.textContent = '';
    el.people.replaceChildren();
    document.title = 'scalechat';
    updateSend();
  } else if (active === name) {
    show(next.value);
  }
  writeHash();
}

function writeHash() {
  const names = [...rooms.keys()];
  // The room shown first, so that a reload shows it again.
  const ordered = active ? [active, ...names.filter((n) => n !== active)] : names;
  const h = ordered.join(',');
  if (decodeURIComponent(location.hash.slice(1)) !== h) history.replaceState(null, '', `#${h}`);
}

function badge(r) {
  r.badge.hidden = r.unread === 0;
  r.badge.textContent = r.unread > 99 ? '99+' : String(r.unread);
  r.badge.setAttribute('aria-label', `${r.unread} unread`);
}

// ---- presence -----------------------------------------------------------------

async function refreshPresence(name) {
  try {
    const p = await client.presence(name);
    const r = rooms.get(name);
    if (!r) return;
    r.presence = p;
    if (name === active) renderPeople(r);
  } catch { /* not joined yet: the joined event asks again */ }
}

function renderPeople(r) {
  const p = r.presence;
  if (!p) {
    el.members.textContent = '';
    el.people.replaceChildren();
    return;
  }
  el.members.textContent = p.members === 1 ? '1 member' : `${p.members} members`;
  const items = p.users.map((u) => {
    const li = document.createElement('li');
    li.className = 'person';
    li.dataset.user = u.user;
    li.textContent = u.user;
    if (u.connections > 1) {
      const n = document.createElement('span');
      n.className = 'connections';
      n.textContent = ` ×${u.connections}`;
      li.append(n);
    }
    return li;
  });
  if (p.anonymous > 0) {
    const li = document.createElement('li');
    li.className = 'person anonymous';
    li.textContent = p.anonymous === 1 ? '1 without a name' : `${p.anonymous} without a name`;
    items.push(li);
  }
  el.people.replaceChildren(...items);
}

client.on('presence_join', (e) => {
  const r = rooms.get(e.room);
  if (!r) return;
  if (e.user && e.user !== client.name) notice(r, 'join', `${e.user} joined`);
  refreshPresence(e.room);
});

client.on('presence_leave', (e) => {
  const r = rooms.get(e.room);
  if (!r) return;
  if (e.user && e.user !== client.name) notice(r, 'leave', `${e.user} left`);
  refreshPresence(e.room);
});

// ---- messages ------------------------------------------------------------------

client.on('joined', (j) => {
  const r = rooms.get(j.room);
  if (!r) return;
  if (r.firstJoin) {
    r.firstJoin = false;
    r.baseline = j.seq;
    r.replaying = j.history;
    r.replay = [];
    if (j.history === 0) r.exhausted = j.seq === 0;
  }
  r.epoch = j.epoch;
  refreshPresence(j.room);
  updateSend();
});

client.on('gap', (g) => {
  const r = rooms.get(g.room);
  if (!r) return;
  if (g.reset) {
    r.baseline = 0;
    r.epoch = '';
    r.oldest = 0;
    r.exhausted = true; // earlier messages belong to the stream that is gone
    notice(r, 'gap', 'The room started anew on the server: earlier messages are gone.');
  } else {
    notice(r, 'gap', `Some messages are no longer in the server's history: the replay starts at #${g.first_seq}.`);
  }
});

// showReplay shows the end of a room's first history; scrolling back
// fetches the rest.
function showReplay(r) {
  const shown = r.replay.slice(-FIRST_SHOWN);
  r.exhausted = shown.length === 0 || shown[0].seq <= 1;
  for (const x of shown) showMessage(r, x);
  r.replay = [];
  r.replaying = 0;
}

client.on('message', (m) => {
  const r = rooms.get(m.room);
  if (!r) return;
  if (r.replaying > 0) {
    r.replay.push(m);
    if (--r.replaying === 0) showReplay(r);
    return;
  }
  const live = m.seq > r.baseline;
  showMessage(r, m);
  if (live && m.room !== active && !client.sentByMe(m)) {
    r.unread++;
    badge(r);
  }
});

function own(m) {
  return client.sentByMe(m) || (!!m.sender && m.sender === el.name.value.trim());
}

function messageItem(m) {
  const li = document.createElement('li');
  li.className = own(m) ? 'msg own' : 'msg';
  li.dataset.seq = String(m.seq);
  const meta = document.createElement('div');
  meta.className = 'meta';
  const sender = document.createElement('span');
  sender.className = 'sender';
  sender.textContent = str(m.sender) || 'anonymous';
  const time = document.createElement('time');
  const at = new Date(str(m.server_at) || str(m.sent_at));
  if (!Number.isNaN(at.getTime())) {
    time.dateTime = at.toISOString();
    time.textContent = clock(at);
    time.title = at.toLocaleString();
  }
  meta.append(sender, time);
  const text = document.createElement('p');
  text.className = 'text';
  text.textContent = str(m.text);
  li.append(meta, text);
  return li;
}

function showMessage(r, m) {
  if (r.oldest === 0 || m.seq < r.oldest) r.oldest = m.seq;
  append(r, messageItem(m));
}

function notice(r, kind, text) {
  const li = document.createElement('li');
  li.className = `notice ${kind}`;
  li.textContent = text;
  append(r, li);
}

function atBottom() {
  const s = el.scroller;
  return s.scrollHeight - s.scrollTop - s.clientHeight < 40;
}

function append(r, li) {
  const shown = r.name === active;
  const stick = shown && atBottom();
  r.log.append(li);
  while (r.log.children.length > MAX_SHOWN) {
    r.log.firstElementChild.remove();
    r.exhausted = false;
    const first = r.log.querySelector('li.msg');
    r.oldest = first ? Number(first.dataset.seq) : 0;
  }
  if (stick) el.scroller.scrollTop = el.scroller.scrollHeight;
}

// Scrolled back to the top: the messages before the oldest shown, from the
// server's history.
async function loadEarlier() {
  const r = rooms.get(active);
  if (!r || r.loading || r.exhausted || r.oldest <= 1 || r.replaying > 0) return;
  r.loading = true;
  el.earlier.hidden = false;
  el.earlier.textContent = 'loading earlier messages…';
  try {
    const since = Math.max(0, r.oldest - 1 - PAGE);
    const h = await client.history(r.name, { since, epoch: r.epoch || undefined, limit: r.oldest - 1 - since });
    const older = h.messages.filter((m) => m.seq < r.oldest);
    if (h.gap?.reset || older.length === 0) {
      r.exhausted = true;
    } else {
      const before = el.scroller.scrollHeight;
      const frag = document.createDocumentFragment();
      for (const m of older) frag.append(messageItem(m));
      r.log.prepend(frag);
      r.oldest = older[0].seq;
      r.exhausted = r.oldest <= 1 || !!h.gap;
      // Keep what was on screen where it was.
      el.scroller.scrollTop += el.scroller.scrollHeight - before;
    }
    el.earlier.textContent = r.exhausted ? 'the beginning of what the server keeps' : '';
    el.earlier.hidden = !r.exhausted;
  } catch (e) {
    el.earlier.textContent = `could not load earlier messages: ${e.message}`;
  } finally {
    r.loading = false;
  }
}

el.scroller.addEventListener('scroll', () => {
  if (el.scroller.scrollTop < 40) loadEarlier();
});

// ---- connection state ------------------------------------------------------------

client.on('state', (e) => {
  clearInterval(countdown);
  switch (e.state) {
    case 'open':
      setState('connected', 'connected');
      break;
    case 'reconnecting': {
      const until = Date.now() + (e.delay ?? 0);
      const tick = () => {
        const s = Math.max(0, Math.ceil((until - Date.now()) / 1000));
        setState('reconnecting', `reconnecting in ${s}s`);
      };
      tick();
      countdown = setInterval(tick, 250);
      break;
    }
    case 'connecting':
      setState('connecting', 'connecting…');
      break;
    default:
      setState('disconnected', e.state === 'closed' ? 'disconnected by the server' : 'disconnected');
  }
});

client.on('disconnect', (d) => {
  // A replay cut short: what came of it is shown, the rest comes as the
  // rooms resume.
  for (const x of rooms.values()) if (x.replaying > 0) showReplay(x);
  const r = rooms.get(active);
  if (!r) return;
  if (d.code === 1001) notice(r, 'info', 'The server is restarting or moving you to another node.');
  if (refusedByBackend(d.code)) notice(r, 'error', `Refused by the application: ${d.reason || d.code}.`);
  else if (!d.reconnect) notice(r, 'error', `Disconnected by the server: ${d.reason || d.code}.`);
});

client.on('error', (e) => {
  const r = rooms.get(e.room || active);
  if (r) notice(r, 'error', `Refused: ${e.message} (${e.code})`);
});

function setState(state, text) {
  el.state.dataset.state = state;
  el.state.textContent = text;
  el.state.title = state === 'reconnecting' ? 'Click to reconnect now' : '';
  updateSend();
}

function updateSend() {
  el.sendButton.disabled = el.state.dataset.state !== 'connected' || !active;
  el.leave.disabled = !active;
}

// ---- user actions ------------------------------------------------------------------

el.join.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const name = el.room.value.trim();
  if (!ROOM_RE.test(name)) {
    el.join.reportValidity();
    return;
  }
  el.room.value = '';
  if (rooms.has(name)) show(name);
  else enter(name, true);
  el.text.focus();
});

el.leave.addEventListener('click', () => {
  if (active) leaveRoom(active);
});

el.send.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const text = el.text.value.trim();
  const name = el.name.value.trim();
  const r = rooms.get(active);
  if (!text || !r || el.sendButton.disabled) return; // the text stays in the box until connected
  if (!name) {
    notice(r, 'error', 'Enter your name first.');
    el.name.focus();
    return;
  }
  if (new TextEncoder().encode(text).length > MAX_TEXT_BYTES) {
    notice(r, 'error', `Messages are at most ${MAX_TEXT_BYTES} bytes.`);
    return;
  }
  el.text.value = '';
  try {
    await client.send(r.name, text, { sender: name, sent_at: new Date().toISOString() });
  } catch (e) {
    notice(r, 'error', `Not sent: ${e.message}`);
    if (!el.text.value) el.text.value = text;
  }
});

el.name.addEventListener('change', () => {
  const name = el.name.value.trim();
  if (!name) return;
  localStorage.setItem('scalechat.name', name);
  client.setName(name); // presence shows the new name
});

el.state.addEventListener('click', () => client.reconnect());
window.addEventListener('online', () => client.reconnect());

function roomsFromHash() {
  let h = '';
  try { h = decodeURIComponent(location.hash.slice(1)); } catch { /* bad escape */ }
  const names = [...new Set(h.split(',').map((s) => s.trim()).filter((s) => ROOM_RE.test(s)))];
  return names.length > 0 ? names : ['lobby'];
}

window.addEventListener('hashchange', () => {
  const names = roomsFromHash();
  for (const n of names) if (!rooms.has(n)) enter(n, false);
  if (names[0] !== active) show(names[0]);
});

function clock(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function str(v) { return typeof v === 'string' ? v : ''; }

el.name.value = storedName;
el.text.disabled = false;
const initial = roomsFromHash();
initial.forEach((n, i) => enter(n, i === 0));
(el.name.value ? el.text : el.name).focus();
