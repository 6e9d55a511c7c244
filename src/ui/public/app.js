// agentloop UI: plain browser JavaScript, no build step, no external assets.
// Data flow: /api/events (SSE) feeds the sessions list and the selected session's transcript and
// statechart; selecting a session replays its stored events first (/api/sessions/<a>/<s>/events).

import { element, formatTime } from "./dom.js";
import { activeStateIds, formatStateValue, isTakenTransition, summarizeStates } from "./state-values.js";
import { TimelineView } from "./timeline-view.js";
import { TranscriptView } from "./transcript-view.js";

const transcript = document.querySelector('[data-testid="transcript"]');
const timelineRoot = document.querySelector('[data-testid="timeline"]');
const timelineSummary = document.querySelector('[data-testid="timeline-summary"]');
const sessionList = document.querySelector('[data-testid="session-list"]');
const sessionsEmpty = document.querySelector('[data-testid="sessions-empty"]');
const waitingFilter = document.querySelector('[data-testid="waiting-filter"]');
const selectedTitle = document.querySelector('[data-testid="selected-session"]');
const selectedState = document.querySelector('[data-testid="selected-state"]');
const connectionStatus = document.querySelector('[data-testid="connection-status"]');
const busKind = document.querySelector('[data-testid="bus-kind"]');
const composer = document.querySelector('[data-testid="composer"]');
const controlStatus = document.querySelector('[data-testid="control-status"]');
const tabs = document.querySelector('[data-testid="statechart-tabs"]');
const chartState = document.querySelector('[data-testid="statechart-state"]');
const chartHost = document.querySelector('[data-testid="statechart"]');
const zoom = document.querySelector('[data-testid="chart-zoom"]');

// ---------------------------------------------------------------------------------------------
// The access token: when the server requires one, it printed the page's URL with `?token=…`.
// Read it once, keep it for this tab (sessionStorage), and take it out of the address bar so it
// is not bookmarked, shared or kept in history. Fetches send it as `Authorization: Bearer`; the
// event stream (EventSource cannot set headers) takes it as a query parameter.

const TOKEN_KEY = "agentloop.token";

