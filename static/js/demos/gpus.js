// Problem 12's demo: this worker's measured roofline (its matmul rate, copy bandwidth and a
// decode-shaped sweep, read from /demos/hardware) drawn onto the rooflines plot of the
// calculator above it, with a table of the sweep; "Measure this worker" asks for a new one.
(function () {
  "use strict";
  const TERA = 1e12;

  function number(value, digits) {
    if (!isFinite(value)) return "–";
    return Number(value.toPrecision(digits || 3)).toLocaleString("en-US");
  }

  function rate(flops) {
    if (flops >= 1e12) return number(flops / 1e12) + " TFLOP/s";
    if (flops >= 1e9) return number(flops / 1e9) + " GFLOP/s";
    return number(flops / 1e6) + " MFLOP/s";
  }

  function bandwidth(bytes) {
    if (bytes >= 1e12) return number(bytes / 1e12) + " TB/s";
    return number(bytes / 1e9) + " GB/s";
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function csrfToken() {
    try {
      const headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
      if (headers["X-CSRFToken"]) return headers["X-CSRFToken"];
    } catch (e) { /* fall back to the cookie */ }
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function plotOf(root) {
    const calc = document.getElementById(root.dataset.roofline);
    return calc ? calc.querySelector(".plot") : null;
  }

  function traces(m) {
    // The plot has no legend: each of the worker's traces is named on the plot.
    const xs = [];
    for (let i = 0; i <= 60; i++) xs.push(0.1 * Math.pow(1e6, i / 60));
    const label = xs.map(function (_, i) { return i === 6 ? "this worker, measured (" + m.device + ", " + m.dtype + ")" : ""; });
    const sweep = m.sweep.map(function (s) { return s.intensity; });
    return [
      { type: "scatter", mode: "lines+text", name: "this worker, measured", meta: "worker",
        showlegend: false, x: xs, text: label, textposition: "top right", textfont: { size: 11 },
        y: xs.map(function (x) { return Math.min(m.peak_flops, x * m.copy_bytes_per_second) / TERA; }),
        line: { color: "#555555", width: 2, dash: "dash" } },
      { type: "scatter", mode: "markers", name: "worker sweep, measured", meta: "worker",
        showlegend: false, x: sweep, y: m.sweep.map(function (s) { return s.achieved / TERA; }),
        marker: { color: "#555555", size: 8 } },
      { type: "scatter", mode: "markers", name: "worker sweep, predicted", meta: "worker",
        showlegend: false, x: sweep, y: m.sweep.map(function (s) { return s.predicted / TERA; }),
        marker: { color: "#555555", size: 10, symbol: "circle-open", line: { width: 2 } } },
    ];
  }

  // The calculator's plot is drawn by plots.js (and redrawn by htmx): add the worker's lines
  // once it is there, and again after each redraw.
  function overlay(root, m, tries) {
    const plot = plotOf(root);
    if (!plot || !window.Plotly || !plot.classList.contains("js-plotly-plot") || !plot.data) {
      if ((tries || 0) < 50) setTimeout(function () { overlay(root, m, (tries || 0) + 1); }, 200);
      return;
    }
    if (plot.data.some(function (t) { return t.meta === "worker"; })) return;
    window.Plotly.addTraces(plot, traces(m)).then(function () {
      plot.classList.add("worker-drawn");
      root.dataset.overlay = "drawn";
    });
  }

  function show(root, m) {
    root.measurement = m;
    root.querySelector(".hw-state").textContent = "Measured " + m.measured_at.replace("T", " ") +
      " on " + m.hostname + " (" + m.device + ", " + m.device_name + ", " + m.threads + " threads, " +
      m.dtype + "): matmul " + rate(m.peak_flops) + ", copy " + bandwidth(m.copy_bytes_per_second) +
      " (bytes read and written), ridge " + number(m.ridge) + " FLOP/B.";
    const table = el("table", "plot-table");
    table.appendChild(el("caption", "", "A decode-shaped multiply (a batch of rows times a " +
      m.sweep_k.toLocaleString("en-US") + " × " + m.sweep_k.toLocaleString("en-US") + " matrix), measured against min(peak, intensity × bandwidth)"));
    const head = el("tr");
    ["batch", "intensity (FLOP/B)", "measured", "predicted", "measured ÷ predicted"].forEach(function (h) {
      const th = el("th", "", h); th.scope = "col"; head.appendChild(th);
    });
    const thead = el("thead"); thead.appendChild(head); table.appendChild(thead);
    const body = el("tbody");
    m.sweep.forEach(function (s) {
      const tr = el("tr");
      const th = el("th", "", String(s.batch)); th.scope = "row"; tr.appendChild(th);
      [number(s.intensity), rate(s.achieved), rate(s.predicted), number(s.achieved / s.predicted)].forEach(function (c) {
        tr.appendChild(el("td", "", c));
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    root.querySelector(".hw-table").replaceChildren(table);
    root.dataset.measured = m.measured_at;
    overlay(root, m);
  }

  async function latest(root) {
    const response = await fetch(root.dataset.hardwareUrl, { credentials: "same-origin" });
    if (response.status !== 200) return null;
    const m = await response.json();
    return m.measured === false ? null : m;
  }

  function wire(root) {
    if (root.dataset.wired) return;
    root.dataset.wired = "1";
    latest(root).then(function (m) { if (m) show(root, m); }).catch(function () {});
    const button = root.querySelector(".hw-measure");
    const error = root.querySelector(".hw-error");
    button.addEventListener("click", async function () {
      error.textContent = "";
      button.disabled = true;
      const before = root.dataset.measured || "";
      const response = await fetch(root.dataset.measureUrl, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() }, body: "{}",
      });
      let data = {};
      try { data = await response.json(); } catch (e) { data = {}; }
      if (response.status !== 202) {
        error.textContent = data.error || "The measurement could not be started.";
        button.disabled = false;
        return;
      }
      root.querySelector(".hw-state").textContent = "Measuring: a worker times a matmul, a copy and a sweep (a few seconds)…";
      let polls = 0;
      const timer = setInterval(async function () {
        polls += 1;
        const m = await latest(root).catch(function () { return null; });
        if (m && m.measured_at !== before) {
          clearInterval(timer);
          const plot = plotOf(root);
          if (plot && plot.data && window.Plotly) {
            const old = plot.data.map(function (t, i) { return t.meta === "worker" ? i : -1; })
              .filter(function (i) { return i >= 0; });
            if (old.length) window.Plotly.deleteTraces(plot, old);
          }
          show(root, m);
          button.disabled = false;
        } else if (polls >= 30) {
          clearInterval(timer);
          error.textContent = "No worker answered within a minute. Is the experiments worker running?";
          button.disabled = false;
        }
      }, 2000);
    });
    document.addEventListener("htmx:afterSettle", function () {
      if (root.measurement) overlay(root, root.measurement);
    });
    // plots.js draws the rooflines plot when it comes into view, perhaps long after this.
    document.addEventListener("course:plotdrawn", function () {
      if (root.measurement) overlay(root, root.measurement);
    });
  }

  function start() { document.querySelectorAll(".demo-gpus[data-hardware-url]").forEach(wire); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
