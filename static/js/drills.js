// A rapid-fire round's clock: counts down the seconds the server gave this question and, at
// zero, sends whatever is typed (marked as a timeout, so an empty or half answer is recorded as
// out of time rather than refused). Without JavaScript the server still times each answer.
(function () {
  "use strict";
  const clock = document.getElementById("round-clock");
  const form = document.getElementById("round-form");
  if (!clock || !form) return;
  let left = parseInt(clock.dataset.seconds, 10);
  if (!Number.isFinite(left)) return;
  let sent = false;
  form.addEventListener("submit", function () { sent = true; });
  const timer = setInterval(function () {
    left -= 1;
    clock.textContent = String(Math.max(left, 0));
    if (left <= 0 && !sent) {
      clearInterval(timer);
      sent = true;
      document.getElementById("round-timeout").value = "1";
      form.submit();
    }
  }, 1000);
})();
