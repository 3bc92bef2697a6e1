// Mark the values a calculator's last change moved: before htmx swaps the working in, note
// each step's value by its label; after, flag the rows whose value changed and say what it was.
// A plot's "Show the numbers" left open stays open across the swap.
(function () {
  "use strict";
  var before = {};
  var numbersOpen = {};

  function valuesOf(output) {
    var values = {};
    output.querySelectorAll("table.steps tbody tr").forEach(function (row) {
      var label = row.querySelector("th"), value = row.querySelector("td.value");
      if (label && value) values[label.textContent.trim()] = value.textContent.trim();
    });
    return values;
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.classList && target.classList.contains("calculator-output")) {
      before[target.id] = valuesOf(target);
      numbersOpen[target.id] = Array.prototype.map.call(
        target.querySelectorAll("details.plot-numbers"), function (d) { return d.open; });
    }
  });

  document.addEventListener("htmx:afterSettle", function () {
    Object.keys(before).forEach(function (id) {
      var output = document.getElementById(id);
      var old = before[id];
      var open = numbersOpen[id] || [];
      delete before[id];
      delete numbersOpen[id];
      if (!output) return;
      output.querySelectorAll("details.plot-numbers").forEach(function (d, i) {
        if (open[i]) d.open = true;
      });
      var moved = 0;
      output.querySelectorAll("table.steps tbody tr").forEach(function (row) {
        var label = row.querySelector("th"), value = row.querySelector("td.value");
        if (!label || !value) return;
        var was = old[label.textContent.trim()];
        if (was !== undefined && was !== value.textContent.trim()) {
          row.classList.add("moved");
          var from = document.createElement("span");
          from.className = "moved-from";
          from.textContent = "was " + was;
          value.appendChild(from);
          moved += 1;
        }
      });
      output.dataset.moved = String(moved);
    });
  });
})();
