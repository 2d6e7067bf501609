// Shared by every dashboard page: the token (kept in this tab's sessionStorage), calls to the /v1 API,
// and the formatting the CLI's tables use. No page shows job data until a token is given.
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

function strategyLabel(row) { return row.strategy === "binned" ? `binned[${row.n_bins}]` : row.strategy; }

function modelOf(spec) {
  if (spec.kind === "attention") return `attention B${spec.batch} H${spec.heads} D${spec.head_dim}`;
  const model = spec.model;
  if (typeof model === "string") return model;
  if (!model) return MISSING;
  return model.preset || model.path || (model.config ? `custom ${model.config.model_type}` : MISSING);
}

function gpuOf(result) { return result.environment.gpu_name || result.environment.device; }

function identityOf(jobId, result) {
  const mode = result.kind === "padding" ? result.spec.mode : result.spec.direction;
  return [`job ${jobId}`, modelOf(result.spec), gpuOf(result), result.spec.dtype, mode,
          result.environment.started_at.slice(0, 10)].join(" · ");
}

// --- a padding result row's cells, as the CLI's table prints them ------------------------------------
function intervalOf(row) {
  const spread = row.spread;
  if (!spread || row.tokens_per_s == null) return MISSING;
  return `${fmt.int(spread.ci95_low_tokens_per_s)}–${fmt.int(spread.ci95_high_tokens_per_s)}`;
}

function cvOf(row) {
  return row.spread && row.tokens_per_s != null ? `${(row.spread.cv * 100).toFixed(1)}%` : MISSING;
}

function rangeOf(row) {
  const spread = row.spread;
  if (!spread || row.tokens_per_s == null) return MISSING;
  return `${fmt.int(spread.min_tokens_per_s)}–${fmt.int(spread.max_tokens_per_s)}`;
}

function logitErrorOf(row) {
  if (row.max_logit_error == null) return MISSING;
  const tolerance = row.logit_tolerance == null ? "" : ` (tol ${row.logit_tolerance.toExponential(1)})`;
  return `${row.max_logit_error.toExponential(1)}${tolerance}`;
}

function detailsOf(row) {
  const probe = row.probe ? `fit ${row.probe.largest_fit}, ${row.probe.smallest_oom == null ? "no OOM"
    : `OOM ${row.probe.smallest_oom}`} → ${row.probe.chosen}` : MISSING;
  return [["CV", cvOf(row)], ["repeats min–max", rangeOf(row)], ["MFU (GEMM)", fmt.fixed(row.mfu_vs_matmul, 2)],
          ["max logit error", logitErrorOf(row)], ["probe", probe]]
    .map(([name, value]) => `${name}: ${value}`).join(" · ");
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

function memoryOf(row) {
  const memory = row.memory;
  if (!memory) return MISSING;
  if (memory.peak_allocated_bytes != null) return fmt.bytes(memory.peak_allocated_bytes);
  if (memory.host_peak_rss_bytes != null) return `${fmt.bytes(memory.host_peak_rss_bytes)} RSS`;
  return MISSING;
}
