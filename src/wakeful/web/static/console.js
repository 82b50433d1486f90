"use strict";
const csrf = document.querySelector('meta[name="csrf-token"]').content;
const session = document.querySelector('meta[name="session"]').content;
const $ = (id) => document.getElementById(id);
const q = "?session=" + encodeURIComponent(session);
let lastSeen = null; // the newest message of the agent shown, for the read state
let earlier = null; // the id to page back from ("Load earlier messages"), null when none
let lastPresence = 0; // when the page last told the runtime the user is here (ms)
const PRESENCE_EVERY_MS = 30000;
const INLINE_IMAGES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function button(label, onClick, cls) {
  const b = el("button", label, cls);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(Object.assign({ session: session }, body || {})),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) showNote(answer.error || ("The console refused: " + response.status));
  else if (answer.text) showNote(answer.text);
  refreshState();
  return answer;
}

function showNote(text) {
  $("chat").append(el("li", text, "muted"));
}

function renderCard(message, card) {
  const box = el("div", null, "card");
  if (card.title) box.append(el("h3", card.title));
  if (card.text) box.append(el("p", card.text));
  const fields = Array.isArray(card.fields) ? card.fields
    : Object.entries(card.fields || {}).map(([label, value]) => ({ label, value }));
  if (fields.length) {
    const dl = el("dl");
    for (const f of fields) { dl.append(el("dt", f.label ?? f.name)); dl.append(el("dd", f.value)); }
    box.append(dl);
  }
  const items = card.items || card.list || [];
  if (items.length) {
    const ul = el("ul");
    for (const item of items) ul.append(el("li", typeof item === "string" ? item : JSON.stringify(item)));
    box.append(ul);
  }
  for (const path of card.images || []) box.append(el("div", "🖼 " + path, "muted"));
  if (card.html) {
    const frame = document.createElement("iframe");
    frame.setAttribute("sandbox", "");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.title = card.title || "card";
    frame.srcdoc = card.html;
    box.append(frame);
  }
  for (const action of card.actions || card.buttons || []) {
    box.append(button(action.label || action.id, () => post("/api/action", {
      card_id: message.id || "", action_id: action.id, message_id: message.id || "",
    })));
  }
  return box;
}

function renderAttachments(message) {
  // Links to the console's own copies (/api/attachments/<id>/<n>); images as thumbnails.
  const box = el("div", null, "attachments");
  (message.attachments || []).forEach((a, index) => {
    const link = el("a", null, "attachment");
    link.href = "/api/attachments/" + encodeURIComponent(message.id) + "/" + index;
    if (INLINE_IMAGES.includes(a.type)) {
      link.target = "_blank";
      link.rel = "noopener";
      const img = el("img", null, "thumbnail");
      img.src = link.href;
      img.alt = a.name;
      img.title = a.name;
      link.append(img);
    } else {
      link.setAttribute("download", a.name);
      link.textContent = "📎 " + a.name + " (" + Math.max(1, Math.round(a.size / 1024)) + " KB)";
    }
    box.append(link);
  });
  return box;
}

// The deliveries each message's chips show, by channel (see renderDeliveries).
const deliveriesShown = new WeakMap();

function renderDeliveries(item, deliveries) {
  // Where the message went: "console: read · telegram:me: failed" (the error on hover).
  // Answers and live updates race (an answer read from the store before a copy was marked read
  // can arrive after the live update saying it was), so each channel keeps the newest record
  // it was told of: one last updated before the record shown is out of date and ignored.
  const newest = deliveriesShown.get(item) || new Map();
  for (const d of deliveries || []) {
    const shownNow = newest.get(d.channel);
    if (!shownNow || !(d.updated_at < shownNow.updated_at)) newest.set(d.channel, d);
  }
  deliveriesShown.set(item, newest);
  let box = item.querySelector(".deliveries");
  if (!box) { box = el("div", null, "deliveries"); item.append(box); }
  box.replaceChildren();
  for (const d of newest.values()) {
    const span = el("span", d.channel + ": " + d.state, "delivery " + d.state);
    span.dataset.channel = d.channel;
    if (d.error) span.title = d.error;
    box.append(span);
  }
}

function showRead(item, read) {
  item.classList.toggle("unread", !read);
  const mark = item.querySelector(".unread-mark");
  if (!read && !mark) item.querySelector(".who").after(el("span", "unread", "unread-mark"));
  if (read && mark) mark.remove();
}