function takeToken() {
  const url = new URL(window.location.href);
  const fromUrl = url.searchParams.get("token");
  if (fromUrl !== null) {
    url.searchParams.delete("token");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
    if (fromUrl !== "") {
      sessionStorage.setItem(TOKEN_KEY, fromUrl);
      return fromUrl;
    }
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

const token = takeToken();

/** `fetch` of our own API, with the token when there is one. */
function apiFetch(path, init = {}) {
  if (!token) return fetch(path, init);
  return fetch(path, { ...init, headers: { ...(init.headers || {}), authorization: `Bearer ${token}` } });
}

const app = {
  /** key "agent/session" → summary (as /api/sessions returns, kept current from events). */
  sessions: new Map(),
  /** key → <li>. */
  items: new Map(),
  selected: null,
  view: null,
  /** The selected session's chat timeline (fed the same events as the transcript). */
  timeline: null,
  /** Live events of the selected session that arrived while its history was loading. */
  pending: null,
  generation: 0,
  machines: ["chat", "iteration", "session", "compaction"],
  activeMachine: "chat",
  /** machine → { pane, svg } */
  charts: new Map(),
};

function keyOf(agent, session) {
  return `${agent}/${session}`;
}

function splitKey(key) {
  const index = key.indexOf("/");
  return [key.slice(0, index), key.slice(index + 1)];
}

// ---------------------------------------------------------------------------------------------
// Sessions

function mergeSummary(summary) {
  const key = keyOf(summary.agent, summary.session);
  const known = app.sessions.get(key);
  if (known && known.lastSeq > summary.lastSeq) {
    // Newer live state here; the listing can still tell of calls waiting that this page missed.
    if ((summary.waitingApprovals || 0) > (known.waitingApprovals || 0)) {
      known.waitingApprovals = summary.waitingApprovals;
      renderSession(key);
    }
    return;
  }
  app.sessions.set(key, {
    ...known,
    ...summary,
    states: { ...(known ? known.states : {}), ...summary.states },
  });
  renderSession(key);
}

function ensureSession(agent, session) {
  const key = keyOf(agent, session);
  if (!app.sessions.has(key)) {
    app.sessions.set(key, {
      agent,
      session,
      status: "idle",
      state: "",
      states: {},
      lastActivity: new Date().toISOString(),
      lastSeq: -1,
    });
    renderSession(key);
  }
  return key;
}

function recordEvent(event) {
  const key = ensureSession(event.agent, event.session);
  const summary = app.sessions.get(key);
  summary.lastActivity = event.ts;
  summary.lastSeq = event.seq;
  // The owner: the host of the latest event (a session taken over moves to the next owner).
  if (event.host) summary.host = event.host;
  summary.seenLive = true;
  trackApprovals(key, summary, event);
  if (event.kind === "ChatStarted") summary.status = "running";
  else if (event.kind === "ChatCompleted") summary.status = "completed";
  else if (event.kind === "ChatFailed") summary.status = event.cancelled ? "cancelled" : "failed";
  else if (event.kind === "StateChanged") {
    // The state before, so the chart can mark the transition just taken.
    summary.previousStates = { ...summary.previousStates, [event.machine]: summary.states[event.machine] };
    summary.states[event.machine] = event.state;
    summary.state = summarizeStates(summary.states);
  }
  renderSession(key);
  return key;
}

/** The calls of a session's open chat that wait for a decision, kept from its live events. */
const awaiting = new Map();

function trackApprovals(key, summary, event) {
  let open = awaiting.get(key);
  if (!open) {
    open = new Set();
    awaiting.set(key, open);
  }
  if (event.kind === "ToolApprovalRequested") open.add(event.toolCallId);
  else if (event.kind === "ToolApprovalResolved") open.delete(event.toolCallId);
  else if (event.kind === "ChatStarted" || event.kind === "ChatCompleted" || event.kind === "ChatFailed")
    open.clear();
  else return;
  summary.waitingApprovals = open.size;
}

function renderSession(key) {
  const summary = app.sessions.get(key);
  let item = app.items.get(key);
  if (!item) {
    item = element(
      "li",
      {
        className: "session-item",
        "data-testid": "session-item",
        "data-agent": summary.agent,
        "data-session": summary.session,
        role: "option",
        tabindex: "0",
        "aria-selected": String(key === app.selected),
      },
      element(
        "span",
        { className: "session-name" },
        element("span", { className: "agent" }, `${summary.agent} / `),
        summary.session,
      ),
      element("span", { className: "session-status", "data-testid": "session-status" }),
      element("span", {
        className: "session-waiting",
        "data-testid": "session-waiting",
        title: "tool calls waiting for a decision (approve / deny)",
      }),
      element("span", { className: "session-state", "data-testid": "session-state" }),
      element("span", { className: "session-activity", "data-testid": "session-activity" }),
      element("span", {
        className: "session-host",
        "data-testid": "session-host",
        title: "the host that runs this session (the host of its latest event)",
      }),
    );
    item.addEventListener("click", () => select(key));
    item.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        select(key);
      }
    });
    app.items.set(key, item);
    // New sessions go on top; existing rows never move, so nothing jumps under the pointer.
    sessionList.prepend(item);
    sessionsEmpty.hidden = true;
  }
  const status = item.querySelector('[data-testid="session-status"]');
  // A session only the event log knows: its state shows once it is opened or moves.
  const shownStatus = summary.seenLive === false ? "stored" : summary.status;
  status.textContent = shownStatus;
  status.setAttribute("data-status", shownStatus);
  const waiting = item.querySelector('[data-testid="session-waiting"]');
  const count = summary.waitingApprovals || 0;
  waiting.textContent = count === 0 ? "" : count === 1 ? "awaiting approval" : `${count} awaiting approval`;
  waiting.hidden = count === 0;
  item.setAttribute("data-waiting", String(count > 0));
  item.hidden = waitingFilter.checked && count === 0;
  item.querySelector('[data-testid="session-state"]').textContent = summary.state || "–";
  item.querySelector('[data-testid="session-activity"]').textContent = formatTime(summary.lastActivity);
  const host = item.querySelector('[data-testid="session-host"]');
  host.textContent = summary.host ? `on ${summary.host}` : "";
  host.hidden = !summary.host;
  if (key === app.selected) updateSelectedState();
}

function applyWaitingFilter() {
  for (const [key, item] of app.items) {
    item.hidden = waitingFilter.checked && !(app.sessions.get(key)?.waitingApprovals > 0);
  }
}

