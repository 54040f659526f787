// agent-server's web view. Every string from the server is put in the page as text (textContent, text nodes),
// never as HTML: tool arguments and results, prompts and answers are hostile. No innerHTML anywhere.
"use strict";

const state = {
  csrf: null,
  sessions: [],
  sessionsCursor: null,
  session: null, // the open session's id
  turn: null, // the open turn's id
  turnData: null,
  turnsData: null,
  approvals: [],
  liveText: "", // what the open running turn's model is writing (events of this process)
  liveLines: [],
  refreshTimer: null,
};

// --- small helpers ---------------------------------------------------------------------------------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "data") Object.assign(node.dataset, value);
    else if (key === "onclick") node.addEventListener("click", value);
    else if (key === "role") node.setAttribute("role", value);
    else if (["type", "title", "disabled", "hidden", "open", "id"].includes(key)) node[key] = value;
    else if (key === "href" && String(value).startsWith("#")) node.href = value;
    else throw new Error("unexpected property " + key);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

// A server-escaped, capped text: {text, hidden}. Shows how much is cut.
function shownText(value, tag = "pre", cls = "text") {
  const node = el(tag, { class: cls }, value ? value.text : "");
  if (value && value.hidden > 0) {
    node.append(el("span", { class: "cut" }, `\n[${value.hidden.toLocaleString()} more characters not shown: see the full record]`));
  }
  return node;
}

function plain(value) {
  return value ? value.text + (value.hidden > 0 ? "…" : "") : "";
}

function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  if (value < 60) return `${value.toFixed(value < 10 ? 2 : 1)} s`;
  return `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
}

function ago(iso) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return iso;
  const s = Math.max(0, (Date.now() - then) / 1000);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(then).toLocaleString();
}

function usageText(usage) {
  if (!usage) return "";
  const parts = [];
  if (usage.prompt_tokens !== undefined) parts.push(`${usage.prompt_tokens.toLocaleString()} in`);
  if (usage.completion_tokens !== undefined) parts.push(`${usage.completion_tokens.toLocaleString()} out`);
  if (usage.cache_read_tokens) parts.push(`${usage.cache_read_tokens.toLocaleString()} cached`);
  if (usage.cost_usd !== undefined && usage.cost_usd !== null) parts.push(`$${usage.cost_usd.toFixed(4)}`);
  return parts.join(" · ");
}

function statusPill(status) {
  return el("span", { class: `pill status-${status}` }, status.replace("_", " "));
}

const RUNNING = new Set(["running", "awaiting_input"]);

async function api(path, options = {}) {
  const headers = { Accept: "application/json" };
  if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
  }
  const response = await fetch(path, {
    method: options.body !== undefined ? "POST" : "GET",
    headers,
    body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
    credentials: "same-origin",
  });
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  if (response.status === 401 && document.body.dataset.page === "main") location.reload();
  return { ok: response.ok, status: response.status, data };
}

// --- approvals -------------------------------------------------------------------------------------

const CHOICE_LABELS = { allow_once: "Allow once", allow_session: "Allow for this session", deny: "Deny" };

function renderApprovals() {
  const box = document.getElementById("approvals");
  clear(box);
  for (const question of state.approvals) box.append(approvalCard(question));
  document.title = state.approvals.length ? `(${state.approvals.length}) agent-server: approval waiting` : "agent-server";
}

function approvalCard(q) {
  const card = el("article", { class: "approval", data: { question: q.question_id } });
  const origin = q.source.text === "builtin" || q.source.text === "plugin" ? "" : ` (from ${q.source.text})`;
  card.append(el("h2", {}, "Approval needed: ", el("code", {}, q.tool.text), origin));
  const session = state.sessions.find((s) => s.session_id === q.session_id);
  const where = session ? [`session “${plain(session.title)}” (${q.session_id})`] : [`session ${q.session_id}`];
  const turnLink = el("a", { href: `#/s/${encodeURIComponent(q.session_id)}/t/${encodeURIComponent(q.turn_id)}`, class: "turn-link" }, `turn ${q.turn_id}`);
  card.append(el("p", { class: "meta" }, where, " · ", turnLink, ` · call ${q.call_id} · `, el("span", { class: "countdown", data: { expires: q.expires_at } }, "")));
  if (q.warning) card.append(el("p", { class: "warning" }, "WARNING: ", q.warning.text));
  if (q.cut) {
    card.append(el("p", { class: "warning" }, `NOT SHOWN IN FULL: ${q.hidden_chars.toLocaleString()} characters of this call are hidden below. The default answer is deny: allow it only if you know what the hidden part does.`));
  } else {
    card.append(el("p", { class: "note" }, "The whole call is shown below (invisible and control characters appear escaped, as \\u200b or \\x1b)."));
  }
  card.append(el("pre", { class: "call" }, q.shown.text));
  const buttons = el("div", { class: "choices" });
  for (const choice of q.choices) {
    const preferred = q.default_choice === choice;
    const button = el("button", { type: "button", class: `choice choice-${choice}${preferred ? " default" : ""}`, data: { choice } }, CHOICE_LABELS[choice] || choice);
    button.addEventListener("click", () => answer(q, choice, card));
    buttons.append(button);
  }
  card.append(buttons);
  card.append(el("p", { class: "error", role: "alert" }));
  return card;
}

