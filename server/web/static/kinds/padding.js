// Padding jobs on the dashboard: tokens/s per layout and kernel. Loaded after common.js and charts.js.
"use strict";

// The copy of `strategy_label` (padbench/contract/spec.py): bins and the multiple widths are padded to, and a
// dagger on a layout whose rows attend across documents (wrapped: another function than the other layouts).
function strategyLabel(row) {
  const options = [...(row.strategy === "binned" ? [row.n_bins] : []),
                   ...(row.pad_to_multiple_of != null ? [`×${row.pad_to_multiple_of}`] : [])];
  const label = options.length ? `${row.strategy}[${options.join(", ")}]` : row.strategy;
  return row.crosses_documents ? `${label} †` : label;
}

// The copy of `batch_cell` (padbench/report/auto_sizes.py): `auto:N` on binned ran a size per length tier.
function batchOf(row) {
  const tiers = row.batch_tiers ?? [];
  if (tiers.length < 2) return row.batch_size ?? MISSING;
  const sizes = tiers.map((tier) => tier.batch_size);
  return `${Math.min(...sizes)}–${Math.max(...sizes)}`;
}
// The kernel with a mixture of experts' implementation (kernelCell in padbench/report/experts.py); compareKernel
// is the same without the K/V note, as compare keys are.
function compareKernel(row) { return row.experts ? `${row.kernel} · ${row.experts}` : row.kernel; }
function kernelCell(row) {
  const kernel = row.gqa === "expanded" ? `${row.kernel} (K/V expanded)` : row.kernel;
  return row.experts ? `${kernel} · experts ${row.experts}` : kernel;
}

// --- charts ---------------------------------------------------------------------------------------------
function validRows(result) { return result.strategies.filter((row) => row.status === "ok" && row.tokens_per_s != null); }

// A layout measured at several batch sizes shows its fastest here; the batch-size chart shows them all.
function fastestPerLayout(rows) {
  const best = new Map();
  for (const row of rows) {
    const key = `${strategyLabel(row)} · ${compareKernel(row)}`;
    if (!best.has(key) || best.get(key).tokens_per_s < row.tokens_per_s) best.set(key, row);
  }
  return [...best.values()];
}

