// The tail-latency demo (problem 17): the measured capacity, the percentiles and a histogram
// redrawn while the Poisson load runs, then the slowest requests and the final plots.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  function s(x) { return x.toPrecision(3); }
  function triple(p) { return s(p.p50) + " / " + s(p.p90) + " / " + s(p.p99); }

  function reset(root) {
    root.querySelectorAll(".demo-table").forEach(function (t) {
      t.querySelector("tbody").replaceChildren();
      t.hidden = true;
    });
    root.querySelectorAll(".demo-plots").forEach(function (p) { p.replaceChildren(); });
    root.querySelector(".tail-capacity").hidden = true;
    root.querySelector(".run-note").hidden = true;
  }

  function row(table, cells) {
    const el = lib().el;
    const tr = el("tr");
    cells.forEach(function (cell, i) { tr.appendChild(el(i === 0 ? "th" : "td", "", cell)); });
    table.hidden = false;
    table.querySelector("tbody").appendChild(tr);
  }

  function handlers(root) {
    return {
      capacity: function (d) {
        const p = root.querySelector(".tail-capacity");
        p.textContent = "Measured capacity " + s(d.requests_per_s) + " requests/s (mean service " +
          s(d.mean_service_s) + " s); arrivals now at " + s(d.arrival_rate) + " requests/s.";
        p.hidden = false;
      },
      tick: function (d) {
        row(root.querySelector(".tail-live-table"), [s(d.elapsed_s), d.arrived + " of " + d.total,
          String(d.finished), String(d.running), triple(d.ttft), triple(d.e2e)]);
        if (d.plots.length) {
          lib().plotsDraw(root.querySelector(".tail-live"), d.plots, root.dataset.plotlySrc);
        }
      },
      finished: function (d) {
        const table = root.querySelector(".tail-slow-table");
        d.slowest.forEach(function (r) {
          row(table, [r.prompt + " → " + r.output, s(r.queue_s), s(r.prefill_s), s(r.decode_s),
            s(r.preempted_s) + (r.preemptions ? " (" + r.preemptions + "×)" : ""), s(r.e2e_s)]);
        });
        root.querySelector(".tail-live").replaceChildren();
        lib().plotsDraw(root.querySelector(".tail-final"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  window.courseDemos.modules["tail-latency"] = { reset: reset, handlers: handlers };
})();
