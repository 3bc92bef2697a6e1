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
