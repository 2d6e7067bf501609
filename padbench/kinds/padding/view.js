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

// A scaling axis's row names its GPU count (the label property of StrategyResult): each count is a row of its own.
function rowLabel(row) {
  const gpus = row.scaling ? row.scaling.gpus : null;
  return gpus == null ? strategyLabel(row) : `${strategyLabel(row)} on ${gpus} GPU${gpus > 1 ? "s" : ""}`;
}

// compareKernel: the kernel with a mixture of experts' implementation, as the CLI's compare keys name it
// (compare_kernel in padbench/kinds/padding/experts.py).
function compareKernel(row) { return row.experts ? `${row.kernel} · ${row.experts}` : row.kernel; }

// --- charts ---------------------------------------------------------------------------------------------
function validRows(result) { return result.strategies.filter((row) => row.status === "ok" && row.tokens_per_s != null); }

// A layout measured at several batch sizes shows its fastest here; the batch-size chart shows them all.
function fastestPerLayout(rows) {
  const best = new Map();
  for (const row of rows) {
    const key = `${rowLabel(row)} · ${compareKernel(row)}`;
    if (!best.has(key) || best.get(key).tokens_per_s < row.tokens_per_s) best.set(key, row);
  }
  return [...best.values()];
}

function throughputChart(container, result) {
  const rows = fastestPerLayout(validRows(result));
  if (!rows.length) return;
  new Chart(chartIn(container, "tokens/s per layout, with padding efficiency"), {
    data: {
      labels: rows.map((row) => `${rowLabel(row)} · ${compareKernel(row)}`),
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
    const key = `${rowLabel(row)} · ${compareKernel(row)}`;
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

// A scaling axis (gpus: [1, 2, 4]): tokens/s per GPU against the GPU count for each row, and the scaling
// efficiency (against the smallest count) on a second chart (scaling_curves in padbench/kinds/padding/scaling.py).
function scalingCurves(result, figure) {
  const curves = new Map();
  for (const row of result.strategies) {
    const point = row.scaling;
    if (point == null || point.tokens_per_s_per_gpu == null || point[figure] == null) continue;
    const key = `${strategyLabel(row)} · ${compareKernel(row)} @ ${row.batch_size}`;
    if (!curves.has(key)) curves.set(key, []);
    curves.get(key).push({ x: point.gpus, y: point[figure] });
  }
  return [...curves].filter(([, points]) => points.length > 1)
    .map(([key, points]) => [key, points.sort((a, b) => a.x - b.x)]);
}

function scalingCharts(container, result) {
  const perGpu = scalingCurves(result, "tokens_per_s_per_gpu");
  if (!perGpu.length) return;
  lineChart(chartIn(container, "tokens/s per GPU against GPU count"), perGpu, "GPUs", "tokens/s per GPU", false);
  const efficiency = scalingCurves(result, "efficiency");
  if (efficiency.length) {
    lineChart(chartIn(container, "scaling efficiency against GPU count (1 = tokens/s per GPU of the smallest count)"),
              efficiency, "GPUs", "scaling efficiency", false);
  }
}

registerKind("padding", {
  plural: "padding jobs",
  model: modelLabel,
  mode: (spec) => spec.mode,
  charts(container, result) {
    throughputChart(container, result);
    batchSizeChart(container, result);
    scalingCharts(container, result);
  },
});
