// The fairness demo (problem 21): a running count of finished and refused requests per policy,
// a row per tenant and policy, then the plots.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }

  function reset(root) {
    const live = root.querySelector(".fairness-live");
    live.textContent = "";
    live.hidden = true;
    const table = root.querySelector(".fairness-table");
    table.querySelector("tbody").replaceChildren();
    table.hidden = true;
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
  }

  function handlers(root) {
    const el = lib().el;
    let done = 0, refused = 0, policy = "";
    function say() {
      const live = root.querySelector(".fairness-live");
      live.hidden = false;
      live.textContent = (policy === "fcfs" ? "FCFS" : "Fair policy") + ": " + done +
        " requests finished, " + refused + " refused.";
    }
    return {
      request: function (d) { if (d.policy !== policy) { policy = d.policy; done = 0; refused = 0; } done += 1; say(); },
      refused: function (d) { if (d.policy !== policy) { policy = d.policy; done = 0; refused = 0; } refused += 1; say(); },
      policy: function (d) {
        const table = root.querySelector(".fairness-table");
        table.hidden = false;
        Object.keys(d.tenants).forEach(function (tenant) {
          const t = d.tenants[tenant];
          const tr = el("tr");
          [d.policy === "fcfs" ? "FCFS" : "fair", tenant, String(t.served), String(t.refused),
           t.ttft_mean_ms.toFixed(0), t.ttft_max_ms.toFixed(0), String(t.tokens)].forEach(function (cell, i) {
            tr.appendChild(el(i === 0 ? "th" : "td", "", cell));
          });
          table.querySelector("tbody").appendChild(tr);
        });
      },
      finished: function (d) {
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  window.courseDemos.modules.fairness = { reset: reset, handlers: handlers };
})();
