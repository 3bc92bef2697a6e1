// The utilization demo (problem 14): a row per batch size as it is measured, then the step
// time against the floor and the busy share against MFU.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toPrecision(3) + "%"; }

  function reset(root) {
    const table = root.querySelector(".utilization-table");
    table.querySelector("tbody").replaceChildren();
    table.hidden = true;
    table.querySelector(".lean-col").hidden = true;
    root.querySelector(".utilization-peaks").hidden = true;
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
  }

  function handlers(root) {
    const el = lib().el;
    // A rate given per millisecond, in G or T with three figures and no exponent: a GPU's
    // hundreds of TFLOP/s read as such, not as "7.00e+5 GFLOP/s".
    function rate(perMs, unit) {
      const perS = perMs * 1e3;
      const [scale, prefix] = perS >= 1e12 ? [1e12, " T"] : [1e9, " G"];
      return Number((perS / scale).toPrecision(3)).toLocaleString("en-US") + prefix + unit + "/s";
    }
    return {
      started: function (d) {
        // The peaks every MFU and MBU below is divided by, measured when this worker started.
        const peaks = root.querySelector(".utilization-peaks");
        // Each rate's `how` may hold parentheses of its own, so it follows after a comma.
        peaks.textContent = "This worker's measured peaks on " + d.device + ": " +
          rate(d.machine.matmul_flops_per_s / 1e3, "FLOP") + ", " + d.machine.matmul_how + "; and " +
          rate(d.machine.memory_bytes_per_s / 1e3, "B") + ", " + d.machine.memory_how + ".";
        peaks.hidden = false;
      },
      batch: function (d) {
        const table = root.querySelector(".utilization-table");
        table.hidden = false;
        const tr = el("tr");
        const busy = d.device_busy === null ? d.forward_share : d.device_busy;
        const cells = [String(d.batch), d.step_ms.toFixed(2), d.model_ms.toFixed(2), d.host_ms.toFixed(2), pct(busy),
          rate(d.flops / d.step_ms, "FLOP") + ", " + rate(d.bytes / d.step_ms, "B"), pct(d.mfu_wall), pct(d.mbu_wall), d.predicted_floor_ms.toFixed(2) + " (" + d.predicted_bound + ")"];
        if (d.lean) {
          // The lever, measured right after: host time with greedy sampling and no text.
          table.querySelector(".lean-col").hidden = false;
          cells.push(d.lean.host_ms.toFixed(2));
        }
        cells.forEach(function (cell, i) {
          tr.appendChild(el(i === 0 ? "th" : "td", "", cell));
        });
        table.querySelector("tbody").appendChild(tr);
      },
      finished: function (d) {
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  window.courseDemos.modules.utilization = { reset: reset, handlers: handlers };
})();
