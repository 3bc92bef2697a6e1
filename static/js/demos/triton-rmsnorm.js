// The triton-rmsnorm demo (problem 15): the kernel's errors against PyTorch and FP64, and on
// a GPU worker its time against eager PyTorch and the byte floor.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }

  function reset(root) {
    const table = root.querySelector(".parity-table");
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
        root.querySelector(".demo-mode").textContent = "Running on " + d.device + " (" +
          (d.mode === "interpreter" ? "Triton's interpreter, NumPy on the CPU" : "compiled for the GPU") +
          "): " + d.rows_checked + " of " + d.tokens + " rows × " + d.hidden + ", " + d.dtype.toUpperCase() +
          (d.residual ? ", with the residual add" : "") + ".";
      },
      parity: function (d) {
        const table = root.querySelector(".parity-table");
        const body = table.querySelector("tbody");
        [["Triton against the engine's PyTorch RMSNorm", d.kernel_vs_engine],
         ["Triton against FP64", d.kernel_vs_fp64],
         ["PyTorch against FP64", d.engine_vs_fp64]].concat(d.residual_sum ? [["Residual sum against PyTorch's add", d.residual_sum]] : []).forEach(function (row) {
          const tr = el("tr");
          tr.appendChild(el("th", "", row[0]));
          tr.appendChild(el("td", "", row[1].max_abs.toPrecision(3)));
          tr.appendChild(el("td", "", row[1].max_rel.toPrecision(3)));
          tr.appendChild(el("td", "", row[1].max_ulps.toPrecision(3)));
          body.appendChild(tr);
        });
        const verdict = el("tr");
        verdict.appendChild(el("th", "", d.passed ? "Passes the tests' tolerance" : "Outside the tests' tolerance"));
        verdict.appendChild(el("td", "", "atol " + d.tolerance.atol));
        verdict.appendChild(el("td", "", "rtol " + d.tolerance.rtol.toPrecision(3)));
        verdict.appendChild(el("td", "", "≈ " + d.tolerance_ulps.toPrecision(3) + " ulps"));
        body.appendChild(verdict);
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

  window.courseDemos.modules["triton-rmsnorm"] = { reset: reset, handlers: handlers };
})();
