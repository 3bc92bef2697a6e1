// The attention-kernels demo (problem 5): a row per sequence length as the worker measures the
// three implementations, then time and memory against length, drawn from figures built in Python.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  function mb(n) { return n === 0 ? "0 (not visible)" : (n / 1e6).toPrecision(3) + " MB"; }

  function reset(root) {
    const table = root.querySelector(".ak-table");
    table.querySelector("tbody").replaceChildren();
    table.hidden = true;
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
    root.querySelector(".ak-status").textContent = "";
  }

  function handlers(root) {
    const el = lib().el;
    return {
      started: function (d) {
        root.querySelector(".ak-status").textContent = d.heads + " heads of " + d.head_dim +
          ", tiles of " + d.tile + ", on " + d.device + ": lengths " + d.lengths.join(", ") + ".";
      },
      length: function (d) {
        const table = root.querySelector(".ak-table");
        table.hidden = false;
        const k = d.kernels;
        const worst = Math.max(k.naive.max_error, k.tiled.max_error, k.sdpa.max_error);
        const tr = el("tr");
        [d.tokens.toLocaleString("en-US"), (1e3 * k.naive.seconds).toPrecision(3),
         (1e3 * k.tiled.seconds).toPrecision(3), (1e3 * k.sdpa.seconds).toPrecision(3),
         mb(k.naive.intermediate_bytes), mb(k.tiled.intermediate_bytes), mb(k.sdpa.intermediate_bytes),
         worst.toExponential(1)].forEach(function (cell, i) {
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

  window.courseDemos.modules["attention-kernels"] = { reset: reset, handlers: handlers };
})();
