// Charts drawn with the vendored Chart.js: tokens/s per layout with padding efficiency, tokens/s against
// batch size, attention time and memory against sequence length (log axes), and compared jobs.
"use strict";

const PALETTE = ["#2f6fb3", "#d9822b", "#3a9d5d", "#b33f40", "#7d5ba6", "#8c6d31", "#d45087", "#5f6b6d"];

function chartIn(container, title) {
  const canvas = el("canvas");
  container.append(el("div", { className: "chart" }, el("h3", { text: title }), canvas));
  return canvas;
}

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

function lineChart(canvas, datasets, xTitle, yTitle, logY) {
  return new Chart(canvas, {
    type: "line",
    data: { datasets: datasets.map(([label, points], index) => ({
      label, data: points, borderColor: PALETTE[index % PALETTE.length],
      backgroundColor: PALETTE[index % PALETTE.length] })) },
    options: {
      animation: false, parsing: true,
      scales: {
        x: { type: "logarithmic", title: { display: true, text: xTitle } },
        y: { type: logY ? "logarithmic" : "linear", title: { display: true, text: yTitle } },
      },
    },
  });
}

function batchSizeChart(container, result) {
  const curves = batchCurves(result);
  if (curves.length) lineChart(chartIn(container, "tokens/s against batch size"), curves, "batch size", "tokens/s", false);
}

function sweepLines(result, value) {
  const lines = new Map();
  for (const cell of result.cells) {
    const y = value(cell);
    if (cell.status !== "ok" || y == null || y <= 0) continue;
    if (!lines.has(cell.kernel)) lines.set(cell.kernel, []);
    lines.get(cell.kernel).push({ x: cell.seq_len, y });
  }
  return [...lines].map(([kernel, points]) => [kernel, points.sort((a, b) => a.x - b.x)]);
}

function attentionCharts(container, result) {
  lineChart(chartIn(container, "time per call against sequence length"),
            sweepLines(result, (cell) => cell.median_ms), "sequence length", "median ms", true);
  lineChart(chartIn(container, "peak memory against sequence length"),
            sweepLines(result, (cell) => cell.peak_memory_bytes && cell.peak_memory_bytes / 2 ** 20),
            "sequence length", "MiB above the inputs", true);
}

function drawResultCharts(container, result) {
  container.replaceChildren();
  if (result.kind === "padding") {
    throughputChart(container, result);
    batchSizeChart(container, result);
  } else {
    attentionCharts(container, result);
  }
  container.hidden = !container.children.length;
}

function comparisonChart(canvas, jobs, rows, metricLabel) {
  new Chart(canvas, {
    type: "bar",
    data: {
      labels: rows.map((row) => row.key.join(" · ")),
      datasets: jobs.map((job, index) => ({ label: `job ${job.id}`, data: valuesOf(rows, index),
                                            backgroundColor: PALETTE[index % PALETTE.length] })),
    },
    options: { animation: false, scales: { y: { beginAtZero: true, title: { display: true, text: metricLabel } } } },
  });
}

function valuesOf(rows, index) { return rows.map((row) => row.values[index]); }
