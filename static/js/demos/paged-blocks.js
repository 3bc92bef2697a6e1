// The paged-blocks demo (problem 4): the pool redrawn block by block at every engine step
// (owner colours, free blocks grey, shared blocks with their reference count), then the plots
// of memory held against reservation, drawn from figures built in Python.
(function () {
  "use strict";
  window.courseDemos = window.courseDemos || { modules: {} };
  function lib() { return window.courseDemos.lib; }
  const COLORS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
    "#7F3C8D", "#11A579", "#3969AC", "#E73F74", "#80BA5A", "#008695", "#CF1C90", "#F97B72", "#4B4B8F"];
  const FREE = "#d9d9d9";

  function reset(root) {
    root.querySelector(".pb-grid").replaceChildren();
    root.querySelector(".pb-legend").replaceChildren();
    root.querySelector(".pb-pool").hidden = true;
    root.querySelector(".pb-status").textContent = "";
    root.querySelector(".pb-log").textContent = "";
    root.querySelector(".demo-plots").replaceChildren();
    root.querySelector(".run-note").hidden = true;
    root._pbColors = {};
  }

  function colorOf(root, id) {
    const known = root._pbColors;
    if (!(id in known)) known[id] = COLORS[Object.keys(known).length % COLORS.length];
    return known[id];
  }

  // One step's picture: the grid, each sequence's block table and the step's line.
  function draw(root, d) {
    const cells = root.querySelectorAll(".pb-grid .pb-block");
    d.owners.forEach(function (owner, i) {
      const cell = cells[i];
      if (!cell) return;
      cell.style.backgroundColor = owner === null ? FREE : colorOf(root, owner);
      const refs = d.shared[String(i)];
      cell.textContent = refs ? "×" + refs : "";
      cell.classList.toggle("pb-shared", Boolean(refs));
      cell.title = owner === null ? "block " + i + ": free" :
        "block " + i + ": " + owner + (refs ? " and " + (refs - 1) + " more" : "");
    });
    // Each sequence's block table (logical block → physical id), or why it has none.
    root.querySelectorAll(".pb-legend .pb-table").forEach(function (span) {
      const table = d.tables[span.dataset.seq];
      span.textContent = table ? "; block table [" + table.join(", ") + "]" :
        (root._pbDone[span.dataset.seq] ? "; finished, blocks returned" : "; waiting, no blocks");
    });
    const parts = ["step " + d.step + ": " + d.sequences + " running, " + d.waiting + " waiting, " +
      d.blocks_used + " of " + cells.length + " blocks held, " + d.stored + " of their " +
      d.blocks_used * root._pbBlockSize + " token slots filled (" + d.tokens +
      " tokens across the sequences, a shared prompt once per sample)"];
    if (d.forked.length) parts.push("forked " + d.forked.join(", "));
    d.copy_on_write.forEach(function (c) { parts.push(c[0] + " copied shared block " + c[1] + " to " + c[2]); });
    if (d.preempted.length) parts.push("preempted " + d.preempted.join(", "));
    if (d.finished.length) parts.push("finished " + d.finished.join(", "));
    root.querySelector(".pb-log").textContent = parts.join("; ") + ".";
  }

  function handlers(root) {
    const el = lib().el;
    return {
      started: function (d) {
        root._pbColors = {};
        root._pbBlockSize = d.block_size;
        root._pbDone = {};
        root._pbSteps = [];
        root.querySelector(".pb-scrub").hidden = true;
        const grid = root.querySelector(".pb-grid");
        grid.replaceChildren();
        for (let i = 0; i < d.pool_blocks; i++) {
          const cell = el("span", "pb-block", "");
          cell.dataset.block = String(i);
          cell.style.backgroundColor = FREE;
          grid.appendChild(cell);
        }
        const legend = root.querySelector(".pb-legend");
        legend.replaceChildren();
        d.requests.forEach(function (r) {
          const ids = [r.id];
          for (let s = 1; s < r.samples; s++) ids.push(r.id + ":" + s);
          ids.forEach(function (id) {
            const item = el("li", "", "");
            const swatch = el("span", "pb-swatch", "");
            swatch.style.backgroundColor = colorOf(root, id);
            item.appendChild(swatch);
            item.appendChild(document.createTextNode(" " + id + ": " + r.prompt + " prompt + " +
              r.output + " output tokens" + (r.samples > 1 ? " (one of " + r.samples + " samples)" : "")));
            const table = el("span", "pb-table", "");
            table.dataset.seq = id;
            item.appendChild(table);
            legend.appendChild(item);
          });
        });
        root.querySelector(".pb-pool").hidden = false;
        root.querySelector(".pb-status").textContent = d.requests.length + " requests on a pool of " +
          d.pool_blocks + " blocks of " + d.block_size + " tokens.";
      },
      step: function (d) {
        root._pbSteps.push(d);
        d.finished.forEach(function (id) { root._pbDone[id] = true; });
        draw(root, d);
      },
      cancelled: function (d) {
        // The worker aborted every request; when it reports every block back, so does the grid.
        if (d.all_blocks_returned) {
          root.querySelectorAll(".pb-grid .pb-block").forEach(function (cell, i) {
            cell.style.backgroundColor = FREE;
            cell.textContent = "";
            cell.classList.remove("pb-shared");
            cell.title = "block " + i + ": free";
          });
        }
        root.querySelector(".pb-log").textContent = "Cancelled: " + d.blocks_freed +
          " blocks freed" + (d.all_blocks_returned ? ", every block back on the free list." :
          ", but not every block came back.");
      },
      finished: function (d) {
        scrubberShow(root);
        lib().plotsDraw(root.querySelector(".demo-plots"), d.plots, root.dataset.plotlySrc);
        const note = root.querySelector(".run-note");
        note.textContent = d.note;
        note.hidden = false;
      },
    };
  }

  // After the run: the last step frees everything and leaves a grey grid, so show the step
  // that held the most blocks and let the learner move through every step.
  function scrubberShow(root) {
    const steps = root._pbSteps || [];
    if (!steps.length) return;
    const row = root.querySelector(".pb-scrub");
    const range = row.querySelector(".pb-step");
    const text = row.querySelector(".pb-step-text");
    let busiest = 0;
    steps.forEach(function (d, i) { if (d.blocks_used > steps[busiest].blocks_used) busiest = i; });
    function show(i) {
      i = Math.max(0, Math.min(steps.length - 1, i));
      range.value = String(i);
      // Which sequences had finished by then, for the block tables' words.
      root._pbDone = {};
      steps.slice(0, i + 1).forEach(function (d) { d.finished.forEach(function (id) { root._pbDone[id] = true; }); });
      draw(root, steps[i]);
      text.textContent = "step " + steps[i].step + " (" + (i + 1) + " of " + steps.length + ")" +
        (i === busiest ? ": the most blocks held" : "");
    }
    range.max = String(steps.length - 1);
    if (!row.dataset.wired) {
      row.dataset.wired = "1";
      range.addEventListener("input", function () { show(Number(range.value)); });
      row.querySelector(".pb-prev").addEventListener("click", function () { show(Number(range.value) - 1); });
      row.querySelector(".pb-next").addEventListener("click", function () { show(Number(range.value) + 1); });
    }
    row.hidden = false;
    show(busiest);
  }

  window.courseDemos.modules["paged-blocks"] = { reset: reset, handlers: handlers };
})();
