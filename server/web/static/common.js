// Shared by every dashboard page: the token (kept in this tab's sessionStorage), calls to the /v1 API,
// the formatting the CLI's tables use, and the job kinds: each kind's script (kinds/<kind>.js) registers
// how its jobs show. No page shows job data until a token is given.
"use strict";

const TOKEN_KEY = "padbench-token";
const API = document.body.dataset.api;
const MISSING = "—";

function storedToken() { return sessionStorage.getItem(TOKEN_KEY); }

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "text") node.textContent = value;
    else if (name === "className") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = !message;
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path) {
  const response = await fetch(API + path, { headers: { Authorization: `Bearer ${storedToken()}` } });
  if (response.ok) return response.json();
  let detail = response.statusText;
  try { detail = (await response.json()).detail || detail; } catch (_) { /* not JSON */ }
  if (response.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    askForToken();
  }
  throw new ApiError(response.status, `${response.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
}

function askForToken() {
  document.getElementById("token-form").hidden = false;
  document.getElementById("content").hidden = true;
  document.getElementById("token-state").textContent = "";
}

function setUpToken(start) {
  document.getElementById("token-entry").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = document.getElementById("token-input").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    document.getElementById("token-input").value = "";
    begin(start);
  });
  if (storedToken()) begin(start); else askForToken();
}

function begin(start) {
  document.getElementById("token-form").hidden = true;
  document.getElementById("content").hidden = false;
  const state = document.getElementById("token-state");
  state.replaceChildren("token set · ", el("a", { href: "#", id: "forget-token", text: "forget it" }));
  document.getElementById("forget-token").addEventListener("click", (event) => {
    event.preventDefault();
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
  start().catch((error) => showError(error.message));
}

// --- formatting, as the CLI's tables print it ---------------------------------------------------------
const fmt = {
  int: (v) => (v == null ? MISSING : Math.round(v).toLocaleString("en-US")),
  fixed: (v, digits) => (v == null ? MISSING : v.toFixed(digits)),
  ratio: (v) => (v == null ? MISSING : `${v.toFixed(2)}×`),
  pct: (v) => (v == null ? MISSING : `${(v * 100).toFixed(0)}%`),
  bytes(count) {
    if (count == null) return MISSING;
    for (const [unit, size] of [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]) {
      if (count >= size) return `${(count / size).toFixed(1)} ${unit}`;
    }
    return `${count} B`;
  },
  when: (iso) => (iso ? iso.replace("T", " ").slice(0, 19) : MISSING),
};

// --- what the tables of every kind that measures a model show -----------------------------------------
// As reports name the model (ModelSpec.label).
function modelLabel(spec) {
  const model = spec.model;
  if (typeof model === "string") return model;
  if (!model) return MISSING;
  if (model.hub) return `hub:${model.hub}`;
  return model.preset || model.path || (model.config ? `custom ${model.config.model_type}` : MISSING);
}

function memoryOf(row) {
  const memory = row.memory;
  if (!memory) return MISSING;
  if (memory.peak_allocated_bytes != null) return fmt.bytes(memory.peak_allocated_bytes);
  if (memory.host_peak_rss_bytes != null) return `${fmt.bytes(memory.host_peak_rss_bytes)} RSS`;
  return MISSING;
}

function marksOf(row) {
  const marks = [];
  if (row.spread && row.spread.noisy) marks.push(`noisy CV ${(row.spread.cv * 100).toFixed(1)}%`);
  if (row.gpu_activity && row.gpu_activity.contended) marks.push("contended");
  if (row.gpu_activity && row.gpu_activity.throttled) {
    // Held at the power limit is how a GPU runs at full load; heat or a hardware slowdown is a real alarm.
    const reasons = row.gpu_activity.throttle_reasons || [];
    marks.push(reasons.length === 1 && reasons[0] === "sw_power_cap" ? "power cap" : "throttled");
  }
  return marks.join(", ") || "yes";
}

// The CLI's `valid` cell: `yes` or the marks, or `no [n]` / `failed [n]` with the reason added to `notes`.
function validityOf(row, notes) {
  if (row.status === "ok") return marksOf(row);
  const number = notes.push(row.invalid_reason || row.error || "no reason recorded");
  return `${row.status === "invalid" ? "no" : "failed"} [${number}]`;
}

// The row the server's verdict highlights, and the rows it says not to rank by.
function verdictClass(verdict, index) {
  return index === verdict.winner ? "winner" : verdict.doubtful.includes(index) ? "doubtful" : "";
}

function resultTable(columns, bodyRows, notes) {
  const table = el("table", { className: "grid results" },
                   el("thead", {}, el("tr", {}, ...columns.map((name) => el("th", { text: name })))),
                   el("tbody", {}, ...bodyRows));
  return [table, el("ol", { className: "notes" }, ...notes.map((note) => el("li", { text: note })))];
}

// --- job kinds ------------------------------------------------------------------------------------------
// A kind's view: plural (for messages), model(spec) and mode(spec) (what the job ran, and how),
// table(result, verdict) (nodes; `verdict` is the server's, from /v1/jobs/{id}/verdict: its lines, the
// winning row and the rows not to rank by), charts(container, result), and
// compare: { keyNames, metric, higherIsFaster, show(value), figures(result) }. The headline and the job
// list's verdict cell are the server's verdict lines for every kind, so they say what the CLI says.
const KINDS = {};

function registerKind(name, view) { KINDS[name] = view; }

// A kind this dashboard has no script for still lists and shows its raw result.
const UNKNOWN_KIND = {
  plural: "jobs of other kinds", model: () => MISSING, mode: () => MISSING,
  table: (result) => [el("p", { className: "hint", text: `this dashboard has no table for ${result.kind} jobs` })],
  charts: () => {},
  compare: { keyNames: ["row", ""], metric: "", higherIsFaster: true, show: String, figures: () => new Map() },
};

function kindOf(kind) { return KINDS[kind] || UNKNOWN_KIND; }

function modelOf(spec) { return kindOf(spec.kind).model(spec); }

function gpuOf(result) { return result.environment.gpu_name || result.environment.device; }

function identityOf(jobId, result) {
  const mode = kindOf(result.kind).mode(result.spec);
  return [`job ${jobId}`, modelOf(result.spec), gpuOf(result), result.spec.dtype, mode,
          result.environment.started_at.slice(0, 10)].join(" · ");
}