waitingFilter.addEventListener("change", () => {
  applyWaitingFilter();
  // The log may know of waiting calls this page never saw: ask again.
  if (waitingFilter.checked) refreshSessions();
});

async function refreshSessions() {
  try {
    const response = await apiFetch("/api/sessions");
    const body = await response.json();
    // Oldest first, so that prepending leaves the most recent on top.
    for (const summary of [...body.sessions].reverse()) mergeSummary(summary);
  } catch {
    // The SSE stream keeps the list current; a failed refresh only loses older sessions.
  }
}

async function select(key) {
  const generation = ++app.generation;
  app.selected = key;
  for (const [itemKey, item] of app.items) item.setAttribute("aria-selected", String(itemKey === key));
  const [agent, session] = splitKey(key);
  selectedTitle.textContent = `${agent} / ${session}`;
  composer.elements.agent.value = agent;
  composer.elements.session.value = session;
  showStatus(key);
  if (app.view) app.view.dispose();
  if (app.timeline) app.timeline.dispose();
  transcript.replaceChildren();
  app.view = new TranscriptView(transcript, {
    decide: decideToolCall,
    // A sub-agent's lane opens its own session: every event of it, not only the steps relayed here.
    openSession: (childAgent, childSession) => select(ensureSession(childAgent, childSession)),
  });
  app.timeline = new TimelineView(timelineRoot, timelineSummary);
  app.pending = [];
  updateSelectedState();
  let replayed = [];
  try {
    const response = await apiFetch(
      `/api/sessions/${encodeURIComponent(agent)}/${encodeURIComponent(session)}/events`,
    );
    if (response.ok) replayed = (await response.json()).events || [];
  } catch {
    replayed = [];
  }
  if (generation !== app.generation) return;
  const chatIds = new Set();
  let lastSeq = -1;
  for (const event of replayed) {
    applyToViews(event);
    chatIds.add(event.chatId);
    lastSeq = Math.max(lastSeq, event.seq);
  }
  // Live events already in the replay are skipped (same chat, seq not newer).
  for (const event of app.pending) {
    if (event.seq <= lastSeq && chatIds.has(event.chatId)) continue;
    applyToViews(event);
  }
  app.pending = null;
  transcript.setAttribute("data-loaded", "true");
  highlightAll();
}

/** The selected session's views: the transcript and the timeline. */
function applyToViews(event) {
  app.view.apply(event);
  app.timeline.apply(event);
}

function updateSelectedState() {
  const summary = app.selected ? app.sessions.get(app.selected) : undefined;
  selectedState.textContent = summary?.state ?? "";
}

// ---------------------------------------------------------------------------------------------
// Statecharts

function buildTabs() {
  tabs.replaceChildren();
  for (const machine of app.machines) {
    const tab = element(
      "button",
      {
        type: "button",
        className: "tab",
        role: "tab",
        "data-testid": `statechart-tab-${machine}`,
        "aria-selected": String(machine === app.activeMachine),
      },
      machine,
    );
    tab.addEventListener("click", () => showMachine(machine));
    tabs.append(tab);
  }
}

async function showMachine(machine) {
  app.activeMachine = machine;
  for (const tab of tabs.children) {
    tab.setAttribute("aria-selected", String(tab.textContent === machine));
  }
  let chart = app.charts.get(machine);
  if (!chart) {
    const pane = element("div", { "data-testid": `chart-${machine}`, "data-machine": machine });
    chart = { pane, svg: null };
    app.charts.set(machine, chart);
    chartHost.append(pane);
    try {
      const response = await apiFetch(`/api/machines/${encodeURIComponent(machine)}.svg`);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      // Our own server's drawing, inlined so CSS classes can highlight states.
      chart.svg = importDrawing(await response.text());
      // At the top of the pane, not centred in it.
      chart.svg.setAttribute("preserveAspectRatio", "xMidYMin meet");
      pane.append(chart.svg);
      pane.setAttribute("data-loaded", "true");
    } catch (error) {
      pane.replaceChildren(
        element(
          "p",
          { className: "chart-message" },
          `The ${machine} statechart is not available (${error.message}).`,
        ),
      );
    }
  }
  for (const other of app.charts.values()) other.pane.hidden = other !== chart;
  fitEdgeLabels();
  highlight(machine);
}

/** Edge labels are drawn at this size; the state names are larger. */
const EDGE_LABEL_PX = 12;
const MIN_READABLE_PX = 10;

