// Padding jobs on the dashboard: tokens/s per layout and kernel. Loaded after common.js and charts.js.
"use strict";

function strategyLabel(row) { return row.strategy === "binned" ? `binned[${row.n_bins}]` : row.strategy; }

function paddingModel(spec) {
  const model = spec.model;
  if (typeof model === "string") return model;
  if (!model) return MISSING;
  return model.preset || model.path || (model.config ? `custom ${model.config.model_type}` : MISSING);
}

// The fastest row with a valid figure (what the CLI highlights); null when there is none.
function paddingWinner(result) {
  const valid = result.strategies.filter((row) => row.tokens_per_s != null && !isDoubtful(row));
  return valid.reduce((best, row) => (best && best.tokens_per_s >= row.tokens_per_s ? best : row), null);
}

// Invalid or failed, or marked noisy or contended (a flag of that name, or in a list of marks).
function isDoubtful(row) {
  const marks = row.marks || [];
  return row.status !== "ok" || ["noisy", "contended"].some((mark) => Boolean(row[mark]) || marks.includes(mark));
}

// --- charts ---------------------------------------------------------------------------------------------
function validRows(result) { return result.strategies.filter((row) => row.status === "ok" && row.tokens_per_s != null); }

// A layout measured at several batch sizes shows its fastest here; the batch-size chart shows them all.
function fastestPerLayout(rows) {
  const best = new Map();
  for (const row of rows) {
    const key = `${strategyLabel(row)} · ${row.kernel}`;
    if (!best.has(key) || best.get(key).tokens_per_s < row.tokens_per_s) best.set(key, row);
  }
  return [...best.values()];
}

function throughputChart(container, result) {
  const rows = fastestPerLayout(validRows(result));
  if (!rows.length) return;
  new Chart(chartIn(container, "tokens/s per layout, with padding efficiency"), {
    data: {
      labels: rows.map((row) => `${strategyLabel(row)} · ${row.kernel}`),
      datasets: [
        { type: "bar", label: "tokens/s", data: rows.map((row) => row.tokens_per_s), backgroundColor: PALETTE[0],
          yAxisID: "y" },
        { type: "line", label: "padding efficiency", data: rows.map((row) => row.padding_efficiency),
          borderColor: PALETTE[1], backgroundColor: PALETTE[1], yAxisID: "efficiency" },
      ],
    },
    options: {
      animation: false,
      scales: {
        y: { beginAtZero: true, title: { display: true, text: "tokens/s" } },
        efficiency: { position: "right", min: 0, max: 1, grid: { drawOnChartArea: false },
                      ticks: { callback: (value) => `${Math.round(value * 100)}%` },
                      title: { display: true, text: "padding efficiency" } },
      },
    },
  });
}

// tokens/s against batch size, for each layout measured at two or more sizes.
function batchCurves(result) {
  const curves = new Map();
  for (const row of validRows(result)) {
    if (row.batch_size == null) continue;
    const key = `${strategyLabel(row)} · ${row.kernel}`;
    if (!curves.has(key)) curves.set(key, []);
    curves.get(key).push({ x: row.batch_size, y: row.tokens_per_s });
  }
  return [...curves].filter(([, points]) => new Set(points.map((p) => p.x)).size > 1)
    .map(([key, points]) => [key, points.sort((a, b) => a.x - b.x)]);
}

function batchSizeChart(container, result) {
  const curves = batchCurves(result);
  if (curves.length) lineChart(chartIn(container, "tokens/s against batch size"), curves, "batch size", "tokens/s", false);
}

// --- the results table ----------------------------------------------------------------------------------
const PADDING_COLUMNS = ["strategy", "kernel", "batch", "tokens/s", "95% interval", "CV", "vs static",
                         "padding eff.", "MFU", "MFU (GEMM)", "peak memory", "max logit error", "valid"];

function intervalOf(row) {
  const spread = row.spread;
  if (!spread || row.tokens_per_s == null) return MISSING;
  return `${fmt.int(spread.ci95_low_tokens_per_s)}–${fmt.int(spread.ci95_high_tokens_per_s)}`;
}

function cvOf(row) {
  return row.spread && row.tokens_per_s != null ? `${(row.spread.cv * 100).toFixed(1)}%` : MISSING;
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

function paddingTable(result) {
  const winner = paddingWinner(result);
  const notes = [];
  const body = result.strategies.map((row) => {
    const validity = row.status === "ok" ? marksOf(row)
      : `${row.status === "invalid" ? "no" : "failed"} [${notes.push(row.invalid_reason || row.error || "no reason recorded")}]`;
    const kernel = row.gqa === "expanded" ? `${row.kernel} (K/V expanded)` : row.kernel;
    const cells = [strategyLabel(row), kernel, row.batch_size ?? MISSING, fmt.int(row.tokens_per_s), intervalOf(row),
                   cvOf(row), fmt.ratio(row.speedup_vs_static), fmt.fixed(row.padding_efficiency, 2),
                   fmt.fixed(row.mfu, 2), fmt.fixed(row.mfu_vs_matmul, 2), memoryOf(row), row.max_logit_error == null ? MISSING : row.max_logit_error.toExponential(1), validity];
    const className = row === winner ? "winner" : isDoubtful(row) ? "doubtful" : "";
    return el("tr", { className }, ...cells.map((cell) => el("td", { text: String(cell) })));
  });
  const table = el("table", { className: "grid results" },
                   el("thead", {}, el("tr", {}, ...PADDING_COLUMNS.map((name) => el("th", { text: name })))),
                   el("tbody", {}, ...body));
  const noteList = el("ol", { className: "notes" }, ...notes.map((note) => el("li", { text: note })));
  return [table, noteList];
}

function paddingVerdict(result) {
  const winner = paddingWinner(result);
  if (!winner) return null;
  const versus = winner.speedup_vs_static == null ? "" : `, ${fmt.ratio(winner.speedup_vs_static)} static padding`;
  return `Fastest valid layout: ${strategyLabel(winner)} on ${winner.kernel} at batch ${winner.batch_size ?? MISSING}: `
    + `${fmt.int(winner.tokens_per_s)} tokens/s${versus}.`;
}

// --- compare --------------------------------------------------------------------------------------------
function paddingFigures(result) {
  const figures = new Map();
  // Keyed by strategy and kernel; a layout measured at several batch sizes has a row per size.
  const pairs = result.strategies.map((row) => `${strategyLabel(row)}|${row.kernel}`);
  result.strategies.forEach((row, index) => {
    const repeated = pairs.filter((pair) => pair === pairs[index]).length > 1;
    const strategy = repeated ? `${strategyLabel(row)} @ ${row.batch_size}` : strategyLabel(row);
    figures.set(JSON.stringify([strategy, row.kernel]), row.status === "ok" ? row.tokens_per_s : null);
  });
  return figures;
}

registerKind("padding", {
  plural: "padding jobs",
  model: paddingModel,
  mode: (spec) => spec.mode,
  headline(result) {
    const winner = paddingWinner(result);
    return winner && `${strategyLabel(winner)} · ${fmt.int(winner.tokens_per_s)} tok/s`;
  },
  verdict: paddingVerdict,
  table: paddingTable,
  charts(container, result) {
    throughputChart(container, result);
    batchSizeChart(container, result);
  },
  compare: { keyNames: ["strategy", "kernel"], metric: "tokens/s", higherIsFaster: true, show: (value) => fmt.int(value),
             figures: paddingFigures },
});
