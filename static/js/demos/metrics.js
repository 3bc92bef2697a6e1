// The metrics demo (problem 16): a dashboard fed by each tick of the run (the engine's gauges
// and hit rate, this run's latency percentiles), a live chart, then the closing plots built in
// Python (problems/plots.py) beside their tables, the note and the worker's /metrics lines.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toPrecision(3) + "%"; }
  function secs(x) {
    if (x === null || x === undefined) return "–";
    // By the rounded milliseconds: 0.9996 s would otherwise read "1.00e+3 ms".
    const ms = 1000 * x;
    return ms >= 999.5 ? x.toFixed(2) + " s" : ms.toPrecision(3) + " ms";
  }
  function pair(q) { return secs(q.p50) + " · " + secs(q.p99); }
  function dollars(x) { return x === null || x === undefined ? "–" : "$" + x.toPrecision(3); }

  function reset(root) {
    root.querySelector(".metrics-live").hidden = true;
    root.querySelector(".metrics-live-plot").replaceChildren();
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
    root.querySelector(".metrics-scrape").hidden = true;
  }

  function handlers(root) {
    const ticks = [];
    function tile(name, text) { root.querySelector('[data-tile="' + name + '"]').textContent = text; }
    function chart() {
      const target = root.querySelector(".metrics-live-plot");
      return lib().plotlyLoad(root.dataset.plotlySrc).then(function (Plotly) {
        const t = ticks.map(function (d) { return d.t; });
        function ms(key, q) { return ticks.map(function (d) { return d[key][q] === null ? null : 1000 * d[key][q]; }); }
        const data = [
          { x: t, y: ms("ttft", "p99"), name: "TTFT p99 (ms)", mode: "lines+markers" },
          { x: t, y: ms("e2e", "p99"), name: "E2E p99 (ms)", mode: "lines+markers" },
          { x: t, y: ticks.map(function (d) { return d.waiting; }), name: "waiting", yaxis: "y2", mode: "lines", line: { dash: "dot" } },
          { x: t, y: ticks.map(function (d) { return d.running; }), name: "running", yaxis: "y2", mode: "lines", line: { dash: "dash" } },
        ];
        const layout = { title: { text: "Live: p99 latency and the queue" }, height: 320,
          margin: { t: 40, r: 50, b: 40, l: 55 }, xaxis: { title: { text: "seconds into the run" } },
          yaxis: { title: { text: "ms" }, rangemode: "tozero" },
          yaxis2: { title: { text: "requests" }, overlaying: "y", side: "right", rangemode: "tozero" },
          legend: { orientation: "h", y: -0.25 } };
        return Plotly.react(target, data, layout, { displayModeBar: false, responsive: true });
      });
    }
    function scrape(text) {
      if (!text) return;
      root.querySelector(".metrics-text").textContent = text;
      root.querySelector(".metrics-scrape").hidden = false;
    }
    return {
      started: function (d) {
        root.querySelector(".metrics-live").hidden = false;
        root.querySelectorAll(".metrics-window").forEach(function (span) {
          span.textContent = "(requests finished in the last " + d.window_s + " s)";
        });
      },
      tick: function (d) {
        ticks.push(d);
        root.querySelector(".metrics-live").hidden = false;
        tile("requests", d.sent + " / " + d.finished);
        tile("queue", d.waiting + " · " + d.running);
        tile("kv", pct(d.kv_usage));
        tile("hit", pct(d.hit_rate));
        tile("tps", d.tokens_per_s.toFixed(1));
        tile("ttft", pair(d.ttft));
        tile("tpot", pair(d.tpot));
        tile("e2e", pair(d.e2e));
        tile("cost", dollars(d.cost_per_request));
        scrape(d.metrics_text);
        chart();
      },
      finished: function (d) {
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note + (d.cost.per_request === null ? "" :
          " At $" + d.cost.price_per_hour + " an hour for this worker, the run cost " +
          dollars(d.cost.per_request) + " per request, " + dollars(d.cost.per_million_output_tokens) +
          " per million output tokens: a small model on a CPU, so the figure says how the arithmetic works, not what a GPU would charge.");
        note.hidden = false;
        scrape(d.metrics_text);
      },
    };
  }

  window.courseDemos.modules.metrics = { reset: reset, handlers: handlers };
})();
