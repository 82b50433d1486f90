"use strict";
const csrf = document.querySelector('meta[name="csrf-token"]').content;
const session = document.querySelector('meta[name="session"]').content;
const $ = (id) => document.getElementById(id);
const q = "?session=" + encodeURIComponent(session);
let lastSeen = null; // the newest message of the agent shown, for the read state

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

function addMessage(message) {
  const item = el("li", null, message.role + " " + (message.urgency || ""));
  if (message.id) item.dataset.id = message.id;
  item.append(el("span", message.role === "user" ? "you" : "wakeful", "who"));
  item.append(el("span", message.text, "text"));
  if (message.card) item.append(renderCard(message, message.card));
  for (const a of message.attachments || []) {
    item.append(el("div", "📎 " + (typeof a === "string" ? a : (a.name || a.path || "attachment")), "muted"));
  }
  $("chat").append(item);
  item.scrollIntoView({ block: "end" });
  if (message.role === "agent" && message.id) { lastSeen = message.id; markRead(); }
}

async function markRead() {
  // Read means seen: only while the page is in front of the person.
  if (!lastSeen || document.visibilityState !== "visible") return;
  const response = await fetch("/api/read", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify({ session: session, through: lastSeen }),
  });
  if (response.ok) showUnread((await response.json()).unread);
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

async function start() {
  const response = await fetch("/api/messages" + q);
  if (response.ok) for (const m of await response.json()) addMessage(m);
  const events = new EventSource("/events" + q);
  events.addEventListener("open", () => { $("live").textContent = "live"; });
  events.addEventListener("error", () => { $("live").textContent = "reconnecting…"; });
  events.addEventListener("message", (e) => {
    const message = JSON.parse(e.data);
    if (message.role !== "user") addMessage(message);
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
  events.addEventListener("read", (e) => showUnread(JSON.parse(e.data).unread));
  document.addEventListener("visibilitychange", markRead);
  $("stop").addEventListener("click", () => post("/api/stop"));
  $("show-trajectory").addEventListener("click", showTrajectory);
  refreshState();
  setInterval(refreshState, 2000);
}

document.addEventListener("DOMContentLoaded", start);
