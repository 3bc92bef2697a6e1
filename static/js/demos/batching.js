// The batching demo (problem 6): each mode's steps drawn live as an occupancy strip (one bar
// per step, its height the sequences in the step), counters beside it, then a table per mode
// and the plots comparing measured with predicted.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }

  function reset(root) {
    root.querySelector(".batching-live").hidden = true;
    root.querySelectorAll(".occupancy-strip").forEach(function (s) { s.replaceChildren(); });
    root.querySelectorAll(".batching-counters").forEach(function (p) { p.textContent = ""; });
    const table = root.querySelector(".batching-table");
    table.querySelector("tbody").replaceChildren();
    table.hidden = true;
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
  }

  function handlers(root) {
    const el = lib().el;
    let seats = 1;
    function section(mode) { return root.querySelector('.batching-mode[data-mode="' + mode + '"]'); }
    return {
      started: function (d) {
        seats = d.batch;
        root.querySelector(".batching-live").hidden = false;
      },
      step: function (d) {
        const box = section(d.mode);
        const bar = el("span", "occupancy-bar");
        bar.style.height = Math.max(2, Math.round(40 * d.num_seqs / seats)) + "px";
        bar.title = "step " + d.index + ": " + d.num_seqs + " of " + seats + " seats";
        box.querySelector(".occupancy-strip").appendChild(bar);
        const rate = d.t_ms > 0 ? (1000 * d.tokens / d.t_ms).toFixed(0) : "–";
        box.querySelector(".batching-counters").textContent = "step " + (d.index + 1) + ", " +
          d.num_seqs + " of " + seats + " seats busy, " + d.tokens + " tokens, " + rate + " tokens/s";
      },
      mode: function (d) {
        const table = root.querySelector(".batching-table");
        table.hidden = false;
        const tr = el("tr");
        [d.mode, d.tokens_per_s.toFixed(0), (100 * d.occupancy).toFixed(0) + "%", String(d.steps),
         d.ttft_p50_ms.toFixed(0) + " / " + d.ttft_p99_ms.toFixed(0),
         d.tpot_p50_ms.toFixed(2) + " / " + d.tpot_p99_ms.toFixed(2)].forEach(function (cell, i) {
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

  window.courseDemos.modules.batching = { reset: reset, handlers: handlers };
})();
