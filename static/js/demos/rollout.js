// The rollout demo (problem 19): fills the two versions' table after each wave of requests,
// says what the gate decided and why, then draws the closing plots (figures built in Python,
// problems/plots.py) with their tables. Runs, errors and the event stream come from
// static/js/demos.js.
(function () {
  "use strict";

  function number(value, digits) {
    if (value === null || value === undefined) return "–";
    if (value === 0) return "0";
    const magnitude = Math.abs(value);
    if (magnitude < 1e-3 || magnitude >= 1e6) return value.toExponential((digits || 3) - 1);
    return Number(value.toPrecision(digits || 3)).toLocaleString("en-US");
  }

  function percent(value) { return (100 * value).toFixed(1) + "%"; }
  function ms(seconds) { return seconds ? number(seconds * 1000) + " ms" : "–"; }

  function wire(api) {
    const el = api.el;

    function row(root, version) {
      return root.querySelector('.rollout-table tr[data-version="' + version + '"]');
    }

    function cell(tr, index, text) { tr.children[index].textContent = text; }

    function tableDraw(table) {
      const node = el("table", "plot-table");
      // The cells carry no unit of their own: the table says the plot's value axis title.
      if (table.unit) node.appendChild(el("caption", "", "Values: " + table.unit));
      const head = el("tr");
      table.headers.forEach(function (h) { const th = el("th", "", h); th.scope = "col"; head.appendChild(th); });
      const thead = el("thead");
      thead.appendChild(head);
      node.appendChild(thead);
      const body = el("tbody");
      table.rows.forEach(function (cells) {
        const tr = el("tr");
        cells.forEach(function (c, i) {
          const td = el(i === 0 ? "th" : "td", "", String(c));
          if (i === 0) td.scope = "row";
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      node.appendChild(body);
      return node;
    }

    function plotsDraw(root, figures) {
      const box = root.querySelector(".rollout-plots");
      box.replaceChildren();
      const targets = figures.map(function (f) {
        const figure = el("figure", "rollout-plot");
        const plot = el("div", "plot demo-plot");
        plot.setAttribute("role", "img");
        plot.setAttribute("aria-label", f.figure.layout.title.text + "; the table below it lists the same numbers.");
        const caption = el("figcaption", "rollout-plot-table");
        caption.appendChild(tableDraw(f.table));
        figure.appendChild(plot);
        figure.appendChild(caption);
        box.appendChild(figure);
        box.appendChild(el("p", "demo-note", f.note));
        return plot;
      });
      api.plotlyLoad(root.dataset.plotlySrc).then(function (Plotly) {
        return Promise.all(figures.map(function (f, i) {
          return Plotly.newPlot(targets[i], f.figure.data, f.figure.layout,
                                { displayModeBar: false, responsive: true });
        }));
      }).then(function () {
        targets.forEach(function (t) { t.classList.add("drawn"); });
      }).catch(function () {
        box.appendChild(el("p", "demo-error", "The plots could not be drawn; the tables hold the same numbers."));
      });
    }

    window.courseDemos.register("rollout", {
      reset: function (root) {
        ["current", "candidate"].forEach(function (v) {
          const tr = row(root, v);
          [1, 2, 3].forEach(function (i) { cell(tr, i, "…"); });
          cell(tr, 4, "0"); cell(tr, 5, "0");
          [6, 7, 8].forEach(function (i) { cell(tr, i, "–"); });
        });
        root.querySelector(".rollout-results").hidden = true;
        root.querySelector(".rollout-plots").replaceChildren();
        ["progress", "quality", "mirror", "gate"].forEach(function (name) {
          root.querySelector(".rollout-" + name).textContent = "";
        });
      },
      handlers: function (root) {
        const progress = root.querySelector(".rollout-progress");
        return {
          started: function (d) {
            root.querySelector(".rollout-results").hidden = false;
            progress.textContent = "Loading the candidate, then scoring both versions on held-out text; then " +
              api.count(d.requests, "request") + " in waves of " + d.wave + ", " + percent(d.canary_share) +
              " of them to the candidate" + (d.inject_error_rate ? ", " + percent(d.inject_error_rate) +
              " of those made to fail." : ".");
          },
          version_loaded: function (d) {
            const tr = row(root, d.version);
            cell(tr, 0, d.version + ": " + d.name);
            cell(tr, 1, d.weight_bytes.toLocaleString("en-US"));
            cell(tr, 2, d.load_seconds === null ? "already loaded" : ms(d.load_seconds));
          },
          evaluated: function (d) {
            cell(row(root, "current"), 3, number(d.bpb_current, 4));
            cell(row(root, "candidate"), 3, number(d.bpb_candidate, 4) + " (" +
              (d.bpb_candidate >= d.bpb_current ? "+" : "") + number(d.bpb_candidate - d.bpb_current, 2) + ")");
            root.querySelector(".rollout-quality").textContent = "Evaluation set: " +
              api.count(d.documents, "held-out document") + ", " + d.positions.toLocaleString("en-US") +
              " predicted tokens. The candidate's next-token choice agrees with the current model's " +
              percent(d.agreement) + " of the time; mean KL " + number(d.kl_mean) + " nats per token.";
            progress.textContent = "Evaluation set scored: the offline gate decides whether any traffic reaches the candidate.";
          },
          window: function (d) {
            ["current", "candidate"].forEach(function (v) {
              const s = d.versions[v];
              const tr = row(root, v);
              cell(tr, 4, String(s.n));
              cell(tr, 5, String(s.errors));
              cell(tr, 6, ms(s.ttft_p50));
              cell(tr, 7, ms(s.ttft_p95));
              cell(tr, 8, ms(s.ttft_p99));
            });
            progress.textContent = d.sent + " of " + d.of + " requests sent.";
            if (d.mirror.n) {
              root.querySelector(".rollout-mirror").textContent = "Mirrored prompts: " + d.mirror.n +
                " canary prompts also answered by the current version; greedy answers identical in " +
                d.mirror.exact + ", tokens agreeing up to the first difference " + percent(d.mirror.agreement) + ".";
            }
          },
          gate: function (d) {
            root.querySelector(".rollout-gate").textContent = (d.decision === "promote" ?
              "Promoted: " : "Rolled back (rule: " + d.rule + "): ") + d.why + ".";
          },
          plot: function (d) {
            progress.textContent = "";
            plotsDraw(root, d.figures);
          },
          cancelled: function () { progress.textContent = "Cancelled."; },
        };
      },
    });
  }

  // demos.js may load before or after this file: register either way.
  window.courseDemos = window.courseDemos || { modules: {} };
  if (!window.courseDemos.register) {
    window.courseDemos.modules = window.courseDemos.modules || {};
    window.courseDemos.register = function (slug, module) { window.courseDemos.modules[slug] = module; };
  }
  wire({
    el: function () { return window.courseDemos.lib.el.apply(null, arguments); },
    count: function (n, noun) { return window.courseDemos.lib.count(n, noun); },
    plotlyLoad: function (src) { return window.courseDemos.lib.plotlyLoad(src); },
  });
})();
