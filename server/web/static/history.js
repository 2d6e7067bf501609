// The history page: a row's figure over time (`/history/FINGERPRINT`), or that of every row of a job
// (`/history?job=ID`), as GET /v1/history returns it. Each point is whiskered with its 95% interval; a point
// whose versions (padbench, torch, transformers, CUDA, driver, kernel packages) changed from the point before
// is a triangle under a dashed line that names the change; a baseline's point is a diamond; a point whose row
// is slower than a baseline's beyond noise is red. The table under each chart says the same in words.
// Loaded after common.js and charts.js, before pages.js (which starts it).
"use strict";

const SLOWER = "#b33f40";

function historyFigure(value) {
  if (value == null) return MISSING;
  return value < 1000 ? value.toLocaleString("en-US", { maximumSignificantDigits: 4 }) : fmt.int(value);
}

function historyInterval(point) {
  return point.ci95_low == null || point.ci95_high == null ? MISSING
    : `${historyFigure(point.ci95_low)}–${historyFigure(point.ci95_high)}`;
}

// As `padbench history` prints a change: `torch 2.13.0 → 2.14.0; CUDA 12.4 → 12.6`.
function versionChanges(point) {
  return Object.entries(point.changed)
    .map(([name, [before, after]]) => `${name} ${before || "(none)"} → ${after || "(none)"}`).join("; ");
}

function isSlower(point) {
  return point.against.some((check) => check.verdict === "slower" || check.verdict === "missing");
}

function pointStyleOf(point) {
  if (point.baselines.length) return "rectRot";
  return Object.keys(point.changed).length ? "triangle" : "circle";
}

// Whiskers for each point's interval and a dashed line, labelled, where the versions changed: drawn on the
// canvas by Chart.js, from what the dataset carries (`intervals`, `changes`).
const historyMarks = {
  id: "historyMarks",
  afterDatasetsDraw(chart) {
    const dataset = chart.data.datasets[0];
    const { ctx, chartArea, scales } = chart;
    const elements = chart.getDatasetMeta(0).data;
    ctx.save();
    ctx.strokeStyle = "#1d2328";
    ctx.fillStyle = "#5b6670";
    ctx.font = "11px system-ui, sans-serif";
    dataset.intervals.forEach((interval, index) => {
      if (!interval || !elements[index]) return;
      const x = elements[index].x;
      const [low, high] = interval.map((value) => scales.y.getPixelForValue(value));
      ctx.setLineDash([]);
      ctx.beginPath();
      ctx.moveTo(x, low); ctx.lineTo(x, high);
      ctx.moveTo(x - 5, low); ctx.lineTo(x + 5, low);
      ctx.moveTo(x - 5, high); ctx.lineTo(x + 5, high);
      ctx.stroke();
    });
    dataset.changes.forEach((change, index) => {
      if (!change || !elements[index]) return;
      const x = elements[index].x;
      ctx.setLineDash([4, 4]);
      ctx.beginPath();
      ctx.moveTo(x, chartArea.top); ctx.lineTo(x, chartArea.bottom);
      ctx.stroke();
      const text = change.length > 60 ? `${change.slice(0, 59)}…` : change;
      // Beside the line, on whichever side the text fits inside the chart.
      const left = x + 4 + ctx.measureText(text).width > chartArea.right;
      ctx.textAlign = left ? "right" : "left";
      ctx.fillText(text, left ? x - 4 : x + 4, chartArea.top + 12);
    });
    ctx.restore();
  },
};

function historyBounds(points) {
  const values = points.flatMap((point) => [point.figure, point.ci95_low, point.ci95_high]).filter((v) => v != null);
  return values.length ? { suggestedMin: Math.min(...values) * 0.97, suggestedMax: Math.max(...values) * 1.03 } : {};
}

