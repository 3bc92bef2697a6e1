// The speculative demo (problem 10): each traced step's guesses marked kept or refused, the
// acceptance by position, the speedup against γ, the two drafters, then the plots.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  function pct(x) { return (100 * x).toPrecision(3) + "%"; }
  function times(x) { return x.toPrecision(3) + "×"; }
  function visible(text) { return JSON.stringify(text).slice(1, -1); }

  function reset(root) {
    root.querySelector(".spec-trace").hidden = true;
    root.querySelectorAll(".demo-table").forEach(function (t) {
      t.querySelector("tbody").replaceChildren();
      if (!t.closest(".spec-trace")) { t.hidden = true; }
    });
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
  }

  function row(table, cells) {
    const el = lib().el;
    const tr = el("tr");
    cells.forEach(function (cell, i) {
      if (cell instanceof Node) { const td = el("td"); td.appendChild(cell); tr.appendChild(td); }
      else { tr.appendChild(el(i === 0 ? "th" : "td", "", cell)); }
    });
    table.hidden = false;
    table.querySelector("tbody").appendChild(tr);
  }

  function handlers(root) {
    const el = lib().el;
    return {
      trace: function (d) {
        root.querySelector(".spec-trace").hidden = false;
        root.querySelector(".spec-prompt").textContent = d.prompt;
        const table = root.querySelector(".spec-trace-table");
        d.steps.forEach(function (s, n) {
          const guesses = el("span", "spec-guesses");
          s.drafts.forEach(function (g, j) {
            const kind = j < s.accepted ? "spec-kept" : (j === s.accepted ? "spec-rejected" : "spec-unchecked");
            guesses.appendChild(el("code", kind, visible(g)));
            guesses.appendChild(document.createTextNode(" "));
          });
          if (!s.drafts.length) { guesses.appendChild(el("span", "", "(no guess)")); }
          const token = el("code", s.bonus ? "spec-bonus" : "spec-added", visible(s.token));
          row(table, [String(n + 1), guesses, String(s.accepted) + " of " + s.drafts.length, token]);
        });
      },
      acceptance: function (d) {
        const table = root.querySelector(".spec-acceptance-table");
        d.measured.forEach(function (m, j) {
          row(table, [String(j + 1), String(d.drafted[j]), String(d.accepted[j]), pct(m), pct(d.predicted[j])]);
        });
      },
      speed: function (d) {
        row(root.querySelector(".spec-speed-table"), [String(d.k), times(d.speedup_one), times(d.predicted_one),
          times(d.speedup_large), times(d.predicted_large), d.tokens_per_step_one.toPrecision(3)]);
      },
      compare: function (d) {
        const table = root.querySelector(".spec-compare-table");
        d.rows.forEach(function (r) {
          row(table, [r.drafter === "ngram" ? "prompt lookup" : "draft model", String(r.drafted), pct(r.acceptance),
            r.tokens_per_step.toPrecision(3), times(r.speedup)]);
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

  window.courseDemos.modules.speculative = { reset: reset, handlers: handlers };
})();
