// The quantization demo (problem 11): fills its table as each format is quantized and scored,
// then draws the two closing plots (figures built in Python, problems/plots.py) with their
// tables. Runs, errors and the event stream come from static/js/demos.js.
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

  function wire(api) {
    const el = api.el;

    function row(root, format) {
      return root.querySelector('.quant-table tr[data-format="' + format + '"]');
    }

    function cell(tr, index, text) { tr.children[index].textContent = text; }

    function addRow(root, format, name) {
      const tr = el("tr");
      tr.dataset.format = format;
      tr.appendChild(el("th", "", name));
      for (let i = 0; i < 9; i++) tr.appendChild(el("td", "", "…"));
      tr.children[0].setAttribute("scope", "row");
      root.querySelector(".quant-table tbody").appendChild(tr);
      return tr;
    }

    function tableDraw(table) {
      const node = el("table", "plot-table");
      const head = el("tr");
      table.headers.forEach(function (h) { const th = el("th", "", h); th.scope = "col"; head.appendChild(th); });
      const thead = el("thead");
      thead.appendChild(head);
      node.appendChild(thead);
      const body = el("tbody");
      table.rows.forEach(function (cells) {
        const tr = el("tr");
        cells.forEach(function (c, i) {
          const td = el(i === 0 ? "th" : "td", "", c);
          if (i === 0) td.scope = "row";
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      node.appendChild(body);
      return node;
    }

    function plotsDraw(root, figures) {
      const box = root.querySelector(".quant-plots");
      box.replaceChildren();
      const targets = figures.map(function (f) {
        const figure = el("figure", "quant-plot");
        const plot = el("div", "plot demo-plot");
        plot.setAttribute("role", "img");
        plot.setAttribute("aria-label", f.figure.layout.title.text + "; the table below it lists the same numbers.");
        const caption = el("figcaption", "quant-plot-table");
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

    window.courseDemos.register("quantization", {
      reset: function (root) {
        root.querySelector(".quant-table tbody").replaceChildren();
        root.querySelector(".quant-layers-body").replaceChildren();
        root.querySelector(".quant-results").hidden = true;
        root.querySelector(".quant-plots").replaceChildren();
        root.querySelector(".quant-progress").textContent = "";
        root.querySelector(".quant-summary").textContent = "";
      },
      handlers: function (root) {
        const progress = root.querySelector(".quant-progress");
        return {
          started: function (d) {
            root.querySelector(".quant-results").hidden = false;
            const tr = addRow(root, "fp32", "FP32 (as shipped)");
            cell(tr, 1, d.fp32_model_bytes.toLocaleString("en-US") + " (whole model)");
            cell(tr, 2, "–"); cell(tr, 3, "32"); cell(tr, 4, "0"); cell(tr, 5, "0"); cell(tr, 6, "–");
            d.formats.forEach(function (f, i) { addRow(root, f, d.names[i]); });
            progress.textContent = "Quantizing " + d.matrices + " weight matrices (" +
              d.linear_weights.toLocaleString("en-US") + " weights) to " + api.count(d.formats.length, "format") +
              ", then scoring each on " + api.count(d.documents, "held-out document") + " (" +
              d.tokens.toLocaleString("en-US") + " predicted tokens, " + d.bytes.toLocaleString("en-US") + " bytes of text).";
          },
          format_quantized: function (d) {
            const tr = row(root, d.format);
            cell(tr, 1, d.linear_bytes.toLocaleString("en-US"));
            cell(tr, 2, d.predicted_bytes.toLocaleString("en-US") + (d.linear_bytes === d.predicted_bytes ? " (equal)" : " (differs!)"));
            cell(tr, 3, number(d.bits_per_weight, 4));
            cell(tr, 4, number(d.rel_error));
            cell(tr, 5, number(d.predicted_rel_error));
            cell(tr, 6, "layer " + d.worst.layer + " " + d.worst.matrix + ": " + number(d.worst.rel_error));
            const details = el("p", "", d.name + ": " + d.layers.map(function (l) {
              return "layer " + l.layer + " " + number(l.rel_error) + " (predicted " + number(l.predicted_rel_error) + ")";
            }).join("; "));
            root.querySelector(".quant-layers-body").appendChild(details);
          },
          evaluation_progress: function (d) {
            progress.textContent = "Scoring: " + d.document + " of " + d.of + " documents through every model.";
          },
          format_evaluated: function (d) {
            const tr = row(root, d.format);
            if (!tr) return;
            cell(tr, 7, number(d.bpb, 4) + (d.format === "fp32" ? "" : " (" + (d.bpb_delta >= 0 ? "+" : "") + number(d.bpb_delta, 2) + ")"));
            cell(tr, 8, percent(d.agreement));
            cell(tr, 9, number(d.kl_mean));
          },
          plot: function (d) {
            progress.textContent = "";
            plotsDraw(root, d.figures);
          },
          finished: function (d) {
            const best = d.best_4bit ? row(root, d.best_4bit).children[0].textContent : null;
            root.querySelector(".quant-summary").textContent =
              (d.bytes_match ? "Every format's stored bytes equal the arithmetic's count. " : "") +
              (best ? "Of the 4-bit formats, " + best + " moved the model's next-token distribution least (lowest mean KL) on this text. " : "") +
              (d.bpb_note || "");
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
