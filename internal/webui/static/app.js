// scalechat browser client: one WebSocket to the room of the URL hash
// (#room, default "lobby"), history and live messages, and a reconnect with
// exponential backoff and jitter that resumes with ?since=<last seq>, so no
// message still in the server's history is missed or shown twice.
// docs/protocol.md describes the frames. Every text from the network goes
// into the page through textContent, never as HTML.
'use strict';

(() => {
  const ROOM_RE = /^[A-Za-z0-9._-]{1,64}$/;
  const BACKOFF = { initial: 500, max: 10000, factor: 2, jitter: 0.5 }; // ms
  const MAX_SEND_TRIES = 3;    // connections a message is written on
  const MAX_SHOWN = 1000;      // messages kept in the page
  const PRESENCE_EVERY = 15000; // ms between member counts
  const MAX_TEXT_BYTES = 15 * 1024; // under the server's default 16 KiB

  const $ = (id) => document.getElementById(id);
  const el = {
    join: $('join'), name: $('name'), room: $('room'),
    state: $('state'), members: $('members'),
    scroller: $('scroller'), messages: $('messages'),
    send: $('send'), text: $('text'), sendButton: $('send-button'),
  };

  let room = '';
  let ws = null;          // the socket in use
  let ready = false;      // joined and replayed: messages may be sent
  let lastSeq = null;     // greatest seq shown; null before the first join
  let joinedSeq = 0;      // the room's seq in the last joined frame
  let epoch = '';         // the room's stream lastSeq belongs to, from the last joined frame
  let replayLeft = 0;     // replayed messages still to come
  let attempt = 0;        // failed connections since the last good one
  let gen = 0;            // counts connections
  let nextId = 1;
  const pending = new Map(); // message_id -> {frame, sender, gen, tries}: sent, not yet echoed
  let retryTimer = 0, countdownTimer = 0, presenceTimer = 0;

  // ---- connection ----------------------------------------------------------

  // A server started with --auth-jwt-secret wants a token: open the page as
  // /?token=<JWT>#room and it is passed on (see docs/security.md).
  const token = new URLSearchParams(location.search).get('token');

  function wsURL() {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const q = new URLSearchParams();
    if (lastSeq !== null) {
      q.set('since', String(lastSeq));
      if (epoch) q.set('epoch', epoch); // a resume in another stream of the room gets history_gap
    }
    if (token) q.set('token', token);
    const qs = q.toString();
    return `${scheme}//${location.host}/ws/${encodeURIComponent(room)}${qs ? '?' + qs : ''}`;
  }

  function connect() {
    clearTimers();
    ready = false;
    const myGen = ++gen;
    setState('connecting', 'connecting…');
    const sock = new WebSocket(wsURL(), "scalechat.v1");
    ws = sock;
    sock.onmessage = (ev) => { if (ws === sock) onFrame(sock, myGen, ev.data); };
    sock.onclose = (ev) => { if (ws === sock) onClose(ev); };
    // onerror carries no detail; onclose follows it.
  }

  function onClose(ev) {
    ws = null;
    ready = false;
    clearTimers();
    setState('disconnected', 'disconnected');
    if (ev.code === 1001) {
      notice('info', 'The server is restarting or moving you to another node.');
    }
    scheduleReconnect();
  }

  function scheduleReconnect() {
    attempt++;
    let delay = Math.min(BACKOFF.max, BACKOFF.initial * BACKOFF.factor ** (attempt - 1));
    delay -= delay * BACKOFF.jitter * Math.random();
    const until = Date.now() + delay;
    const tick = () => {
      const s = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      setState('reconnecting', `reconnecting in ${s}s`);
    };
    tick();
    countdownTimer = setInterval(tick, 250);
    retryTimer = setTimeout(connect, delay);
  }

  // reconnectNow skips the wait (a click on the state, or the network back).
  function reconnectNow() {
    if (retryTimer) connect();
  }

  function leave() {
    clearTimers();
    if (ws) {
      const sock = ws;
      ws = null;
      sock.close(1000);
    }
    ready = false;
  }

  function clearTimers() {
    clearTimeout(retryTimer);
    clearInterval(countdownTimer);
    clearInterval(presenceTimer);
    retryTimer = countdownTimer = presenceTimer = 0;
  }

  // ---- frames from the server ----------------------------------------------

  function onFrame(sock, myGen, data) {
    let f;
    try {
      f = JSON.parse(data);
    } catch {
      return; // not JSON: nothing a server of this protocol sends
    }
    if (f === null || typeof f !== 'object') return;
    if (f.type === undefined) {
      onChat(sock, myGen, f);
      return;
    }
    switch (f.type) {
      case 'joined':
        if (f.room !== room) return;
        joinedSeq = num(f.seq);
        replayLeft = num(f.history);
        if (typeof f.epoch === 'string') epoch = f.epoch;
        if (lastSeq === null) lastSeq = Math.max(0, joinedSeq - replayLeft); // older ones are not for us
        setMembers(f.members);
        if (replayLeft === 0) onReplayed(sock, myGen);
        break;
      case 'history_gap': {
        if (f.room !== room) return;
        const reset = f.reset === true || num(f.since) > joinedSeq;
        const first = num(f.first_seq);
        lastSeq = first > 0 ? first - 1 : joinedSeq;
        notice('gap', reset
          ? 'The room started anew on the server: earlier messages are gone.'
          : `Some messages are no longer in the server's history: the replay starts at #${first || joinedSeq + 1}.`);
        break;
      }
      case 'presence':
        if (f.room === room) setMembers(f.members);
        break;
      case 'error':
        notice('error', `Refused: ${str(f.message)} (${str(f.code)})`);
        if (typeof f.message_id === 'number') pending.delete(f.message_id);
        break;
      default:
        // left, and frames of newer servers: nothing to show
    }
  }

  function onChat(sock, myGen, m) {
    if (m.room !== room) return;
    const seq = num(m.seq);
    const replayEnds = replayLeft > 0 && --replayLeft === 0;
    if (lastSeq === null || seq > lastSeq) {
      lastSeq = seq;
      let own = str(m.sender) === el.name.value.trim();
      const p = pending.get(m.message_id);
      if (p && p.sender === str(m.sender)) {
        pending.delete(m.message_id);
        own = true;
      }
      showMessage(m, seq, own);
    } // else: already shown
    if (replayEnds) onReplayed(sock, myGen);
  }

  // onReplayed: the room's missed messages are in; write the messages the
  // last connection left unconfirmed (a replay holding their echo has
  // removed them from pending) and let the user send.
  function onReplayed(sock, myGen) {
    if (ready || myGen !== gen) return;
    for (const [id, p] of pending) {
      if (p.gen === myGen) continue;
      if (p.tries >= MAX_SEND_TRIES) {
        pending.delete(id);
        notice('error', 'A message could not be delivered.');
        continue;
      }
      p.gen = myGen;
      p.tries++;
      sock.send(p.frame);
    }
    ready = true;
    attempt = 0;
    setState('connected', 'connected');
    presenceTimer = setInterval(() => {
      if (ready && ws === sock) sock.send(JSON.stringify({ type: 'presence', room }));
    }, PRESENCE_EVERY);
  }

  // ---- page ----------------------------------------------------------------

  function setState(state, text) {
    el.state.dataset.state = state;
    el.state.textContent = text;
    el.state.title = state === 'reconnecting' ? 'Click to reconnect now' : '';
    el.sendButton.disabled = state !== 'connected';
  }

  function setMembers(n) {
    n = num(n);
    el.members.textContent = n === 1 ? '1 member' : `${n} members`;
  }

  function atBottom() {
    const s = el.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 40;
  }

  function append(li) {
    const stick = atBottom();
    el.messages.append(li);
    while (el.messages.children.length > MAX_SHOWN) el.messages.firstElementChild.remove();
    if (stick) el.scroller.scrollTop = el.scroller.scrollHeight;
  }

  function showMessage(m, seq, own) {
    const li = document.createElement('li');
    li.className = own ? 'msg own' : 'msg';
    li.dataset.seq = String(seq);
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
    append(li);
  }

  function notice(kind, text) {
    const li = document.createElement('li');
    li.className = `notice ${kind}`;
    li.textContent = text;
    append(li);
  }

  function clock(d) {
    const p = (n) => String(n).padStart(2, '0');
    return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  }

  function num(v) { return typeof v === 'number' && Number.isFinite(v) ? v : 0; }
  function str(v) { return typeof v === 'string' ? v : ''; }

  // ---- user actions ----------------------------------------------------------

  function roomFromHash() {
    let h = '';
    try { h = decodeURIComponent(location.hash.slice(1)); } catch { /* bad escape */ }
    return ROOM_RE.test(h) ? h : 'lobby';
  }

  function enter(newRoom) {
    leave();
    room = newRoom;
    lastSeq = null;
    epoch = '';
    joinedSeq = replayLeft = attempt = 0;
    pending.clear();
    el.messages.replaceChildren();
    el.members.textContent = '';
    el.room.value = room;
    document.title = `${room} · scalechat`;
    connect();
  }

  el.join.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const name = el.name.value.trim();
    const r = el.room.value.trim();
    if (!name || !ROOM_RE.test(r)) {
      el.join.reportValidity();
      return;
    }
    localStorage.setItem('scalechat.name', name);
    if (r !== room) {
      location.hash = r; // hashchange enters it
    }
    el.text.focus();
  });

  window.addEventListener('hashchange', () => {
    const r = roomFromHash();
    if (r !== room) enter(r);
  });

  el.send.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = el.text.value.trim();
    const name = el.name.value.trim();
    if (!text) return;
    if (!name) {
      notice('error', 'Enter your name first.');
      el.name.focus();
      return;
    }
    if (!ready || !ws) return; // the text stays in the box until connected
    if (new TextEncoder().encode(text).length > MAX_TEXT_BYTES) {
      notice('error', `Messages are at most ${MAX_TEXT_BYTES} bytes.`);
      return;
    }
    const id = nextId++;
    const frame = JSON.stringify({ message_id: id, text, sender: name, sent_at: new Date().toISOString(), room });
    pending.set(id, { frame, sender: name, gen, tries: 1 });
    ws.send(frame);
    el.text.value = '';
  });

  el.name.addEventListener('change', () => {
    const name = el.name.value.trim();
    if (name) localStorage.setItem('scalechat.name', name);
  });

  el.state.addEventListener('click', reconnectNow);
  window.addEventListener('online', reconnectNow);

  el.name.value = localStorage.getItem('scalechat.name') || '';
  el.text.disabled = false;
  enter(roomFromHash());
  (el.name.value ? el.text : el.name).focus();
})();
