// The numbers sheet's print button (the page prints the same from the browser's menu).
document.querySelectorAll("[data-print]").forEach((button) => {
  button.addEventListener("click", () => window.print());
});
