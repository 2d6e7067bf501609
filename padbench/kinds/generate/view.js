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

registerKind("generate", {
  plural: "generate jobs",
  model: modelLabel,
  mode: () => "generate",
  charts(container, result) {
    outputRateChart(container, result);
    contextChart(container, result);
  },
});
