// The disagg demo (problem 22): a colocated engine, then a prefill engine and a decode engine
// with the KV cache handed over; inter-token gaps, TTFT, bytes moved, then the plots.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }

  function reset(root) {
    const table = root.querySelector(".disagg-layouts");
    table.querySelector("tbody").replaceChildren();
    table.hidden = true;
    root.querySelector(".demo-mode").textContent = "";
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
  }

  function handlers(root) {
    const el = lib().el;
    return {
      started: function (d) {
        root.querySelector(".demo-mode").textContent = d.streams + " streams of " +
          d.stream_tokens + " tokens; " + d.long_prompts + " prompts of " + d.long_tokens +
          " tokens arriving among them (a lone decode step took " + d.decode_step_ms.toFixed(1) +
          " ms here); on " + d.device + ".";
      },
      layout_done: function (d) {
        const table = root.querySelector(".disagg-layouts");
        const bytes = d.transfers.reduce(function (s, x) { return s + x.bytes; }, 0);
        const tr = el("tr");
        [d.layout, d.itl_p50_ms.toFixed(1), d.itl_p99_ms.toFixed(1), d.itl_max_ms.toFixed(1),
         d.long_ttft_ms.map(function (x) { return x.toFixed(0); }).join(" / "),
         d.transfers.length ? d.transfers.length + " handoffs, " + bytes.toLocaleString("en") + " bytes" : "none"
        ].forEach(function (cell, i) { tr.appendChild(el(i === 0 ? "th" : "td", "", cell)); });
        table.querySelector("tbody").appendChild(tr);
        table.hidden = false;
      },
      finished: function (d) {
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  window.courseDemos.modules.disagg = { reset: reset, handlers: handlers };
})();