/**
 * Fitted to a small pane, edge labels would shrink below a readable size and collide: then they
 * are hidden, and shown on hovering their transition at a readable size (the state names stay).
 */
function fitEdgeLabels() {
  const chart = app.charts.get(app.activeMachine);
  if (!chart || !chart.svg) return;
  const matrix = chart.svg.getScreenCTM();
  const scale = matrix ? Math.hypot(matrix.a, matrix.b) : 1;
  const isSmall = scale > 0 && EDGE_LABEL_PX * scale < MIN_READABLE_PX;
  chart.pane.classList.toggle("edge-labels-on-hover", isSmall);
  chart.pane.style.setProperty("--edge-label-px", `${Math.ceil(MIN_READABLE_PX / Math.max(scale, 0.05))}px`);
}

new ResizeObserver(() => fitEdgeLabels()).observe(chartHost);

/**
 * The drawing's `<svg>` as a node of this page. Its `<style>` elements become constructed
 * stylesheets, taken out of the text before it is parsed: the page's Content-Security-Policy
 * refuses inline `<style>` elements (it allows only stylesheets from this server), while styles
 * set from our own script are allowed.
 */
function importDrawing(text) {
  const markup = text.replace(/<style>([\s\S]*?)<\/style>/g, (_, css) => {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    return "";
  });
  const svg = new DOMParser().parseFromString(markup, "image/svg+xml").documentElement;
  if (svg.nodeName !== "svg") throw new Error("the drawing is not SVG");
  return document.importNode(svg, true);
}

function highlight(machine) {
  const chart = app.charts.get(machine);
  const summary = app.selected ? app.sessions.get(app.selected) : undefined;
  const value = summary ? summary.states[machine] : undefined;
  if (machine === app.activeMachine) {
    chartState.textContent =
      value === undefined ? `${machine}: no state seen yet` : `${machine}: ${formatStateValue(value)}`;
  }
  if (!chart || !chart.svg) return;
  for (const node of chart.svg.querySelectorAll(".active, .active-leaf"))
    node.classList.remove("active", "active-leaf");
  for (const edge of chart.svg.querySelectorAll(".al-edge.taken")) edge.classList.remove("taken");
  if (value === undefined) return;
  for (const { id, isLeaf } of activeStateIds(machine, value)) {
    const node = chart.svg.querySelector(`[data-state-id="${CSS.escape(id)}"]`);
    if (!node) continue;
    node.classList.add("active");
    if (isLeaf) node.classList.add("active-leaf");
  }
  // The transition just taken stays marked until the machine moves again.
  const previous = summary.previousStates?.[machine];
  if (previous === undefined) return;
  const isTaken = isTakenTransition(machine, previous, value);
  for (const edge of chart.svg.querySelectorAll(".al-edge")) {
    if (isTaken(edge.getAttribute("data-source"), edge.getAttribute("data-target")))
      edge.classList.add("taken");
  }
}

function highlightAll() {
  for (const machine of app.charts.keys()) highlight(machine);
  if (!app.charts.has(app.activeMachine)) highlight(app.activeMachine);
}

zoom.addEventListener("click", () => {
  const isFull = chartHost.classList.toggle("full-size");
  zoom.setAttribute("aria-pressed", String(isFull));
  fitEdgeLabels();
});

// ---------------------------------------------------------------------------------------------
// Live events

function onEvent(event) {
  if (!event || typeof event.kind !== "string") return;
  const key = recordEvent(event);
  if (key !== app.selected) return;
  if (app.pending) app.pending.push(event);
  else applyToViews(event);
  if (event.kind === "StateChanged") highlight(event.machine);
}

function connect() {
  const source = new EventSource(token ? `/api/events?token=${encodeURIComponent(token)}` : "/api/events");
  source.onopen = () => {
    connectionStatus.textContent = "live";
    connectionStatus.setAttribute("data-state", "live");
    refreshSessions();
    // After a reconnect, events may have been missed: reload the selected session's history.
    if (app.selected && app.hasConnected) select(app.selected);
    app.hasConnected = true;
  };
  source.onmessage = (message) => {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    onEvent(event);
  };
  source.onerror = () => {
    connectionStatus.textContent = "reconnecting…";
    connectionStatus.setAttribute("data-state", "reconnecting");
  };
}

// ---------------------------------------------------------------------------------------------
// Composer: chat and control requests

