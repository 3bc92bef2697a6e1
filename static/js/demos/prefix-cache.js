// The prefix-cache demo (problem 8): part one's requests with caching off and on, part two's
// routing policies on several replicas, then the plots and why measured and predicted differ.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toPrecision(3) + "%"; }

  function reset(root) {
    [".prefix-requests", ".prefix-policies"].forEach(function (sel) {
      const table = root.querySelector(sel);
      table.querySelector("tbody").replaceChildren();
      table.hidden = true;
    });
    root.querySelector(".demo-mode").textContent = "";
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
  }

  function row(table, cells) {
    const el = lib().el;
    const tr = el("tr");
    cells.forEach(function (cell, i) { tr.appendChild(el(i === 0 ? "th" : "td", "", cell)); });
    table.querySelector("tbody").appendChild(tr);
    table.hidden = false;
  }

  function handlers(root) {
    return {
      started: function (d) {
        root.querySelector(".demo-mode").textContent = "A " + d.system_tokens +
          "-token system prompt plus " + d.user_tokens + " tokens of question, blocks of " +
          d.block_size + " tokens (" + d.reusable_tokens + " reusable). Part two: " +
          d.replicas + " replicas, each pool " + d.pool_blocks + " blocks (room for " +
          d.cached_prefixes + " prefixes), " + d.applications + " applications; on " + d.device + ".";
      },
      request_done: function (d) {
        row(root.querySelector(".prefix-requests"), [d.caching, String(d.index + 1),
          String(d.prompt_tokens), String(d.cached_tokens), String(d.predicted_cached),
          d.ttft_ms.toFixed(1)]);
      },
      policy_done: function (d) {
        row(root.querySelector(".prefix-policies"), [d.name, pct(d.hit_rate),
          pct(d.predicted_hit_rate), d.ttft_mean_ms.toFixed(1), d.ttft_p90_ms.toFixed(1),
          d.served.join(" / ")]);
      },
      finished: function (d) {
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  window.courseDemos.modules["prefix-cache"] = { reset: reset, handlers: handlers };
})();
