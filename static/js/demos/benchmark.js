// The benchmark demo (problem 18): the methodology table from the start, a row per backend
// and load point as each is measured, then the plots built in Python (problems/plots.py)
// beside their tables, and the note.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  function ms(x) { return x === null || x === undefined ? "–" : (1000 * x).toPrecision(3); }
  function num(x) { return x === null || x === undefined ? "–" : x.toPrecision(3); }

  function reset(root) {
    ["bench-method", "bench-points"].forEach(function (name) {
      const table = root.querySelector("." + name);
      table.querySelector("tbody").replaceChildren();
      table.hidden = true;
    });
    root.querySelector(".bench-progress").textContent = "";
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
  }

  function handlers(root) {
    const el = lib().el;
    function row(table, cells) {
      const tr = el("tr");
      cells.forEach(function (cell, i) {
        const td = el(i === 0 ? "th" : "td", "", cell);
        if (i === 0) td.scope = "row";
        tr.appendChild(td);
      });
      table.querySelector("tbody").appendChild(tr);
    }
    return {
      started: function (d) {
        const table = root.querySelector(".bench-method");
        d.methodology.forEach(function (cells) { row(table, cells); });
        table.hidden = false;
        root.querySelector(".bench-progress").textContent = "Warming up both backends…";
      },
      warmup: function (d) {
        root.querySelector(".bench-progress").textContent = "Warmed up: " + d.backend + ".";
      },
      point: function (d) {
        const table = root.querySelector(".bench-points");
        table.hidden = false;
        row(table, [d.backend, d.label, d.completed + (d.failed ? " (" + d.failed + " failed)" : ""),
          num(d.output_throughput), ms(d.p50_ttft), ms(d.p99_ttft), ms(d.p50_tpot), ms(d.p99_itl),
          ms(d.p99_e2e), num(d.goodput)]);
        root.querySelector(".bench-progress").textContent = "Measured " + d.backend + " at " + d.label + ".";
      },
      finished: function (d) {
        root.querySelector(".bench-progress").textContent = "";
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  window.courseDemos.modules.benchmark = { reset: reset, handlers: handlers };
})();
