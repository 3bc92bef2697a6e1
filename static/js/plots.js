// Draw every [data-plot] element (plotly figure JSON built in Python) with the vendored
// plotly.js: once the page has loaded, and again whenever htmx swaps new content in.
(function () {
  function plotDraw(element) {
    var figure;
    try {
      figure = JSON.parse(element.getAttribute("data-plot"));
    } catch (error) {
      return; // a broken figure leaves the table beside it as the only view
    }
    Plotly.newPlot(element, figure.data, figure.layout, { displayModeBar: false, responsive: true });
  }

  // Plotly marks the elements it has drawn with .js-plotly-plot; an htmx swap brings new,
  // undrawn ones (an outerHTML swap leaves the old target detached, so look at the document).
  function plotsDraw() {
    if (typeof Plotly === "undefined") return;
    document.querySelectorAll("[data-plot]:not(.js-plotly-plot)").forEach(plotDraw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", plotsDraw);
  } else {
    plotsDraw();
  }
  // htmx briefly gives a swapped-in element that shares an id with the old one the old
  // attributes ("settling"), so look again once it has settled.
  document.addEventListener("htmx:afterSwap", plotsDraw);
  document.addEventListener("htmx:afterSettle", plotsDraw);
})();
