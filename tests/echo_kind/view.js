// The echo kind on the dashboard: its lines as a table. Loaded after common.js and charts.js.
"use strict";

registerKind("echo", {
  plural: "echo jobs",
  model: (spec) => `echo ${spec.word}`,
  mode: () => "aloud",
  table: (result) => [el("table", { className: "grid results echo" },
    el("tbody", {}, ...result.lines.map((line) => el("tr", {}, el("td", { text: line })))))],
  charts: () => {},
});