function historyTooltip(points) {
  return (item) => {
    const point = points[item.dataIndex];
    const lines = [`${historyFigure(point.figure)} (95% interval ${historyInterval(point)})`];
    if (Object.keys(point.changed).length) lines.push(`changed: ${versionChanges(point)}`);
    for (const name of point.baselines) lines.push(`baseline ${name}`);
    for (const check of point.against) lines.push(`vs ${check.baseline}: ${check.line}`);
    return lines;
  };
}

function historyChart(canvas, found) {
  const points = found.points;
  new Chart(canvas, {
    type: "line",
    data: {
      labels: points.map((point) => `#${point.job_id} ${point.date.slice(0, 10)}`),
      datasets: [{
        label: found.metric_label, data: points.map((point) => point.figure), borderColor: PALETTE[0],
        pointStyle: points.map(pointStyleOf), pointRadius: points.map((point) => (pointStyleOf(point) === "circle" ? 4 : 7)),
        pointBackgroundColor: points.map((point) => (isSlower(point) ? SLOWER : PALETTE[0])),
        intervals: points.map((point) => (point.ci95_low == null || point.ci95_high == null ? null
          : [point.ci95_low, point.ci95_high])),
        changes: points.map((point) => versionChanges(point) || null),
      }],
    },
    options: {
      animation: false,
      plugins: { legend: { display: false }, tooltip: { callbacks: { label: historyTooltip(points) } } },
      scales: { x: { title: { display: true, text: "job · date the run started" } },
                y: { ...historyBounds(points), title: { display: true, text: found.metric_label } } },
    },
    plugins: [historyMarks],
  });
}

function checkWords(point) {
  return point.against.map((check) => `${check.baseline}: ${check.line}`).join("; ") || MISSING;
}

function flagWords(point) {
  return point.regressions.map((flag) => `${flag.regressed ? "REGRESSED" : "ok"} vs ${flag.baseline}: ${flag.summary}`)
    .join("; ") || MISSING;
}

function historyTable(found) {
  const header = ["job", "date", found.metric_label, "95% interval", "changed since the point before", "baseline",
                  "against baselines", "automatic check"];
  const rows = found.points.map((point) => el("tr", { className: isSlower(point) ? "slower" : "",
                                                       "data-job-id": String(point.job_id) },
    el("td", {}, el("a", { href: `/jobs/${point.job_id}`, text: `#${point.job_id}` })),
    el("td", { text: fmt.when(point.date) }), el("td", { className: "number", text: historyFigure(point.figure) }),
    el("td", { className: "number", text: historyInterval(point) }),
    el("td", { className: "wrap changed", text: versionChanges(point) || MISSING }),
    el("td", { text: point.baselines.join(", ") || MISSING }),
    el("td", { className: "wrap", text: checkWords(point) }), el("td", { className: "wrap", text: flagWords(point) })));
  return el("table", { className: "grid history" }, el("thead", {}, el("tr", {}, ...header.map((name) => el("th", { text: name })))),
            el("tbody", {}, ...rows));
}

function historySection(found) {
  const key = found.key_names.map((name, index) => `${name} ${found.key[index]}`).join(" / ");
  const batch = found.batch == null ? "" : ` · batch ${found.batch}`;
  const canvas = el("canvas");
  const section = el("section", { className: "history", "data-fingerprint": found.fingerprint },
    el("h2", { text: `${key}${batch}` }),
    el("p", { className: "hint" }, `${found.title} · fingerprint `,
       el("a", { href: `/history/${found.fingerprint}`, text: found.fingerprint })),
    el("div", { className: "chart wide" }, canvas), historyTable(found));
  document.getElementById("histories").append(section);
  historyChart(canvas, found);
}

async function startHistory() {
  const { jobId, fingerprint } = document.body.dataset;
  const found = fingerprint ? [await api(`/history/${fingerprint}`)]
    : (await api(`/history?job=${Number(jobId)}`)).histories;
  document.getElementById("histories").replaceChildren();
  found.forEach(historySection);
  if (!found.length) document.getElementById("histories").append(el("p", { className: "hint", text: "No row to show." }));
}
