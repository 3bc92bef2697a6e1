// Draw every [data-plot] element (plotly figure JSON built in Python) with the vendored
// plotly.js, fetched only when the first plot comes near the screen (1 MB that would otherwise
// hold up every page's load event), and again whenever htmx swaps new content in.
(function () {
  "use strict";
  var script = document.currentScript;
  var PLOTLY_SRC = script && script.dataset.plotlySrc;
  var loading = null;

  function plotlyLoad() {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var tag = document.createElement("script");
        tag.src = PLOTLY_SRC;
        tag.onload = function () { resolve(window.Plotly); };
        tag.onerror = reject;
        document.head.appendChild(tag);
      });
    }
    return loading;
  }

  function plotDraw(element) {
    if (element.dataset.plotState) return;
    element.dataset.plotState = "drawing";
    var figure;
    try {
      figure = JSON.parse(element.getAttribute("data-plot"));
    } catch (error) {
      return; // a broken figure leaves the table under "Show the numbers" as the only view
    }
    // The title is the figure's HTML caption, which wraps; inside plotly it was clipped.
    var layout = figure.layout || {};
    if (element.closest(".plot-figure") && element.closest(".plot-figure").querySelector(".plot-title")) {
      delete layout.title;
      layout.margin = Object.assign({}, layout.margin || {}, { t: 16 });
    }
    plotlyLoad().then(function (Plotly) {
      return Plotly.newPlot(element, figure.data, layout, { displayModeBar: false, responsive: true });
    }).then(function () {
      element.dataset.plotState = "drawn";
      element.dispatchEvent(new CustomEvent("course:plotdrawn", { bubbles: true }));
    }).catch(function () {
      element.dataset.plotState = "failed";
    });
  }

  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) { observer.unobserve(entry.target); plotDraw(entry.target); }
    });
  }, { rootMargin: "600px 0px" }) : null;

  // The page's plots, drawn as each nears the screen.
  function plotsWatch() {
    document.querySelectorAll("[data-plot]:not([data-plot-state])").forEach(function (element) {
      if (observer) observer.observe(element);
      else plotDraw(element);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", plotsWatch);
  } else {
    plotsWatch();
  }
  // Once the page has loaded, the plots not yet in view are drawn one at a time in idle
  // moments, so scrolling down finds them ready and nothing holds up the load event.
  function drawIdle() {
    // Only plots that are laid out: one inside a closed fold would be drawn at a wrong size
    // (the observer draws it once the fold opens and it comes into view).
    var next = Array.prototype.find.call(
      document.querySelectorAll("[data-plot]:not([data-plot-state])"),
      function (element) { return element.getClientRects().length > 0; });
    if (!next) return;
    if (observer) observer.unobserve(next);
    plotDraw(next);
    (window.requestIdleCallback || function (f) { return setTimeout(f, 200); })(drawIdle);
  }
  window.addEventListener("load", function () { setTimeout(drawIdle, 1500); });
  // A swap redraws a calculator the learner is working with: draw it now. htmx briefly gives
  // a swapped-in element that shares an id with the old one the old attributes ("settling"),
  // so look again once it has settled.
  function plotsDrawNow() {
    document.querySelectorAll("[data-plot]:not([data-plot-state])").forEach(function (element) {
      if (observer) observer.unobserve(element);
      plotDraw(element);
    });
  }
  document.addEventListener("htmx:afterSwap", plotsDrawNow);
  document.addEventListener("htmx:afterSettle", plotsDrawNow);
})();