async function answer(q, choice, card) {
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  const result = await api(`api/approvals/${encodeURIComponent(q.question_id)}`, { body: { choice } });
  if (result.ok) {
    card.classList.add("answered");
    card.querySelector(".error").textContent = "";
    card.append(el("p", { class: "done" }, `Answered: ${CHOICE_LABELS[choice]}.`));
  } else {
    card.querySelector(".error").textContent = (result.data && result.data.error) || `failed (${result.status})`;
  }
  setTimeout(loadApprovals, 800);
}

function tickCountdowns() {
  for (const node of document.querySelectorAll(".countdown")) {
    const left = Math.max(0, (Date.parse(node.dataset.expires) - Date.now()) / 1000);
    node.textContent = left > 0 ? `waits ${Math.ceil(left)} s more, then the call is not run` : "expired: the call was not run";
  }
}

async function loadApprovals() {
  const result = await api("api/approvals");
  if (result.ok) {
    state.approvals = result.data.approvals;
    renderApprovals();
    tickCountdowns();
  }
}

// --- sessions --------------------------------------------------------------------------------------

async function loadSessions() {
  const result = await api("api/sessions");
  if (!result.ok) return;
  state.sessions = result.data.sessions;
  state.sessionsCursor = result.data.next_cursor;
  renderSessions();
  if (state.approvals.length) {
    renderApprovals(); // their session titles
    tickCountdowns();
  }
}

async function moreSessions() {
  if (!state.sessionsCursor) return;
  const result = await api(`api/sessions?cursor=${encodeURIComponent(state.sessionsCursor)}`);
  if (!result.ok) return;
  state.sessions = state.sessions.concat(result.data.sessions);
  state.sessionsCursor = result.data.next_cursor;
  renderSessions();
}

function renderSessions() {
  const list = document.getElementById("sessions");
  clear(list);
  if (!state.sessions.length) list.append(el("li", { class: "hint" }, "No sessions yet."));
  for (const s of state.sessions) {
    const item = el(
      "a",
      { href: `#/s/${encodeURIComponent(s.session_id)}`, class: s.session_id === state.session ? "session current" : "session" },
      el("span", { class: "title" }, plain(s.title) || "Untitled session"),
      s.agent ? el("span", { class: "agent" }, plain(s.agent)) : null,
      el("span", { class: "sub" }, `${s.turn_count} turn${s.turn_count === 1 ? "" : "s"} · ${ago(s.updated_at)}`),
    );
    list.append(el("li", { data: { session: s.session_id } }, item));
  }
  document.getElementById("more-sessions").hidden = !state.sessionsCursor;
}

// --- a session's turns -----------------------------------------------------------------------------

async function loadTurns() {
  if (!state.session) return;
  const result = await api(`api/sessions/${encodeURIComponent(state.session)}/turns`);
  state.turnsData = result.ok ? result.data : { error: (result.data && result.data.error) || "not found" };
}

async function loadTurn() {
  if (!state.session || !state.turn) {
    state.turnData = null;
    return;
  }
  const result = await api(`api/sessions/${encodeURIComponent(state.session)}/turns/${encodeURIComponent(state.turn)}`);
  state.turnData = result.ok ? result.data : { error: (result.data && result.data.error) || "not found" };
}