/** The last status line of each session ("agent/session" → { text, kind }): it belongs to its session. */
const statusLines = new Map();

function setStatus(text, kind, key = composerKey()) {
  statusLines.set(key, { text, kind: kind || "info" });
  if (key === composerKey()) showStatus(key);
}

function showStatus(key) {
  const line = statusLines.get(key);
  controlStatus.textContent = line ? line.text : "";
  controlStatus.setAttribute("data-kind", line ? line.kind : "info");
}

function composerKey() {
  return keyOf(composer.elements.agent.value.trim(), composer.elements.session.value.trim());
}

for (const input of [composer.elements.agent, composer.elements.session]) {
  input.addEventListener("input", () => showStatus(composerKey()));
}

async function post(path, body) {
  const response = await apiFetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  let reply;
  try {
    reply = await response.json();
  } catch {
    reply = { ok: false, error: { code: "bad_reply", message: `HTTP ${response.status}` } };
  }
  return reply;
}

function describeError(reply) {
  return reply?.error ? `${reply.error.code}: ${reply.error.message}` : "unknown error";
}

composer.addEventListener("submit", async (event) => {
  event.preventDefault();
  const agent = composer.elements.agent.value.trim();
  const session = composer.elements.session.value.trim();
  const text = composer.elements.text.value;
  if (!composer.reportValidity() || text.trim() === "") return;
  const key = ensureSession(agent, session);
  if (app.selected !== key) select(key);
  composer.elements.text.value = "";
  setStatus(`sent to ${agent} / ${session}, waiting for the reply…`, "info", key);
  try {
    const reply = await post("/api/chat", { agent, session, text });
    if (reply.ok)
      setStatus(
        `reply from ${agent} / ${session} · ${reply.usage ? reply.usage.total : "?"} tokens`,
        "ok",
        key,
      );
    else setStatus(describeError(reply), "error", key);
  } catch (error) {
    setStatus(`request failed: ${error.message}`, "error", key);
  }
});

/** Approve / Deny on a tool call held for approval (the transcript's buttons). */
async function decideToolCall(request, command) {
  const key = keyOf(request.agent, request.session);
  setStatus(`${command} ${request.toolCallId}…`, "info", key);
  const body = { ...request, command };
  if (command === "deny") body.reason = "denied in the web UI";
  try {
    const reply = await post("/api/control", body);
    setStatus(
      reply.ok ? `${command}: done` : `${command}: ${describeError(reply)}`,
      reply.ok ? "ok" : "error",
      key,
    );
  } catch (error) {
    setStatus(`${command} failed: ${error.message}`, "error", key);
  }
}

composer.elements.text.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

for (const button of composer.querySelectorAll("button[data-command]")) {
  button.addEventListener("click", async () => {
    const command = button.getAttribute("data-command");
    const agent = composer.elements.agent.value.trim();
    const session = composer.elements.session.value.trim();
    if (!composer.elements.agent.checkValidity() || !composer.elements.session.checkValidity()) {
      composer.reportValidity();
      return;
    }
    const body = { agent, session, command };
    const key = keyOf(agent, session);
    const topic = composer.elements.topic.value.trim();
    if (command === "compact" && topic !== "") body.topic = topic;
    setStatus(`${command}…`, "info", key);
    try {
      const reply = await post("/api/control", body);
      setStatus(
        reply.ok ? `${command}: done` : `${command}: ${describeError(reply)}`,
        reply.ok ? "ok" : "error",
        key,
      );
    } catch (error) {
      setStatus(`${command} failed: ${error.message}`, "error", key);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Start

async function start() {
  try {
    const response = await apiFetch("/api/info");
    if (response.status === 401) {
      // Without the token nothing else would work either: say what to do instead of retrying.
      connectionStatus.textContent = "no access: open the URL with ?token= that agentloop printed";
      connectionStatus.setAttribute("data-state", "unauthorized");
      busKind.textContent = "bus: ?";
      return;
    }
    const info = await response.json();
    busKind.textContent = `bus: ${info.bus}`;
    if (Array.isArray(info.machines) && info.machines.length > 0) app.machines = info.machines;
  } catch {
    busKind.textContent = "bus: ?";
  }
  if (!app.machines.includes(app.activeMachine)) app.activeMachine = app.machines[0];
  buildTabs();
  showMachine(app.activeMachine);
  connect();
}

start();
