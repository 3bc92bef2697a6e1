// The kv-bytes demo (problem 3): a row per KV-cache precision as the worker measures it, then
// the bytes against the formula and the drift, drawn from figures built in Python.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  function bytes(n) { return Math.round(n).toLocaleString("en-US") + " B"; }

  function reset(root) {
    const table = root.querySelector(".kv-bytes-table");
    table.querySelector("tbody").replaceChildren();
    table.hidden = true;
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
    root.querySelector(".kv-bytes-progress").textContent = "";
  }

  function handlers(root) {
    const el = lib().el;
    return {
      started: function (d) {
        root.querySelector(".kv-bytes-progress").textContent = d.lengths.length +
          " sequences (" + d.tokens.toLocaleString("en-US") + " tokens) in blocks of " +
          d.block_size + ", then " + d.documents + " held-out documents (" +
          d.positions.toLocaleString("en-US") + " positions), for " + d.names.join(", ") + ".";
      },
      precision: function (d) {
        const table = root.querySelector(".kv-bytes-table");
        table.hidden = false;
        const tr = el("tr");
        [d.name, String(d.element_bytes), d.tokens.toLocaleString("en-US"), String(d.blocks),
         bytes(d.bytes_measured), bytes(d.bytes_formula), bytes(d.bytes_formula_blocks),
         (100 * d.agreement).toFixed(1) + "%", d.kl_mean.toPrecision(3)].forEach(function (cell, i) {
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

  window.courseDemos.modules["kv-bytes"] = { reset: reset, handlers: handlers };
})();
