// Attention sweeps on the dashboard: time and memory per kernel and sequence length. Loaded after common.js
// and charts.js.
"use strict";

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

function attentionTable(result) {
  const kernels = [...new Set(result.cells.map((cell) => cell.kernel))];
  const lengths = [...new Set(result.cells.map((cell) => cell.seq_len))].sort((a, b) => a - b);
  const byKey = new Map(result.cells.map((cell) => [`${cell.kernel}@${cell.seq_len}`, cell]));
  const show = (cell) => (!cell ? MISSING : cell.status !== "ok" ? cell.status
    : `${cell.median_ms.toPrecision(3)} ms · ${fmt.bytes(cell.peak_memory_bytes)}`);
  const rows = lengths.map((n) => el("tr", {}, el("td", { text: String(n) }),
    ...kernels.map((kernel) => el("td", { text: show(byKey.get(`${kernel}@${n}`)) }))));
  return [el("p", { className: "hint", text: "median time per call · peak memory above the inputs" }),
          el("table", { className: "grid results" },
             el("thead", {}, el("tr", {}, el("th", { text: "N" }), ...kernels.map((k) => el("th", { text: k })))),
             el("tbody", {}, ...rows))];
}

registerKind("attention", {
  plural: "attention sweeps",
  model: (spec) => `attention B${spec.batch} H${spec.heads} D${spec.head_dim}`,
  mode: (spec) => spec.direction,
  table: attentionTable,
  charts: attentionCharts,
});