function throughputChart(container, result) {
  const rows = fastestPerLayout(validRows(result));
  if (!rows.length) return;
  new Chart(chartIn(container, "tokens/s per layout, with padding efficiency"), {
    data: {
      labels: rows.map((row) => `${strategyLabel(row)} · ${compareKernel(row)}`),
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
    const key = `${strategyLabel(row)} · ${compareKernel(row)}`;
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

// --- the results table: the CLI's rows, in its order, marked as the server's verdict says ------------
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

// A mixture of experts' load (loadSummary in padbench/report/experts.py): the busiest expert over the mean.
function expertLoadOf(row) {
  const load = row.expert_load;
  if (!load || !load.layers.length) return [];
  const ratios = load.layers.map((layer) => (layer.mean_tokens ? layer.max_tokens / layer.mean_tokens : 1));
  const worst = ratios.indexOf(Math.max(...ratios));
  const mean = ratios.reduce((sum, ratio) => sum + ratio, 0) / ratios.length;
  return [["expert load", `busiest expert ${ratios[worst].toFixed(2)}× the mean (layer ${load.layers[worst].layer}; `
           + `${mean.toFixed(2)}× over the layers), padding tokens routed: ${Math.round(load.padding_share * 100)}% `
           + "of expert work"]];
}

function detailsOf(row) {
  const mode = row.probe && row.probe.mode && row.probe.mode !== "predict" ? ` (${row.probe.mode})` : "";
  const probe = row.probe ? `fit ${row.probe.largest_fit}, ${row.probe.smallest_oom == null ? "no OOM"
    : `OOM ${row.probe.smallest_oom}`} → ${row.probe.chosen}${mode}` : MISSING;
  const tiers = (row.batch_tiers ?? []).length > 1
    ? [[`batch_size auto:${row.auto_times}`,
        row.batch_tiers.map((tier) => `≤ ${tier.longest} tokens: ${tier.batch_size}`).join(", ")]] : [];
  // The CLI's note on a layout whose rows span documents (padbench/report/padding.py, CROSSES_DOCUMENTS_NOTE).
  const crosses = row.crosses_documents
    ? [["† note", "rows attend across documents: not the function the other layouts compute; gated against each "
                  + "row run alone; not ranked"]] : [];
  return [["CV", cvOf(row)], ["repeats min–max", rangeOf(row)], ["MFU (GEMM)", fmt.fixed(row.mfu_vs_matmul, 2)],
          ["max logit error", logitErrorOf(row)], ["probe", probe], ...tiers, ...crosses, ...expertLoadOf(row)]
    .map(([name, value]) => `${name}: ${value}`).join(" · ");
}

// The columns to read a row by; the rest of the CLI's columns are in the row's details (click its layout).
const PADDING_COLUMNS = ["strategy", "kernel", "batch", "tokens/s", "95% interval", "vs static", "padding eff.",
                         "MFU", "peak memory", "valid"];

// A row and, hidden until its layout is clicked, a row of the figures the main columns leave out.
function paddingRows(row, className, validity) {
  const kernel = kernelCell(row);
  const toggle = el("button", { type: "button", className: "expand", "aria-expanded": "false",
                                title: "show this row's other figures", text: `▸ ${strategyLabel(row)}` });
  const cells = [kernel, batchOf(row), fmt.int(row.tokens_per_s), intervalOf(row),
                 fmt.ratio(row.speedup_vs_static), fmt.fixed(row.padding_efficiency, 2), fmt.fixed(row.mfu, 2),
                 memoryOf(row), validity].map((cell) => el("td", { text: String(cell) }));
  const details = el("tr", { className: "details" },
                     el("td", { colspan: String(PADDING_COLUMNS.length), text: detailsOf(row) }));
  details.hidden = true;
  toggle.addEventListener("click", () => {
    details.hidden = !details.hidden;
    toggle.textContent = `${details.hidden ? "▸" : "▾"} ${strategyLabel(row)}`;
    toggle.setAttribute("aria-expanded", String(!details.hidden));
  });
  return [el("tr", { className }, el("td", {}, toggle), ...cells), details];
}

// Rows in the CLI's order (fastest first), the winner and the rows not to rank by as the server's verdict says.
function paddingTable(result, verdict) {
  const notes = [];
  const order = verdict.ranked.length ? verdict.ranked : result.strategies.map((_, index) => index);
  const body = order.flatMap((index) => {
    const row = result.strategies[index];
    return paddingRows(row, verdictClass(verdict, index), validityOf(row, notes));
  });
  return resultTable(PADDING_COLUMNS, body, notes);
}

// --- compare --------------------------------------------------------------------------------------------
function paddingFigures(result) {
  const figures = new Map();
  // Keyed by strategy and kernel (and experts); a layout measured at several batch sizes has a row per size.
  const pairs = result.strategies.map((row) => `${strategyLabel(row)}|${compareKernel(row)}`);
  result.strategies.forEach((row, index) => {
    const repeated = pairs.filter((pair) => pair === pairs[index]).length > 1;
    const strategy = repeated ? `${strategyLabel(row)} @ ${row.batch_size}` : strategyLabel(row);
    figures.set(JSON.stringify([strategy, compareKernel(row)]), row.status === "ok" ? row.tokens_per_s : null);
  });
  return figures;
}

registerKind("padding", {
  plural: "padding jobs",
  model: modelLabel,
  mode: (spec) => spec.mode,
  table: paddingTable,
  charts(container, result) {
    throughputChart(container, result);
    batchSizeChart(container, result);
  },
  compare: { keyNames: ["strategy", "kernel"], metric: "tokens/s", higherIsFaster: true, show: (value) => fmt.int(value),
             figures: paddingFigures },
});
