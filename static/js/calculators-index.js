// The calculators index: a filter over the folded calculators, and a link to a calculator
// (#calc-slug) opens its fold.
(function () {
  "use strict";
  function openFor(hash) {
    if (!hash || hash.length < 2) return;
    const target = document.getElementById(decodeURIComponent(hash.slice(1)));
    const fold = target && target.closest("details.calculator-fold");
    if (fold && !fold.open) { fold.open = true; target.scrollIntoView(); }
  }
  function start() {
    const row = document.querySelector(".calculators-filter");
    const input = document.getElementById("calculators-filter");
    const count = document.getElementById("calculators-filter-count");
    const folds = Array.from(document.querySelectorAll("details.calculator-fold"));
    row.hidden = false;
    input.addEventListener("input", function () {
      const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      let shown = 0;
      folds.forEach(function (fold) {
        const match = words.every(function (w) { return fold.dataset.search.indexOf(w) >= 0; });
        fold.hidden = !match;
        if (match) shown += 1;
      });
      // Headings of a problem or page with nothing left under them go too.
      document.querySelectorAll(".calculator-problem").forEach(function (h) {
        let next = h.nextElementSibling, any = false;
        while (next && next.matches("details.calculator-fold")) { any = any || !next.hidden; next = next.nextElementSibling; }
        h.hidden = !any;
      });
      document.querySelectorAll(".calculator-group").forEach(function (g) {
        g.hidden = !g.querySelector("details.calculator-fold:not([hidden])");
      });
      count.textContent = words.length ? shown + " of " + folds.length + " calculators" : "";
    });
    openFor(window.location.hash);
    window.addEventListener("hashchange", function () { openFor(window.location.hash); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
