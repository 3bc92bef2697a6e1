// The chunked-prefill demo (problem 7): a row per engine step after the long prompt arrives
// (the streams' largest gap and the prompt tokens it computed), a row per mode, then the plots.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }

  function reset(root) {
    [".chunked-live", ".chunked-table"].forEach(function (sel) {
      const table = root.querySelector(sel);
      table.querySelector("tbody").replaceChildren();
      table.hidden = true;
    });
    root.querySelector(".demo-plots").replaceChildren();
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
      gap: function (d) {
        row(root.querySelector(".chunked-live"), [d.mode, d.t_ms.toFixed(1), d.gap_ms.toFixed(1),
          String(d.prefill_tokens)]);
      },
      mode: function (d) {
        row(root.querySelector(".chunked-table"), [d.mode, String(d.budget), String(d.chunks),
          d.ttft_ms.toFixed(1), d.max_gap_ms.toFixed(1), d.decode_gap_ms.toFixed(1)]);
      },
      finished: function (d) {
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  window.courseDemos.modules["chunked-prefill"] = { reset: reset, handlers: handlers };
})();