function renderDetail() {
  const detail = document.getElementById("detail");
  clear(detail);
  const data = state.turnsData;
  if (!state.session || !data) {
    detail.append(el("p", { class: "hint" }, "Choose a session."));
    return;
  }
  if (data.error) {
    detail.append(el("p", { class: "error" }, data.error));
    return;
  }
  detail.append(el("h1", {}, plain(data.session.title) || "Untitled session"));
  detail.append(el("p", { class: "meta" }, `${data.session.session_id} · created ${ago(data.session.created_at)} · last activity ${ago(data.session.updated_at)}`));
  const turns = el("ol", { class: "turn-list", id: "turns" });
  for (const t of data.turns) {
    const link = el(
      "a",
      { href: `#/s/${encodeURIComponent(state.session)}/t/${encodeURIComponent(t.turn_id)}`, class: t.turn_id === state.turn ? "turn current" : "turn" },
      statusPill(t.status),
      el("span", { class: "prompt" }, plain(t.prompt)),
      el("span", { class: "sub" }, [seconds(t.duration_s), `${t.model_calls} model call${t.model_calls === 1 ? "" : "s"}`, `${t.tool_calls} tool call${t.tool_calls === 1 ? "" : "s"}`, usageText(t.usage)].filter(Boolean).join(" · ")),
    );
    turns.append(el("li", { data: { turn: t.turn_id, status: t.status } }, link));
  }
  if (!data.turns.length) turns.append(el("li", { class: "hint" }, "No turns yet."));
  detail.append(turns);
  if (state.turnData) detail.append(renderTurn(state.turnData));
}

// --- a turn's timeline -----------------------------------------------------------------------------

function renderTurn(t) {
  const box = el("section", { class: "turn-detail", id: "turn", data: { status: t.status || "" } });
  if (t.error && !t.turn_id) {
    box.append(el("p", { class: "error" }, t.error));
    return box;
  }
  box.append(el("h2", {}, "Turn ", el("code", {}, t.turn_id), " ", statusPill(t.status)));
  const facts = [t.model ? `model ${t.model}` : null, `started ${new Date(t.started_at).toLocaleString()}`, t.duration_s !== null ? `took ${seconds(t.duration_s)}` : "still running", usageText(t.usage)];
  box.append(el("p", { class: "meta" }, facts.filter(Boolean).join(" · ")));
  box.append(el("h3", {}, "Prompt"), shownText(t.prompt, "pre", "text prompt"));
  box.append(el("h3", {}, "Timeline"), timelineChart(t));
  if (RUNNING.has(t.status) && (state.liveText || state.liveLines.length)) {
    box.append(el("h3", {}, "Live"), el("pre", { class: "text live-lines" }, state.liveLines.join("\n")), state.liveText ? el("pre", { class: "text live-text" }, state.liveText) : null);
  }
  box.append(el("h3", {}, "Steps"), ...t.steps.map(stepDetail));
  if (t.error) box.append(el("h3", {}, "Error"), el("p", { class: "error" }, `${t.error.type}: `, plain(t.error.message)));
  if (t.final_text && t.final_text.text) box.append(el("h3", {}, "Answer"), shownText(t.final_text, "pre", "text answer"));
  if (t.approvals.length) {
    box.append(el("h3", {}, "Approvals"));
    box.append(el("ul", { class: "approval-records" }, t.approvals.map((a) => el("li", {}, `${a.tool} (${a.call_id}): ${a.decision} via ${a.channel} after ${seconds(a.latency_s)}`))));
  }
  const recordBox = el("div", { class: "record" });
  const button = el("button", { type: "button", class: "link", id: "show-record" }, "Show the full record");
  button.addEventListener("click", () => showRecord(t, recordBox, button));
  box.append(el("h3", {}, "Record"), button, recordBox);
  return box;
}