function renderMessage(message) {
  const item = el("li", null, message.role + " " + (message.urgency || ""));
  if (message.id) item.dataset.id = message.id;
  item.append(el("span", message.role === "user" ? "you" : "wakeful", "who"));
  item.append(el("span", message.text, "text"));
  if (message.card) item.append(renderCard(message, message.card));
  if (message.id && (message.attachments || []).length) item.append(renderAttachments(message));
  if (message.role === "agent" && message.id) {
    showRead(item, message.read === true);
    renderDeliveries(item, message.deliveries);
  }
  return item;
}

function addMessage(message) {
  if (message.id && shown(message.id)) return; // from the stream and from a catch-up
  const item = renderMessage(message);
  $("chat").append(item);
  item.scrollIntoView({ block: "end" });
  if (message.role === "agent" && message.id) { lastSeen = message.id; markRead(); }
}

function shown(id) {
  return document.querySelector('#chat li[data-id="' + CSS.escape(id) + '"]');
}

async function refreshMessage(id) {
  // A message's read state and deliveries now (a channel may have delivered or failed since).
  const item = shown(id);
  if (!item) return;
  const response = await fetch("/api/messages/" + encodeURIComponent(id));
  if (!response.ok) return;
  const message = await response.json();
  // Read is for good: an answer from before the message was read leaves its mark off.
  if (message.read) showRead(item, true);
  renderDeliveries(item, message.deliveries);
}

function showEarlierControl() {
  $("load-earlier").hidden = !earlier;
}

async function loadEarlier() {
  if (!earlier) return;
  const response = await fetch("/api/messages" + q + "&before=" + encodeURIComponent(earlier));
  if (!response.ok) return;
  const page = await response.json();
  const chat = $("chat");
  const height = chat.scrollHeight;
  const first = chat.firstChild;
  for (const m of page.messages) chat.insertBefore(renderMessage(m), first);
  chat.scrollTop += chat.scrollHeight - height; // the messages read stay where they were
  earlier = page.earlier;
  showEarlierControl();
}

function touchPresence() {
  // Tells the runtime the person is here, at most every 30 s, so it need not reach further.
  if (document.visibilityState !== "visible" || Date.now() - lastPresence < PRESENCE_EVERY_MS) return;
  lastPresence = Date.now();
  fetch("/api/presence", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify({ session: session }),
  });
}

async function markRead() {
  // Read means seen: only while the page is in front of the person.
  if (!lastSeen || document.visibilityState !== "visible") return;
  const response = await fetch("/api/read", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify({ session: session, through: lastSeen }),
  });
  if (!response.ok) return;
  const answer = await response.json();
  showUnread(answer.unread);
  // Also told by the event stream, but this page may have read them before it was connected.
  for (const id of answer.read) {
    const item = shown(id);
    if (item) { showRead(item, true); refreshMessage(id); }
  }
}

function showUnread(count) {
  $("unread").hidden = !count;
  $("unread").textContent = count + " unread";
}

function fill(id, rows, render, empty) {
  const list = $(id);
  list.replaceChildren();
  if (!rows.length && empty) list.append(el("li", empty, "muted"));
  for (const row of rows) list.append(render(row));
}

function renderState(state) {
  showUnread(state.unread);
  fill("approvals", state.approvals, (r) => {
    const li = el("li", null, "approval");
    li.dataset.id = r.id;
    li.append(el("strong", r.tool + " "), el("span", r.summary), el("div", r.reasons.join(" "), "muted"));
    const reason = el("input");
    reason.placeholder = "why (optional)";
    li.append(button("Approve", () => post("/api/approvals/" + r.id, { approve: true, reason: reason.value })));
    li.append(reason);
    li.append(button("Deny", () => post("/api/approvals/" + r.id, { approve: false, reason: reason.value }), "danger"));
    return li;
  }, "Nothing waits for you.");
  fill("inputs", state.inputs, (r) => {
    const li = el("li", null, "input-request");
    li.append(el("div", r.question));
    const answer = el("input");
    answer.placeholder = "field=value …";
    li.append(answer);
    li.append(button("Answer", () => post("/api/inputs/" + r.id, { answer: answer.value })));
    li.append(button("Decline", () => post("/api/inputs/" + r.id, { decline: true }), "danger"));
    return li;
  });
  fill("tasks", state.tasks, (t) => {
    const percent = t.percent === null ? "" : " " + Math.round(t.percent) + "%";
    const li = el("li", t.id + " " + t.state + percent + " " + t.tool + " " + t.description + " (" + t.seconds + " s)");
    if (t.state === "running") li.append(button("Cancel", () => post("/api/tasks/" + t.id + "/cancel")));
    return li;
  }, "No tasks.");
  fill("timers", state.timers, (t) => {
    const li = el("li", t.id + " " + t.kind + " " + (t.next_fire || "") + " " + t.note);
    li.append(button("Cancel", () => post("/api/timers/" + t.id + "/cancel")));
    return li;
  }, "No timers.");
  fill("channels", Object.entries(state.channels), ([name, h]) =>
    el("li", name + ": " + h.state + (h.detail ? " — " + h.detail : "")), "No channels.");
  const audit = $("audit");
  audit.replaceChildren();
  const head = el("tr");
  for (const h of ["tool", "calls", "errors", "denied", "p50 ms"]) head.append(el("th", h));
  audit.append(head);
  for (const [tool, s] of Object.entries(state.audit)) {
    const tr = el("tr");
    for (const v of [tool, s.calls, s.errors, s.denied, s.p50_ms === null ? "" : Math.round(s.p50_ms)]) tr.append(el("td", v));
    audit.append(tr);
  }
}

