// The three pages: the job list (live while jobs run), one job (status, charts, results, environment,
// spec) and several jobs compared. Each reads the /v1 API with the tab's token.
"use strict";

const REFRESH_MS = 2000;
const resultCache = new Map(); // job id -> result document; a finished job's result never changes
const verdictCache = new Map(); // job id -> its verdict, which the server derives from that result alone
const tableCache = new Map(); // job id -> its results table, the server's model of what `padbench results` prints

async function resultOf(job) {
  if (job.status !== "succeeded") return null;
  if (!resultCache.has(job.id)) resultCache.set(job.id, await api(`/jobs/${job.id}/results`));
  return resultCache.get(job.id);
}

// The verdict comes from the server, decided by the same code that prints it under `padbench results`.
async function verdictOf(jobId) {
  if (!verdictCache.has(jobId)) verdictCache.set(jobId, await api(`/jobs/${jobId}/verdict`));
  return verdictCache.get(jobId);
}

// The table comes from the server too: the cells, in the CLI's order, marked as the verdict says.
async function tableOf(jobId) {
  if (!tableCache.has(jobId)) tableCache.set(jobId, await api(`/jobs/${jobId}/table`));
  return tableCache.get(jobId);
}

// A cancelled job may have kept the rows it finished before the cancel (marked partial); most kept none (404).
async function partialResultOf(job) {
  try {
    return await api(`/jobs/${job.id}/results`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

// The list's items are summaries (no spec, so a page stays small); a job's spec never changes, so it is
// fetched once per job and kept.
const specCache = new Map();
async function specOf(job) {
  if (!specCache.has(job.id)) specCache.set(job.id, (await api(`/jobs/${job.id}`)).spec);
  return specCache.get(job.id);
}

function progressBar(job) {
  const fraction = job.status === "succeeded" ? 1 : job.progress || 0;
  const fill = el("span", { className: "fill" });
  fill.style.width = `${Math.round(fraction * 100)}%`;
  const text = job.progress == null && job.status !== "succeeded" ? MISSING : `${Math.round(fraction * 100)}%`;
  return el("span", { className: "progress", title: job.progress_message || "" }, el("span", { className: "bar" }, fill),
            ` ${text}`);
}

function statusBadge(job) {
  return el("span", { className: `status status-${job.status}`, text: job.status });
}

// --- job list -------------------------------------------------------------------------------------------
const selected = new Set();

async function jobRow(job) {
  const result = await resultOf(job);
  const spec = result ? result.spec : await specOf(job);
  const verdict = result && await verdictOf(job.id);
  const box = el("input", { type: "checkbox", "aria-label": `select job ${job.id}` });
  box.checked = selected.has(job.id);
  box.addEventListener("change", () => {
    if (box.checked) selected.add(job.id); else selected.delete(job.id);
    document.getElementById("compare-selected").disabled = selected.size < 2;
  });
  // Free text wraps, so the table fits the page whatever the names; the rest stays on one line.
  const wrapped = (text) => el("span", { className: "wrap", text });
  // A finished job's rows have a history: their figure in every stored job that measured the same thing.
  const history = result ? [" ", el("a", { href: `/history?job=${job.id}`, className: "history-link", text: "history" })] : [];
  const jobCell = el("span", {}, el("a", { href: `/jobs/${job.id}`, text: `#${job.id}` }), ...history);
  const cells = [box, jobCell, statusBadge(job), progressBar(job),
                 wrapped(job.name || MISSING), job.kind, wrapped(modelOf(spec)),
                 wrapped(result ? gpuOf(result) : job.device || MISSING), spec.dtype || MISSING,
                 wrapped((verdict && verdict.summary) || MISSING), fmt.when(job.created_at)];
  return el("tr", { "data-job-id": job.id, "data-status": job.status }, ...cells.map((cell) => el("td", {}, cell)));
}

async function refreshJobs() {
  const page = await api("/jobs?limit=50");
  const rows = await Promise.all(page.items.map(jobRow));
  document.querySelector("#jobs tbody").replaceChildren(...rows);
  document.getElementById("jobs-total").textContent = `${page.items.length} shown of ${page.total}`;
  showError("");
}

async function startJobs() {
  document.getElementById("compare-selected").addEventListener("click", () => {
    location.href = `/compare?ids=${[...selected].sort((a, b) => a - b).join(",")}`;
  });
  await refreshJobs();
  setInterval(() => refreshJobs().catch((error) => showError(error.message)), REFRESH_MS);
}

// --- one job --------------------------------------------------------------------------------------------
// The verdict's lines exactly as `padbench results` prints them: the first as the headline, the rest below it.
function showVerdict(result, verdict) {
  const kept = result.partial;
  const partial = document.getElementById("partial");
  const stopped = {timed_out: "out of time", failed: "failed", running: "not finished"}[kept && kept.reason] || "cancelled";
  partial.textContent = kept ? `Partial result: ${stopped} after ${kept.rows_finished} of ${kept.rows_planned} rows.` : "";
  partial.hidden = !kept;
  const [headline, ...details] = verdict.lines;
  const box = document.getElementById("verdict");
  box.textContent = headline || "";
  box.hidden = !headline;
  document.getElementById("verdict-details").replaceChildren(
    ...details.map((line) => el("li", { text: line.trim() })));
}

// Where the job's worker gave a price, the verdict can be ranked by cost ($ per million tokens) as well as speed:
// the server states it, as `padbench results --rank-by cost` prints it.
function offerRanking(jobId, result) {
  const box = document.getElementById("ranking");
  if (result.environment.price_per_gpu_hour == null || !box.hidden) return;
  box.hidden = false;
  const choice = document.getElementById("rank-by");
  choice.addEventListener("change", async () => {
    try {
      const query = `?rank_by=${choice.value === "cost" ? "cost" : "speed"}`;
      const [verdict, table] = await Promise.all([api(`/jobs/${jobId}/verdict${query}`), api(`/jobs/${jobId}/table${query}`)]);
      showVerdict(result, verdict);
      if (table.columns.length) document.getElementById("results").replaceChildren(...modelTable(table));
    } catch (error) { showError(error.message); }
  });
}

function showResult(jobId, result, verdict, table) {
  document.getElementById("job-title").textContent = identityOf(jobId, result);
  showVerdict(result, verdict);
  offerRanking(jobId, result);
  drawResultCharts(document.getElementById("charts"), result);
  // A kind whose report has no table model (its columns are empty) draws its own view of the result.
  const nodes = table.columns.length ? modelTable(table) : kindOf(result.kind).table(result);
  document.getElementById("results").replaceChildren(...nodes);
  document.getElementById("history-link").hidden = false;
  const facts = Object.entries(result.environment).filter(([, value]) => value != null && value !== "")
    .map(([name, value]) => el("tr", {}, el("th", { text: name }),
                               el("td", { text: typeof value === "object" ? JSON.stringify(value) : String(value) })));
  document.getElementById("environment").replaceChildren(...facts);
}

function showJobStatus(job) {
  const parts = [statusBadge(job), " ", progressBar(job), ` ${job.progress_message || ""}`,
                 job.worker ? ` · worker ${job.worker}` : "", ` · attempts ${job.attempts}/${job.max_attempts}`];
  // A queued job no live worker could take says why (too few GPUs on every worker), rather than wait silently.
  if (job.waiting_reason) parts.push(el("div", { className: "error", text: `waits: ${job.waiting_reason}` }));
  if (job.error) parts.push(el("div", { className: "error", text: job.error }));
  document.getElementById("job-status").replaceChildren(...parts);
  document.getElementById("spec").textContent = JSON.stringify(job.spec, null, 2);
}

async function startJob() {
  const jobId = Number(document.body.dataset.jobId);
  const poll = async () => {
    const job = await api(`/jobs/${jobId}`);
    showJobStatus(job);
    if (job.status === "succeeded") showResult(jobId, await resultOf(job), await verdictOf(jobId), await tableOf(jobId));
    const kept = job.status === "cancelled" ? await partialResultOf(job) : null;
    if (kept) showResult(jobId, kept, await verdictOf(jobId), await tableOf(jobId));
    if (!["succeeded", "failed", "cancelled"].includes(job.status)) setTimeout(() => poll().catch((e) => showError(e.message)), REFRESH_MS);
  };
  await poll();
}

// --- compare --------------------------------------------------------------------------------------------
// The server compares by the rule `padbench compare` prints with: its rows, figures and ratios ("× faster than
// the first job"), and the settings that differ between the jobs.
async function startCompare() {
  const ids = document.body.dataset.ids.split(",").map(Number);
  const comparison = await api(`/compare?ids=${ids.join(",")}`);
  document.getElementById("compared-jobs").replaceChildren(
    ...comparison.jobs.map((id, index) => el("li", {}, el("a", { href: `/jobs/${id}`, text: comparison.titles[index] }))));
  const differing = Object.entries(comparison.differences)
    .map(([name, values]) => `${name}: ${values.join(" / ")}`).join("; ");
  document.getElementById("compare-metric").textContent = `${comparison.metric_label}; ratios: times faster than `
    + `job ${ids[0]}${differing ? `. The jobs differ in ${differing}` : ""}`;
  // A row's batch size (`4 / 8` where the jobs ran it at different sizes), for kinds whose rows have one.
  const batched = comparison.rows.some((row) => row.batch !== null);
  const header = [...comparison.key_names, ...(batched ? ["batch"] : []),
                  ...ids.flatMap((id, index) => (index ? [`job ${id}`, `× job ${ids[0]}`] : [`job ${id}`]))];
  const body = comparison.rows.map((row) => el("tr", {}, ...row.key.map((part) => el("td", { text: part })),
    ...(batched ? [el("td", { text: row.batch ?? "—" })] : []),
    ...row.shown.flatMap((shown, index) => (index ? [el("td", { text: shown }), el("td", { text: fmt.ratio(row.ratios[index]) })]
                                                  : [el("td", { text: shown })]))));
  document.getElementById("comparison").replaceChildren(
    el("thead", {}, el("tr", {}, ...header.map((name) => el("th", { text: name })))), el("tbody", {}, ...body));
  comparisonChart(document.getElementById("compare-chart"), comparison.jobs.map((id) => ({ id })), comparison.rows,
                  comparison.metric_label);
}

const PAGES = { jobs: startJobs, job: startJob, compare: startCompare, history: startHistory };
setUpToken(PAGES[document.body.dataset.page]);