// The timeline as bars: model calls one after the other, each tool round's calls side by side (they run
// concurrently), an approval's wait before its call. Widths are durations on one scale.
function timelineChart(t) {
  const rows = [];
  let clock = 0;
  for (const step of t.steps) {
    if (step.kind === "model") {
      const d = step.duration_s || 0;
      rows.push({ label: `model · ${step.phase}`, kind: "model", start: clock, wait: 0, duration: d, status: "ok", note: [seconds(step.duration_s), usageText(step.usage)].filter(Boolean).join(" · ") });
      clock += d;
    } else {
      let longest = 0;
      for (const call of step.calls) {
        const wait = call.approval ? call.approval.latency_s || 0 : 0;
        const d = call.duration_s || 0;
        const asking = call.status === "running" && state.approvals.some((q) => q.call_id === call.call_id && q.turn_id === t.turn_id);
        const note = asking ? "waiting for approval" : call.status === "running" ? "running" : `${seconds(call.duration_s)}${wait ? ` · approval ${seconds(wait)}` : ""}`;
        rows.push({ label: call.name, kind: "tool", start: clock, wait, duration: d, status: asking ? "asking" : call.status, note });
        longest = Math.max(longest, wait + d);
      }
      clock += longest;
    }
  }
  const elapsed = RUNNING.has(t.status) ? (Date.now() - Date.parse(t.started_at)) / 1000 : 0;
  const total = Math.max(clock, t.duration_s || 0, elapsed, 0.001);
  const chart = el("div", { class: "chart", role: "list" });
  for (const row of rows) {
    const track = el("div", { class: "track" });
    if (row.wait > 0) {
      const wait = el("div", { class: "bar wait", title: "waiting for approval" });
      wait.style.left = `${(100 * row.start) / total}%`;
      wait.style.width = `${Math.max(0.3, (100 * row.wait) / total)}%`;
      track.append(wait);
    }
    const bar = el("div", { class: `bar ${row.kind} bar-${row.status}` });
    const open = row.status === "running" || row.status === "asking"; // drawn up to now
    bar.style.left = `${(100 * (row.start + row.wait)) / total}%`;
    bar.style.width = open ? `${Math.max(1, 100 - (100 * (row.start + row.wait)) / total)}%` : `${Math.max(0.4, (100 * row.duration) / total)}%`;
    track.append(bar);
    chart.append(el("div", { class: `row row-${row.kind}`, role: "listitem", data: { status: row.status } }, el("span", { class: "label", title: row.label }, row.label), track, el("span", { class: "note" }, row.note)));
  }
  if (!rows.length) chart.append(el("p", { class: "hint" }, "No model call yet."));
  chart.append(el("div", { class: "scale" }, el("span", {}, "0"), el("span", {}, seconds(total))));
  const legend = el("div", { class: "legend" });
  for (const [cls, text] of [["model", "model call"], ["tool", "tool call"], ["bar-error", "failed call"], ["wait", "waiting for approval"], ["bar-running", "running"]]) {
    legend.append(el("span", {}, el("i", { class: `swatch ${cls}` }), text));
  }
  chart.append(legend);
  return chart;
}

function stepDetail(step) {
  if (step.kind === "model") {
    const summary = el("summary", {}, el("span", { class: "kind" }, "model"), ` ${step.phase} · ${seconds(step.duration_s)}`, step.stop_reason ? ` · ${step.stop_reason}` : "", step.tool_names.length ? ` · asked for ${step.tool_names.join(", ")}` : "");
    return el("details", { class: "step step-model" }, summary, step.text && step.text.text ? shownText(step.text) : el("p", { class: "hint" }, "(no text)"), step.usage ? el("p", { class: "meta" }, usageText(step.usage)) : null);
  }
  const calls = step.calls.map((call) => {
    const summary = el("summary", {}, el("span", { class: `kind kind-${call.status}` }, call.status), " ", el("code", {}, call.name), ` · ${call.status === "running" ? "running" : seconds(call.duration_s)}`, call.approval ? ` · ${call.approval.decision} (${call.approval.channel})` : "");
    return el(
      "details",
      { class: "call-detail", data: { call: call.call_id } },
      summary,
      el("h4", {}, "Arguments"),
      shownText(call.arguments),
      call.arguments_error ? el("p", { class: "error" }, call.arguments_error) : null,
      el("h4", {}, "Result"),
      call.result ? shownText(call.result, "pre", `text result${call.status === "error" ? " is-error" : ""}`) : el("p", { class: "hint" }, "(no result yet)"),
    );
  });
  return el("div", { class: "step step-tools" }, el("p", { class: "round" }, `tool round ${step.round}`), ...calls);
}