async function refreshState() {
  const response = await fetch("/api/state" + q);
  if (response.ok) renderState(await response.json());
}

async function showTrajectory() {
  const response = await fetch("/api/trajectory" + q);
  if (!response.ok) return;
  fill("trajectory", await response.json(), (m) => {
    const li = el("li", null, "role-" + m.role);
    li.append(el("strong", m.role + (m.name ? " " + m.name : "") + (m.status ? " [" + m.status + "]" : "") + " "));
    if (m.mark) li.append(el("span", "⟨" + m.mark + "⟩ ", "mark"));
    li.append(el("span", m.text));
    for (const c of m.tool_calls || []) li.append(el("div", "→ " + c.name + " " + c.arguments, "muted"));
    return li;
  }, "Nothing yet.");
}

async function catchUp() {
  // What was sent while the stream was down, and what became of the messages shown meanwhile
  // (delivered, read): their live updates were lost with the stream. Read is for good, and an
  // older delivery record than the one shown is ignored (renderDeliveries).
  const response = await fetch("/api/messages" + q);
  if (!response.ok) return;
  for (const m of (await response.json()).messages) {
    if (m.role !== "agent" || !m.id) continue;
    const item = shown(m.id);
    if (!item) { addMessage(m); continue; }
    if (m.read) showRead(item, true);
    renderDeliveries(item, m.deliveries);
  }
  refreshState();
}

function onRead(e) {
  // Read here or elsewhere (an IM reply): their marks go, their deliveries show where.
  for (const id of JSON.parse(e.data).ids) {
    const item = shown(id);
    if (item) { showRead(item, true); refreshMessage(id); }
  }
  refreshState();
}

async function start() {
  const response = await fetch("/api/messages" + q);
  if (response.ok) {
    const page = await response.json();
    for (const m of page.messages) addMessage(m);
    earlier = page.earlier;
  }
  showEarlierControl();
  $("load-earlier").addEventListener("click", loadEarlier);
  const events = new EventSource("/events" + q);
  events.addEventListener("open", () => {
    $("live").textContent = "live";
    // What was sent between the first fetch and now, or while the stream was down.
    catchUp();
  });
  events.addEventListener("error", () => { $("live").textContent = "reconnecting…"; });
  events.addEventListener("message", (e) => {
    const message = JSON.parse(e.data);
    if (message.role !== "user") addMessage(message);
    if (message.id) setTimeout(() => refreshMessage(message.id), 300); // its deliveries
    refreshState();
  });
  $("send-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("text").value;
    if (!text.trim()) return;
    $("text").value = "";
    addMessage({ role: "user", text: text });
    post("/api/send", { text: text });
  });
  $("text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("send-form").requestSubmit(); }
  });
  events.addEventListener("read", onRead);
  events.addEventListener("deliveries", (e) => {
    const message = JSON.parse(e.data);
    const item = shown(message.id);
    if (item) renderDeliveries(item, message.deliveries);
  });
  document.addEventListener("visibilitychange", () => { markRead(); touchPresence(); });
  window.addEventListener("focus", touchPresence);
  $("text").addEventListener("input", touchPresence);
  touchPresence();
  $("stop").addEventListener("click", () => post("/api/stop"));
  $("show-trajectory").addEventListener("click", showTrajectory);
  refreshState();
  setInterval(refreshState, 2000);
}

document.addEventListener("DOMContentLoaded", start);
