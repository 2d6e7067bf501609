// Generate jobs on the dashboard: output tokens/s per batching strategy beside transformers' own loops (the
// reference rows), and decode tokens/s per context length when the job has a context table. Loaded after
// common.js and charts.js; the headline is the server's verdict, the one `padbench results` prints.
"use strict";

function generateLabel(row) { return row.reference ? `ref: ${row.strategy}` : row.strategy; }

function generateValid(result) {
  return result.rows.filter((row) => row.status === "ok" && row.output_tokens_per_s != null);
}

function generateKey(row) {
  return `${generateLabel(row)} · ${row.kernel}${row.context == null ? "" : ` · context ${row.context}`}`;
}

// --- charts ---------------------------------------------------------------------------------------------
const REFERENCE_COLOUR = "#9a9a9a";

function outputRateChart(container, result) {
  const rows = generateValid(result);
  if (!rows.length) return;
  new Chart(chartIn(container, "output tokens/s per strategy (grey: transformers references)"), {
    type: "bar",
    data: {
      labels: rows.map(generateKey),
      datasets: [{ label: "output tokens/s", data: rows.map((row) => row.output_tokens_per_s),
                   backgroundColor: rows.map((row) => (row.reference ? REFERENCE_COLOUR : PALETTE[0])) }],
    },
    options: { animation: false, plugins: { legend: { display: false } },
               scales: { y: { beginAtZero: true, title: { display: true, text: "output tokens/s" } } } },
  });
}

// Decode tokens/s against context length, one line per strategy (or reference) and kernel.
function contextCurves(result) {
  const curves = new Map();
  for (const row of result.rows) {
    if (row.context == null || row.status !== "ok" || row.decode_tokens_per_s == null) continue;
    const key = `${generateLabel(row)} · ${row.kernel}`;
    if (!curves.has(key)) curves.set(key, []);
    curves.get(key).push({ x: row.context, y: row.decode_tokens_per_s });
  }
  return [...curves].map(([key, points]) => [key, points.sort((a, b) => a.x - b.x)]);
}

function contextChart(container, result) {
  const curves = contextCurves(result);
  if (curves.length) {
    lineChart(chartIn(container, "decode tokens/s against context length"), curves, "context length",
              "decode tokens/s", false);
  }
}

// --- the results table: the CLI's rows, in its order, marked as the server's verdict says ------------
function generateInterval(row) {
  const spread = row.spread;
  if (!spread || row.output_tokens_per_s == null) return MISSING;
  return `${fmt.int(spread.ci95_low_tokens_per_s)}–${fmt.int(spread.ci95_high_tokens_per_s)}`;
}

function latencyOf(latency) {
  if (!latency) return MISSING;
  const ms = (value) => (value >= 100 ? fmt.int(value) : String(Number(value.toPrecision(3))));
  return `${ms(latency.p50_ms)}/${ms(latency.p99_ms)} ms`;
}

function generateColumns(result) {
  const withContext = result.rows.some((row) => row.context != null);
  return ["strategy", "kernel", ...(withContext ? ["context"] : []), "batch", "output tok/s", "95% interval",
          "vs static", "TTFT p50/p99", "TBT p50/p99", "slot use", "BW util", "MFU", "peak memory", "valid"];
}

function generateCells(row, withContext, validity) {
  return [generateLabel(row), row.kernel, ...(withContext ? [row.context ?? MISSING] : []), row.batch_size ?? MISSING,
          fmt.int(row.output_tokens_per_s), generateInterval(row), fmt.ratio(row.speedup_vs_static),
          latencyOf(row.time_to_first_token), latencyOf(row.time_between_tokens), fmt.pct(row.slot_utilization),
          fmt.fixed(row.bandwidth_utilization, 2), fmt.fixed(row.mfu, 2), memoryOf(row), validity];
}

function generateTable(result, verdict) {
  const notes = [];
  const columns = generateColumns(result);
  const withContext = columns.includes("context");
  const order = verdict.ranked.length ? verdict.ranked : result.rows.map((_, index) => index);
  const body = order.map((index) => {
    const row = result.rows[index];
    const cells = generateCells(row, withContext, validityOf(row, notes));
    return el("tr", { className: verdictClass(verdict, index) }, ...cells.map((cell) => el("td", { text: String(cell) })));
  });
  return resultTable(columns, body, notes);
}

// --- compare: the keys `padbench compare` uses ---------------------------------------------------------
function generateFigures(result) {
  const figures = new Map();
  for (const row of result.rows) {
    const strategy = row.context == null ? generateLabel(row) : `${generateLabel(row)} @ ${row.context}`;
    figures.set(JSON.stringify([strategy, row.kernel]), row.status === "ok" ? row.output_tokens_per_s : null);
  }
  return figures;
}

registerKind("generate", {
  plural: "generate jobs",
  model: modelLabel,
  mode: () => "generate",
  table: generateTable,
  charts(container, result) {
    outputRateChart(container, result);
    contextChart(container, result);
  },
  compare: { keyNames: ["strategy", "kernel"], metric: "output tokens/s", higherIsFaster: true,
             show: (value) => fmt.int(value), figures: generateFigures },
});