async function showRecord(t, box, button) {
  button.disabled = true;
  const result = await api(`api/sessions/${encodeURIComponent(t.session_id || state.session)}/turns/${encodeURIComponent(t.turn_id)}/record`);
  clear(box);
  box.append(result.ok ? shownText(result.data, "pre", "text full-record") : el("p", { class: "error" }, "could not load the record"));
  button.disabled = false;
}

// --- routing and live updates ----------------------------------------------------------------------

function route() {
  const match = /^#\/s\/([^/]+)(?:\/t\/([^/]+))?$/.exec(location.hash);
  const session = match ? decodeURIComponent(match[1]) : null;
  const turn = match && match[2] ? decodeURIComponent(match[2]) : null;
  if (turn !== state.turn) {
    state.liveText = "";
    state.liveLines = [];
  }
  state.session = session;
  state.turn = turn;
  refreshDetail();
  renderSessions();
}

async function refreshDetail() {
  await Promise.all([loadTurns(), loadTurn()]);
  renderDetail();
  scheduleRefresh();
}

// A running turn is read again every second (its stored state, for turns of other processes and replicas).
function scheduleRefresh() {
  clearTimeout(state.refreshTimer);
  const running = state.turnData && RUNNING.has(state.turnData.status);
  const anyRunning = state.turnsData && state.turnsData.turns && state.turnsData.turns.some((t) => RUNNING.has(t.status));
  if (running || anyRunning) state.refreshTimer = setTimeout(refreshDetail, 1000);
}

function onTurnEvent(event) {
  if (event.type === "status" && event.phase === "approval") loadApprovals(); // a question is waiting
  if (event.session_id === state.session && !state.turnsData?.turns?.some((t) => t.turn_id === event.turn_id)) {
    refreshDetail(); // a new turn of the open session
    return;
  }
  if (event.turn_id !== state.turn) return;
  if (event.type === "token") {
    state.liveText = (state.liveText + event.delta).slice(-4000);
  } else if (event.type === "status") {
    state.liveLines = state.liveLines.concat(event.message).slice(-8);
  } else if (event.type === "tool_start") {
    state.liveLines = state.liveLines.concat(`${event.call.name} started`).slice(-8);
    refreshDetail();
    return;
  } else if (event.type === "tool_result" || event.type === "done") {
    refreshDetail();
    return;
  }
  const live = document.querySelector(".live-text");
  if (live && event.type === "token") live.textContent = state.liveText;
  else renderDetail();
}

function connect() {
  const indicator = document.getElementById("live");
  const source = new EventSource("api/live");
  source.addEventListener("open", () => {
    indicator.textContent = "live";
    indicator.className = "live on";
  });
  source.addEventListener("error", () => {
    indicator.textContent = "reconnecting";
    indicator.className = "live off";
  });
  source.addEventListener("changed", () => {
    loadSessions();
    loadApprovals();
    if (state.session) refreshDetail();
  });
  source.addEventListener("turn", (message) => onTurnEvent(JSON.parse(message.data)));
}

async function main() {
  const me = await api("api/me");
  if (!me.ok) return;
  state.csrf = me.data.csrf;
  document.getElementById("who").textContent = `as ${me.data.principal}`;
  document.getElementById("more-sessions").addEventListener("click", moreSessions);
  window.addEventListener("hashchange", route);
  await Promise.all([loadSessions(), loadApprovals()]);
  route();
  connect();
  setInterval(tickCountdowns, 1000);
}

async function login() {
  const me = await api("api/me");
  const mode = (me.data && me.data.login) || "link";
  document.getElementById(mode === "token" ? "login-token" : "login-link").hidden = false;
  const form = document.getElementById("login-token");
  form.addEventListener("submit", async (submit) => {
    submit.preventDefault();
    const result = await api("login", { body: { token: document.getElementById("token").value } });
    if (result.ok) location.replace(location.pathname);
    else document.getElementById("login-error").textContent = (result.data && result.data.error) || "could not log in";
  });
}

document.addEventListener("DOMContentLoaded", () => (document.body.dataset.page === "login" ? login() : main()));
