// Charts drawn with the vendored Chart.js: what every kind's charts are made of (kinds/<kind>.js draws its
// own: tokens/s per layout, attention time against sequence length, …), a job's charts, and compared jobs.
"use strict";

const PALETTE = ["#2f6fb3", "#d9822b", "#3a9d5d", "#b33f40", "#7d5ba6", "#8c6d31", "#d45087", "#5f6b6d"];

function chartIn(container, title) {
  const canvas = el("canvas");
  container.append(el("div", { className: "chart" }, el("h3", { text: title }), canvas));
  return canvas;
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

function drawResultCharts(container, result) {
  container.replaceChildren();
  kindOf(result.kind).charts(container, result);
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
