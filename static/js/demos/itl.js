// The itl demo (problem 9): a row per batch size as it is measured, plain and with the lever,
// then the TPOT–throughput curves against the arithmetic's floor.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }

  function reset(root) {
    const table = root.querySelector(".itl-table");
    table.querySelector("tbody").replaceChildren();
    table.hidden = true;
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
  }

  function add(root, label, d) {
    const el = lib().el;
    const table = root.querySelector(".itl-table");
    table.hidden = false;
    const tr = el("tr");
    [label, String(d.batch), d.tpot_ms.toFixed(2), d.tokens_per_s.toPrecision(4), d.tokens_per_step.toPrecision(3),
     d.floor_ms.toFixed(2)].forEach(function (cell, i) {
      tr.appendChild(el(i === 0 ? "th" : "td", "", cell));
    });
    table.querySelector("tbody").appendChild(tr);
  }

  function handlers(root) {
    return {
      batch: function (d) { add(root, "plain", d); },
      lever_batch: function (d) { add(root, "with " + (d.lever || "the lever"), d); },
      finished: function (d) {
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  window.courseDemos.modules.itl = { reset: reset, handlers: handlers };
})();
