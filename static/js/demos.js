// Live demos: start a run (POST JSON), follow its Server-Sent Events, cancel it.
// One file for both demos; each .demo element on the page is wired once.
(function () {
  "use strict";
  if (window.courseDemos && window.courseDemos.lib) return; // included by more than one partial
  // Demos with a script of their own (static/js/demos/<slug>.js) register here, before the
  // page is wired: { reset(root), handlers(root, run) -> { eventType: function(data) } }.
  const pending = (window.courseDemos && window.courseDemos.modules) || {};
  window.courseDemos = {
    runs: {}, modules: pending,
    register: function (slug, module) { window.courseDemos.modules[slug] = module; },
  };

  function csrfToken() {
    try {
      const headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
      if (headers["X-CSRFToken"]) return headers["X-CSRFToken"];
    } catch (e) { /* fall back to the cookie */ }
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  async function postJson(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body || {}),
    });
    let data = {};
    try { data = await response.json(); } catch (e) { data = { error: response.statusText }; }
    return { status: response.status, data: data };
  }

  function ms(value) {
    if (value === null || value === undefined) return "–";
    return value >= 100 ? value.toFixed(0) + " ms" : value.toFixed(value >= 10 ? 1 : 2) + " ms";
  }

  // A duration given in seconds: milliseconds below one second, seconds above.
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    return seconds >= 1 ? seconds.toFixed(seconds >= 10 ? 1 : 2) + " s" : ms(seconds * 1000);
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  let plotlyLoading = null;
  function plotlyLoad(src) {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (!plotlyLoading) {
      plotlyLoading = new Promise(function (resolve, reject) {
        const script = document.createElement("script");
        script.src = src;
        script.onload = function () { resolve(window.Plotly); };
        script.onerror = reject;
        document.head.appendChild(script);
      });
    }
    return plotlyLoading;
  }

  function formParams(form) {
    if (form.dataset.schema) {
      // A demo whose form is drawn from its parameter schema: numbers, choices, checkboxes.
      const params = {};
      Array.from(form.elements).forEach(function (field) {
        if (!field.name) return;
        if (field.type === "checkbox" && field.dataset.choices) {
          // One of several boxes of a "choices" field: the checked ones, as a list.
          params[field.name] = params[field.name] || [];
          if (field.checked) params[field.name].push(field.value);
        } else if (field.type === "checkbox") params[field.name] = field.checked;
        else if (field.type === "number") params[field.name] = field.value === "" ? field.value : Number(field.value);
        else params[field.name] = field.value;
      });
      return params;
    }
    return {
      prompt: form.elements.prompt.value,
      max_tokens: Number(form.elements.max_tokens.value),
      temperature: Number(form.elements.temperature.value),
      top_p: Number(form.elements.top_p.value),
    };
  }

  function showErrors(root, response) {
    root.querySelectorAll(".field-error").forEach(function (p) { p.textContent = ""; });
    const general = root.querySelector(".demo-error");
    general.textContent = "";
    const data = response.data || {};
    const fieldError = data.field && root.querySelector('[data-error-for="' + data.field + '"]');
    if (fieldError) fieldError.textContent = data.error;
    else general.textContent = data.error || "Something went wrong (" + response.status + ").";
    if (data.active_demo_url) {
      // A run of another demo is still going: link to it, where it can be cancelled.
      const link = el("a", "", "Go to " + data.active_demo_name);
      link.href = data.active_demo_url;
      general.appendChild(document.createTextNode(" "));
      general.appendChild(link);
      general.appendChild(document.createTextNode("."));
    }
  }

  // Plots built in Python (problems/plots.py: a plotly figure and the same numbers as a table),
  // drawn as the calculators draw theirs (templates/problems/_plot.html): the title as HTML
  // above the plot, the numbers behind "Show the numbers".
  function plotsDraw(container, plots, src) {
    container.replaceChildren();
    return plotlyLoad(src).then(function (Plotly) {
      return Promise.all((plots || []).map(function (plot) {
        const figure = el("figure", "plot-figure");
        const target = el("div", "plot");
        const layout = plot.figure.layout || {};
        const title = (layout.title || {}).text || "";
        delete layout.title;
        layout.margin = Object.assign({}, layout.margin || {}, { t: 16 });
        target.setAttribute("role", "img");
        target.setAttribute("aria-label", title + "; under Show the numbers, a table lists the same numbers.");
        const details = el("details", "plot-numbers");
        details.appendChild(el("summary", "", "Show the numbers"));
        const scroll = el("div", "table-scroll");
        scroll.tabIndex = 0;
        scroll.setAttribute("role", "region");
        scroll.setAttribute("aria-label", "The numbers of: " + title);
        const table = el("table", "plot-table");
        table.appendChild(el("caption", "", title + (plot.table.unit ? " (values: " + plot.table.unit + ")" : "")));
        const head = el("tr");
        plot.table.headers.forEach(function (h) { const th = el("th", "", h || "case"); th.scope = "col"; head.appendChild(th); });
        const thead = el("thead"); thead.appendChild(head); table.appendChild(thead);
        const body = el("tbody");
        plot.table.rows.forEach(function (row) {
          const tr = el("tr");
          row.forEach(function (cell, i) { tr.appendChild(el(i === 0 ? "th" : "td", "", cell)); });
          body.appendChild(tr);
        });
        table.appendChild(body);
        scroll.appendChild(table);
        details.appendChild(scroll);
        figure.appendChild(el("figcaption", "plot-title", title));
        figure.appendChild(target);
        figure.appendChild(details);
        container.appendChild(figure);
        return Plotly.newPlot(target, plot.figure.data, layout,
          { displayModeBar: false, responsive: true }).then(function () { target.classList.add("drawn"); });
      }));
    });
  }

  window.courseDemos.lib = { el: el, ms: ms, count: function (n, noun) { return count(n, noun); },
    plotlyLoad: plotlyLoad, plotsDraw: plotsDraw, postJson: postJson };

  // ---- The lifecycle demo (problem 1) ----------------------------------------------------

  function lifecycleReset(root) {
    root.querySelectorAll(".demo-stages li").forEach(function (li) {
      li.classList.remove("done", "active");
      li.querySelector(".stage-detail").textContent = "";
    });
    root.querySelector(".demo-chips").replaceChildren();
    root.querySelector(".demo-output").replaceChildren();
    root.querySelector(".demo-estimate").replaceChildren();
    const note = root.querySelector(".estimate-note");
    if (note) note.hidden = true;
    const plot = root.querySelector(".demo-timeline");
    if (window.Plotly) window.Plotly.purge(plot);
    plot.replaceChildren();
    plot.classList.remove("drawn");
  }

  function stage(root, name, detail) {
    const li = root.querySelector('.demo-stages li[data-stage="' + name + '"]');
    if (!li) return;
    li.classList.add("done");
    li.querySelector(".stage-detail").textContent = detail;
  }

  // "1 block", "4 blocks": counts read as words, not as code.
  function count(n, noun) { return n + " " + noun + (n === 1 ? "" : "s"); }

  function lifecycleHandlers(root) {
    let tokens = 0;
    return {
      tokenized: function (d) {
        stage(root, "tokenized", count(d.token_count, "token") + " in " + ms(d.ms));
        const chips = root.querySelector(".demo-chips");
        d.pieces.forEach(function (piece, i) {
          const chip = el("span", "chip", piece.replace(/\n/g, "⏎") || "∅");
          chip.title = "token id " + d.token_ids[i];
          chips.appendChild(chip);
        });
      },
      queued: function (d) { stage(root, "queued", "at " + ms(d.at_ms) + "; " + d.kv_blocks_free + " of " + d.kv_blocks_total + " blocks free"); },
      admitted: function (d) {
        stage(root, "admitted", count(d.blocks, "block") + " after " + ms(d.queue_ms) + " in the queue" +
          (d.cached_tokens ? "; " + d.cached_tokens + " prompt tokens already cached" : ""));
      },
      prefill: function (d) { stage(root, "prefill", count(d.tokens, "token") + " in " + ms(d.ms)); },
      token: function (d) {
        tokens += 1;
        stage(root, "token", tokens + (tokens === 1 ? " token" : " tokens") + " so far");
        const span = el("span", "token", d.text);
        span.title = "token " + d.index + " at " + ms(d.at_ms);
        root.querySelector(".demo-output").appendChild(span);
      },
      step: function (d) {
        // The worker's engine is shared: say who else rode in the step that made this token.
        root.querySelector(".demo-sharing").textContent = "This step carried " +
          count(d.num_seqs, "sequence") + " from " + count(d.num_visitors, "visitor") +
          (d.num_others ? " (" + d.num_others + " of them other visitors')" : " (only yours)") + ".";
      },
      finished: function (d) {
        stage(root, "finished", "stop reason " + d.finish_reason + "; " +
          count(d.blocks_freed, "block") + " freed; usage " + d.usage.prompt_tokens + " prompt + " +
          d.usage.completion_tokens + " completion tokens; TTFT " + ms(d.ttft_ms) +
          ", TPOT " + ms(d.tpot_ms));
        lifecycleEstimate(root, d);
        lifecyclePlot(root, d);
      },
      cancelled: function (d) { stage(root, "finished", "cancelled (" + d.reason + "); " + count(d.blocks_freed, "block") + " freed"); },
    };
  }

  function lifecycleEstimate(root, d) {
    const box = root.querySelector(".demo-estimate");
    const est = d.estimate || {};
    if (!est.available) return;
    const table = el("table", "estimate-table");
    const caption = el("caption", "", "Measured on this run vs the arithmetic's estimate for " +
      est.model + " on this machine (" + est.decode_bound + "-bound decode)");
    table.appendChild(caption);
    const head = el("tr");
    ["", "measured", "estimate", "measured ÷ estimate"].forEach(function (h) { head.appendChild(el("th", "", h)); });
    table.appendChild(head);
    [["Prefill", d.prefill_ms, est.prefill_ms, est.measured_over_estimate.prefill],
     ["TTFT (estimate: prefill only)", d.ttft_ms, est.ttft_ms, est.measured_over_estimate.ttft],
     ["TPOT", d.tpot_ms, est.tpot_ms, est.measured_over_estimate.tpot]].forEach(function (row) {
      const tr = el("tr");
      tr.appendChild(el("th", "", row[0]));
      tr.appendChild(el("td", "", ms(row[1])));
      tr.appendChild(el("td", "", ms(row[2])));
      tr.appendChild(el("td", "", row[3] === null ? "–" : row[3] + "×"));
      table.appendChild(tr);
    });
    box.appendChild(table);
    // The estimate of TTFT is the prefill's floor alone; say what else the measured one holds.
    box.appendChild(el("p", "demo-note", "The TTFT estimate is the prefill's floor and nothing else. " +
      "The measured TTFT also holds tokenizing (" + ms(d.tokenize_ms) + "), the wait in the queue (" +
      ms(d.queue_ms) + ") and the prefill step's host work (scheduling, sampling the first token), " +
      "none of which the arithmetic counts."));
    const working = el("ol", "estimate-steps");
    est.steps.forEach(function (s) {
      working.appendChild(el("li", "", s.label + ": " + s.expression + " = " + s.display));
    });
    box.appendChild(working);
    const note = root.querySelector(".estimate-note");
    if (note) note.hidden = false;
  }

  function lifecyclePlot(root, d) {
    const target = root.querySelector(".demo-timeline");
    plotlyLoad(root.dataset.plotlySrc).then(function (Plotly) {
      const stages = d.timeline.map(function (s) { return s.stage; });
      const measured = {
        type: "bar", orientation: "h", name: "measured",
        y: stages, base: d.timeline.map(function (s) { return s.start_ms; }),
        x: d.timeline.map(function (s) { return Math.max(s.end_ms - s.start_ms, 0.05); }),
        hovertemplate: "%{y}: %{x:.2f} ms<extra>measured</extra>",
      };
      const traces = [measured];
      if (d.token_at_ms && d.token_at_ms.length) {
        traces.push({
          type: "scatter", mode: "markers", name: "tokens", y: d.token_at_ms.map(function () { return "decode"; }),
          x: d.token_at_ms, marker: { size: 6, symbol: "line-ns-open" },
          hovertemplate: "token at %{x:.1f} ms<extra></extra>",
        });
      }
      const est = d.estimate || {};
      if (est.available) {
        const prefillStart = d.timeline[2].start_ms;
        const estStages = ["prefill (estimate)"];
        const estBase = [prefillStart];
        const estX = [est.prefill_ms];
        if (d.usage.completion_tokens > 1) {
          estStages.push("decode (estimate)");
          estBase.push(prefillStart + est.prefill_ms);
          estX.push(est.tpot_ms * (d.usage.completion_tokens - 1));
        }
        traces.push({ type: "bar", orientation: "h", name: "estimate", y: estStages, base: estBase,
          x: estX, hovertemplate: "%{y}: %{x:.2f} ms<extra>estimate</extra>" });
      }
      const layout = {
        title: { text: "TTFT " + ms(d.ttft_ms) + " · TPOT " + ms(d.tpot_ms), font: { size: 14 } },
        barmode: "overlay", height: 300, margin: { l: 130, r: 20, t: 40, b: 40 },
        xaxis: { title: { text: "ms since the request arrived" }, rangemode: "tozero" },
        yaxis: { autorange: "reversed" },
        shapes: d.ttft_ms === null ? [] : [{ type: "line", x0: d.ttft_ms, x1: d.ttft_ms, yref: "paper",
          y0: 0, y1: 1, line: { dash: "dot", width: 1 } }],
        showlegend: true,
      };
      return Plotly.newPlot(target, traces, layout, { displayModeBar: false, responsive: true });
    }).then(function () { target.classList.add("drawn"); }).catch(function () {
      target.textContent = "The timeline plot could not be drawn.";
    });
  }

  // ---- The streaming demo (problem 2) ----------------------------------------------------

  function streamingReset(root) {
    root.querySelector(".streams").replaceChildren();
    const result = root.querySelector(".streaming-result");
    if (result) { result.replaceChildren(); result.hidden = true; }
    kvShow(root, null);
  }

  function kvShow(root, d) {
    const bar = root.querySelector(".kv-bar");
    const fill = root.querySelector(".kv-bar-free");
    if (!d) {
      root.querySelector(".kv-free").textContent = "–";
      root.querySelector(".kv-total").textContent = "–";
      fill.style.width = "0%";
      return;
    }
    root.querySelector(".kv-free").textContent = d.kv_blocks_free;
    root.querySelector(".kv-total").textContent = d.kv_blocks_total;
    bar.setAttribute("aria-valuemax", d.kv_blocks_total);
    bar.setAttribute("aria-valuenow", d.kv_blocks_free);
    fill.style.width = (100 * d.kv_blocks_free / d.kv_blocks_total).toFixed(1) + "%";
  }

  function streamingHandlers(root, run) {
    function column(i) { return root.querySelector('.stream[data-stream="' + i + '"]'); }
    function streamEnded(i, label) {
      const col = column(i);
      if (!col) return;
      col.querySelector(".stream-state").textContent = label;
      col.classList.add("ended");
      col.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      const source = run.streamSources[i];
      if (source) { source.close(); delete run.streamSources[i]; }
    }
    return {
      streams: function (d) {
        kvShow(root, d);
        const box = root.querySelector(".streams");
        const template = root.querySelector(".stream-template");
        d.streams.forEach(function (s) {
          const col = template.content.firstElementChild.cloneNode(true);
          col.dataset.stream = s.stream;
          col.querySelector(".stream-index").textContent = s.stream;
          col.querySelector(".stream-state").textContent = "streaming";
          col.querySelector(".stream-prompt").textContent = s.prompt;
          col.querySelector(".stream-cut").addEventListener("click", function () {
            run.stoppedAt[s.stream] = performance.now();
            // As a client that goes away: close this stream's own connection, nothing else.
            const source = run.streamSources[s.stream];
            if (source) { source.close(); delete run.streamSources[s.stream]; }
            col.querySelector(".stream-state").textContent = "cut by the client…";
            col.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
          });
          col.querySelector(".stream-cancel").addEventListener("click", function () {
            run.stoppedAt[s.stream] = performance.now();
            postJson(run.cancelUrl, { stream: s.stream });
            col.querySelector(".stream-state").textContent = "cancelling…";
          });
          box.appendChild(col);
          streamFollow(root, run, s.stream);
        });
      },
      step: function (d) { kvShow(root, d); },
      aborted: function (d) {
        // Kept for the page's tests and curious readers: the pool's free blocks just before
        // and just after the abort, as the engine counted them.
        root.dataset.kvBeforeAbort = d.kv_blocks_free_before;
        root.dataset.kvAfterAbort = d.kv_blocks_free;
        run.freedAt[d.stream] = performance.now();
        kvShow(root, d);
        streamEnded(d.stream, "aborted (" + d.reason + "): " + count(d.blocks_freed, "block") + " back in the pool");
      },
      done: function (d) { kvShow(root, d); streamEnded(d.stream, "done (" + d.finish_reason + ")"); },
      finished: function (d) { kvShow(root, d); streamingResult(root, run, d.measured_vs_predicted); },
      cancelled: function (d) {
        kvShow(root, d);
        // The whole run stopped: no panel still streams, and none keeps a live button.
        root.querySelectorAll(".stream:not(.ended)").forEach(function (col) {
          streamEnded(col.dataset.stream, "cancelled with the run (" + d.reason + ")");
        });
      },
    };
  }

  // The run's end: each stopped stream's blocks, and how soon they came back, against problem
  // 2's arithmetic (the worker computes the prediction; this page adds what only it can time:
  // from the click to the "aborted" event arriving back).
  function streamingResult(root, run, mvp) {
    const box = root.querySelector(".streaming-result");
    if (!box || !mvp) return;
    box.replaceChildren();
    box.hidden = false;
    if (!mvp.measured.length) {
      box.appendChild(el("p", "", "No stream was cut or cancelled in this run, so there is " +
        "nothing to set against the prediction: run it again and cut one mid-answer."));
      return;
    }
    const predicted = {};
    mvp.predicted.forEach(function (p) { predicted[p.stream] = p; });
    const rows = mvp.measured.map(function (m) {
      const p = predicted[m.stream] || {};
      const clicked = run.stoppedAt[m.stream], freed = run.freedAt[m.stream];
      const endToEnd = clicked !== undefined && freed !== undefined ? (freed - clicked) / 1000 : null;
      const inWorker = m.cut_seen_ms !== null && m.freed_ms !== null ? (m.freed_ms - m.cut_seen_ms) / 1000 : null;
      return { m: m, p: p, endToEnd: endToEnd, inWorker: inWorker };
    });
    const table = el("table", "estimate-table streaming-table");
    table.appendChild(el("caption", "", "Each stopped stream, measured vs problem 2's arithmetic " +
      "(blocks of " + mvp.block_size + " tokens; one token every " + ms(mvp.pace_s * 1000) + ")"));
    const head = el("tr");
    ["stream", "stopped after", "blocks freed (measured)", "blocks held (predicted)",
     "freed after (measured, click to event)", "freed within (predicted)",
     "held without cancellation (predicted)"].forEach(function (h) { head.appendChild(el("th", "", h)); });
    table.appendChild(head);
    rows.forEach(function (r) {
      const tr = el("tr");
      [String(r.m.stream) + " (" + r.m.reason + ")", count(r.m.completion_tokens, "token"),
       String(r.m.blocks_freed), r.p.blocks_at_cut === undefined ? "–" : String(r.p.blocks_at_cut),
       r.endToEnd === null ? "–" : duration(r.endToEnd),
       r.p.freed_within_s === undefined ? "–" : duration(r.p.freed_within_s),
       r.p.held_s_without_cancel === undefined ? "–" : duration(r.p.held_s_without_cancel)
      ].forEach(function (v) { tr.appendChild(el("td", "", v)); });
      table.appendChild(tr);
    });
    const scroll = el("div", "table-scroll");
    scroll.appendChild(table);
    box.appendChild(scroll);
    const first = rows[0];
    const words = [];
    if (first.p.blocks_at_cut !== undefined) {
      words.push("Stream " + first.m.stream + " gave back " + count(first.m.blocks_freed, "block") +
        " where the formula expects " + first.p.blocks_at_cut + " (its prompt and every token but " +
        "the newest, in whole blocks" + (first.m.blocks_freed < first.p.blocks_at_cut ?
        "; fewer come back when full prompt blocks are shared with another stream's identical prompt start and stay in use" : "") + ").");
    }
    if (first.endToEnd !== null && first.p.freed_within_s !== undefined) {
      words.push("They came back " + duration(first.endToEnd) + " after the click, against a " +
        "predicted " + duration(first.p.freed_within_s) + " at most: " +
        (first.m.reason === "disconnected" ? "a cut is noticed when the relay next polls Redis " +
        "(every " + duration(mvp.relay_poll_s) + " at most), " : "a cancel arrives as a request at once, ") +
        "then the worker sees it within its poll and the abort lands at the next engine step; " +
        "the browser's own timing adds the trip of the click and of the event back.");
    }
    if (first.p.held_s_without_cancel !== undefined) {
      words.push("Without cancellation the engine would have gone on decoding for nobody for " +
        duration(first.p.held_s_without_cancel) + ", its blocks growing to " +
        first.p.blocks_at_end + ".");
    }
    box.appendChild(el("p", "streaming-verdict", words.join(" ")));
    const target = el("div", "demo-plot streaming-plot");
    box.appendChild(target);
    plotlyLoad(root.dataset.plotlySrc).then(function (Plotly) {
      const traces = [];
      rows.forEach(function (r) {
        const freedS = r.endToEnd !== null ? r.endToEnd : (r.inWorker || 0);
        traces.push({ type: "scatter", mode: "lines", line: { shape: "hv" },
          name: "stream " + r.m.stream + ", measured",
          x: [0, freedS, freedS], y: [r.m.blocks_freed, r.m.blocks_freed, 0] });
        if (r.p.held_s_without_cancel !== undefined) {
          traces.push({ type: "scatter", mode: "lines", line: { dash: "dash" },
            name: "stream " + r.m.stream + ", predicted without cancellation",
            x: [0, r.p.held_s_without_cancel, r.p.held_s_without_cancel],
            y: [r.p.blocks_at_cut, r.p.blocks_at_end, 0] });
          traces.push({ type: "scatter", mode: "lines", line: { dash: "dot" },
            name: "stream " + r.m.stream + ", predicted with cancellation (at most)",
            x: [0, r.p.freed_within_s, r.p.freed_within_s],
            y: [r.p.blocks_at_cut, r.p.blocks_at_cut, 0] });
        }
      });
      const layout = {
        title: { text: "KV blocks held after a stream was stopped", font: { size: 14 } },
        height: 320, margin: { l: 60, r: 20, t: 40, b: 90 },
        xaxis: { title: { text: "seconds since the stream was stopped" }, rangemode: "tozero" },
        yaxis: { title: { text: "KV blocks held" }, rangemode: "tozero" },
        legend: { orientation: "h", y: -0.35 },
      };
      return Plotly.newPlot(target, traces, layout, { displayModeBar: false, responsive: true });
    }).then(function () { target.classList.add("drawn"); }).catch(function () {
      target.textContent = "The plot could not be drawn.";
    });
  }

  function streamFollow(root, run, index) {
    const source = new EventSource(run.eventsUrl + "?stream=" + index);
    run.streamSources[index] = source;
    const col = root.querySelector('.stream[data-stream="' + index + '"]');
    source.addEventListener("token", function (e) {
      const d = JSON.parse(e.data);
      col.querySelector(".stream-text").appendChild(el("span", "token", d.text));
    });
    ["done", "aborted", "finished", "failed", "cancelled"].forEach(function (type) {
      source.addEventListener(type, function () { source.close(); });
    });
  }

  // ---- Shared: one run at a time per demo element ----------------------------------------

  function runFollow(root, run, handlers) {
    const state = root.querySelector(".demo-state");
    const source = new EventSource(run.eventsUrl);
    run.source = source;
    Object.keys(handlers).forEach(function (type) {
      source.addEventListener(type, function (e) { handlers[type](JSON.parse(e.data)); });
    });
    source.addEventListener("tokenized", function () { state.textContent = "running"; });
    source.addEventListener("streams", function () { state.textContent = "running"; });
    source.addEventListener("started", function () { state.textContent = "running"; });
    function end(label) {
      source.close();
      Object.values(run.streamSources).forEach(function (s) { s.close(); });
      run.streamSources = {};
      state.textContent = label;
      root.querySelector(".demo-run").disabled = false;
      root.querySelector(".demo-cancel").hidden = true;
      root.dataset.runState = label;
    }
    source.addEventListener("finished", function () { end("finished"); });
    source.addEventListener("cancelled", function () { end("cancelled"); });
    source.addEventListener("failed", function (e) {
      const d = JSON.parse(e.data);
      root.querySelector(".demo-error").textContent = d.message;
      end("failed");
    });
    // The server lost its message store: it says so once, then the stream ends for good.
    source.addEventListener("unavailable", function (e) {
      const d = JSON.parse(e.data);
      root.querySelector(".demo-error").textContent = d.message;
      end("connection lost");
    });
  }

  function demoWire(root) {
    if (root.dataset.wired) return;
    root.dataset.wired = "1";
    const form = root.querySelector(".demo-form");
    const isLifecycle = root.dataset.demo === "lifecycle";
    root.querySelectorAll("[data-example]").forEach(function (button) {
      button.addEventListener("click", function () { form.elements.prompt.value = button.dataset.example; });
    });
    let current = null;
    root.querySelector(".demo-cancel").addEventListener("click", function () {
      if (current) postJson(current.cancelUrl, {});
    });
    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      const runButton = root.querySelector(".demo-run");
      runButton.disabled = true;
      root.querySelector(".demo-state").textContent = "starting…";
      root.dataset.runState = "starting";
      const response = await postJson(root.dataset.startUrl, formParams(form));
      if (response.status !== 201) {
        showErrors(root, response);
        runButton.disabled = false;
        root.querySelector(".demo-state").textContent = "";
        root.dataset.runState = "";
        return;
      }
      showErrors(root, { data: {} });
      root.querySelector(".demo-error").textContent = "";
      const runId = response.data.run_id;
      current = {
        id: runId, eventsUrl: response.data.events_url,
        cancelUrl: response.data.events_url.replace(/events$/, "cancel"), streamSources: {},
        stoppedAt: {}, freedAt: {},
      };
      window.courseDemos.runs[root.dataset.demo] = current;
      root.querySelector(".demo-cancel").hidden = false;
      root.querySelector(".demo-state").textContent = "queued";
      const module = window.courseDemos.modules[root.dataset.demo];
      if (module) {
        module.reset(root);
        runFollow(root, current, module.handlers(root, current));
      } else if (isLifecycle) {
        lifecycleReset(root);
        runFollow(root, current, lifecycleHandlers(root));
      } else {
        streamingReset(root);
        runFollow(root, current, streamingHandlers(root, current));
      }
    });
  }

  function demosWire() { document.querySelectorAll(".demo[data-demo]").forEach(demoWire); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", demosWire);
  else demosWire();
  document.addEventListener("htmx:afterSettle", demosWire);
})();
