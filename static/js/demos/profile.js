// The profile demo (problem 13): each profiled step as it runs, then the timeline of the
// engine's named ranges, the forward pass against its floor, the top operators and the trace.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }

  function reset(root) {
    root.querySelector(".demo-live").replaceChildren();
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".profile-ops").replaceChildren();
    root.querySelector(".profile-trace").hidden = true;
    root.querySelector(".run-note").hidden = true;
  }

  function opsTable(root, ops) {
    const el = lib().el;
    const table = el("table", "demo-table");
    table.appendChild(el("caption", "", "Operators that took the most time in these steps (the engine's own ranges left out)"));
    const head = el("tr");
    ["operator", "calls", "self CPU (ms)", "CPU incl. children (ms)", "self device (ms)"].forEach(function (h) { head.appendChild(el("th", "", h)); });
    table.appendChild(head);
    ops.forEach(function (op) {
      const tr = el("tr");
      tr.appendChild(el("td", "", op.name));
      tr.appendChild(el("td", "", String(op.calls)));
      tr.appendChild(el("td", "", op.self_cpu_ms.toFixed(2)));
      tr.appendChild(el("td", "", op.cpu_total_ms.toFixed(2)));
      tr.appendChild(el("td", "", op.self_device_ms === null ? "–" : op.self_device_ms.toFixed(2)));
      table.appendChild(tr);
    });
    root.querySelector(".profile-ops").appendChild(table);
  }

  function handlers(root) {
    const el = lib().el;
    return {
      started: function (d) {
        root.querySelector(".demo-live").appendChild(el("li", "", "Profiling " + d.profile_steps +
          " steps of " + d.num_sequences + " sequences (" + d.prompt_tokens + "-token prompts) on " +
          d.device + " (" + d.activities.join(" + ") + " activity)"));
      },
      step: function (d) {
        const what = d.num_prefill_tokens ? d.num_prefill_tokens + " prefill tokens" : d.num_decode_tokens + " decode tokens";
        root.querySelector(".demo-live").appendChild(el("li", "", "Step " + (d.index + 1) + ": " + what +
          ", " + lib().ms(d.step_ms) + " (forward " + lib().ms(d.model_ms) + ")"));
      },
      profile: function (d) {
        opsTable(root, d.top_ops);
        const trace = root.querySelector(".profile-trace");
        trace.replaceChildren();
        if (d.trace && d.trace.url) {
          const link = el("a", "", "Download the trace (open it at ui.perfetto.dev)");
          link.href = d.trace.url;
          link.setAttribute("download", "");
          trace.appendChild(link);
          trace.appendChild(document.createTextNode(" · " + (d.trace.bytes / 1024).toFixed(0) + " KiB, gzipped Chrome trace format"));
        } else {
          trace.textContent = "No trace to download: " + ((d.trace && d.trace.reason) || "none was kept") + ".";
        }
        trace.hidden = false;
      },
      finished: function (d) {
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
      cancelled: function (d) {
        root.querySelector(".demo-live").appendChild(el("li", "", "Cancelled (" + d.reason + ")."));
      },
    };
  }

  window.courseDemos.modules.profile = { reset: reset, handlers: handlers };
})();
