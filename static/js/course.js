// After htmx replaces a field's error slot out of band, keep the input's aria-invalid in step
// with it, so assistive technology reports the field as invalid exactly while it has an error.
document.addEventListener("htmx:afterSettle", function () {
  document.querySelectorAll(".field-error[id]").forEach(function (slot) {
    var input = document.querySelector('[aria-describedby~="' + slot.id + '"]');
    if (!input) return;
    var invalid = slot.textContent.trim() !== "";
    if (invalid) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
    input.closest(".field") && input.closest(".field").classList.toggle("has-error", invalid);
  });
});

// A code block or table wider than its column scrolls inside itself: let a keyboard reach it
// (Tab to it, then the arrow keys scroll), as WCAG 2.1.1 asks of scrolling regions.
(function () {
  function scrollersReachable() {
    document.querySelectorAll("main pre, main table, main .table-scroll").forEach(function (box) {
      if (box.hasAttribute("tabindex")) return;
      if (box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1) {
        var style = getComputedStyle(box);
        if (/(auto|scroll)/.test(style.overflowX + style.overflowY)) box.setAttribute("tabindex", "0");
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", scrollersReachable);
  else scrollersReachable();
  document.addEventListener("htmx:afterSettle", scrollersReachable);
  window.addEventListener("resize", scrollersReachable);
})();
