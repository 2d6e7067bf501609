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

// --- the results table: the server's model of it, the one `padbench results` prints ---------------------
// /v1/jobs/{id}/table gives the header, the columns, the cells in the CLI's order with the verdict's marks, the
// numbered notes and the lines below; no cell is computed here, so the page and the CLI never disagree. The
// detail columns are in a row of their own, shown when the row's first cell is clicked.
function detailsRow(model, row, width) {
  const text = model.columns.map((column, index) => [column, row.cells[index]])
    .filter(([column]) => column.detail).map(([column, cell]) => `${column.name}: ${cell}`).join(" · ");
  const details = el("tr", { className: "details" }, el("td", { colspan: String(width), text }));
  details.hidden = true;
  return details;
}

function modelRows(model, row) {
  const shown = model.columns.map((column, index) => [column, index]).filter(([column]) => !column.detail);
  const cells = shown.map(([column, index]) => el("td", { className: column.right ? "number" : "",
                                                          text: row.cells[index] }));
  const line = el("tr", { className: row.mark || "" }, ...cells);
  if (shown.length === model.columns.length) return [line];
  const details = detailsRow(model, row, shown.length);
  const first = row.cells[shown[0][1]];
  const toggle = el("button", { type: "button", className: "expand", "aria-expanded": "false",
                                title: "show this row's other figures", text: `▸ ${first}` });
  toggle.addEventListener("click", () => {
    details.hidden = !details.hidden;
    toggle.textContent = `${details.hidden ? "▸" : "▾"} ${first}`;
    toggle.setAttribute("aria-expanded", String(!details.hidden));
  });
  cells[0].replaceChildren(toggle);
  return [line, details];
}

function modelTable(model) {
  const head = model.columns.filter((column) => !column.detail).map((column) => el("th", { text: column.name }));
  const table = el("table", { className: "grid results" }, el("thead", {}, el("tr", {}, ...head)),
                   el("tbody", {}, ...model.rows.flatMap((row) => modelRows(model, row))));
  return [...model.header.map((line) => el("p", { className: "hint", text: line })), table,
          el("ol", { className: "notes" }, ...model.notes.map((note) => el("li", { text: note }))),
          ...(model.after.length ? [el("pre", { className: "after", text: model.after.join("\n") })] : [])];
}

// --- job kinds ------------------------------------------------------------------------------------------
// A kind's view: plural (for messages), model(spec) and mode(spec) (what the job ran, and how),
// charts(container, result), and, for a kind whose report has no table model, table(result) (nodes). The
// headline, the job list's verdict cell, the results table and the comparison of jobs come from the server,
// computed by the code `padbench results` and `padbench compare` print with, so they say what the CLI says.
const KINDS = {};

function registerKind(name, view) { KINDS[name] = view; }

// A kind this dashboard has no script for still lists and shows its raw result.
const UNKNOWN_KIND = {
  plural: "jobs of other kinds", model: () => MISSING, mode: () => MISSING,
  table: (result) => [el("p", { className: "hint", text: `this dashboard has no table for ${result.kind} jobs` })],
  charts: () => {},
};

function kindOf(kind) { return KINDS[kind] || UNKNOWN_KIND; }

function modelOf(spec) { return kindOf(spec.kind).model(spec); }

function gpuOf(result) { return result.environment.gpu_name || result.environment.device; }

function identityOf(jobId, result) {
  const mode = kindOf(result.kind).mode(result.spec);
  return [`job ${jobId}`, modelOf(result.spec), gpuOf(result), result.spec.dtype, mode,
          result.environment.started_at.slice(0, 10)].join(" · ");
}
