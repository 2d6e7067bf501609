// Tune jobs on the dashboard: every measured trial's tokens/s against its peak memory, the chosen one ringed.
// Loaded after common.js and charts.js; the table and the verdict come from the server.
"use strict";

const TUNE_FATES = { finalist: PALETTE[2], stopped: PALETTE[0] };

function tunePoints(result, fate) {
  return result.trials.filter((trial) => trial.fate === fate && trial.tokens_per_s && trial.peak_memory_bytes)
    .map((trial) => ({ x: trial.peak_memory_bytes / 2 ** 30, y: trial.tokens_per_s, label: tuneLabel(trial.config) }));
}

function tuneLabel(config) {
  return [config.layout, config.kernel, `batch ${config.batch_size}`, config.checkpointing && `ckpt ${config.checkpointing}`,
          config.precision, config.compile ? "compiled" : "eager"].filter(Boolean).join(" · ");
}

function tuneChart(container, result) {
  const datasets = Object.entries(TUNE_FATES).map(([fate, colour]) => (
    { label: fate, data: tunePoints(result, fate), backgroundColor: colour }));
  const chosen = result.winner == null ? null : result.trials[result.winner];
  if (chosen && chosen.tokens_per_s && chosen.peak_memory_bytes) {
    datasets.push({ label: `chosen: ${tuneLabel(chosen.config)}`, pointRadius: 10, pointStyle: "circle",
                    backgroundColor: "rgba(0,0,0,0)", borderColor: "#000", borderWidth: 2,
                    data: [{ x: chosen.peak_memory_bytes / 2 ** 30, y: chosen.tokens_per_s }] });
  }
  if (!datasets.some((set) => set.data.length)) return;
  new Chart(chartIn(container, "tokens/s against peak memory, every measured configuration"), {
    type: "scatter",
    data: { datasets },
    options: { animation: false,
               plugins: { tooltip: { callbacks: { label: (item) => item.raw.label || item.dataset.label } } },
               scales: { x: { title: { display: true, text: "peak memory (GiB)" } },
                         y: { beginAtZero: true, title: { display: true, text: "tokens/s" } } } },
  });
}

registerKind("tune", {
  plural: "tunes",
  model: modelLabel,
  mode: (spec) => `tune ${spec.mode || "training"}`,
  charts: tuneChart,
});
