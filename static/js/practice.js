// Mock interviews: the countdown, and the answer kept in this browser as it is typed, so a
// reload or a closed tab loses nothing. The page works without this script (no clock, no
// autosave); with it, the clock submits the answer when it reaches zero.
(function () {
  "use strict";

  const storageKey = (problem) => `course.practice.${problem}`;

  function load(problem) {
    try {
      return JSON.parse(window.localStorage.getItem(storageKey(problem))) || null;
    } catch (error) {
      return null; // storage off or corrupt: start afresh
    }
  }

  function save(problem, state) {
    try {
      window.localStorage.setItem(storageKey(problem), JSON.stringify(state));
    } catch (error) {
      // Storage full or disabled: the answer still posts with the form.
    }
  }

  function clockText(seconds) {
    const whole = Math.max(0, Math.ceil(seconds));
    const minutes = Math.floor(whole / 60);
    return `${minutes}:${String(whole % 60).padStart(2, "0")} left`;
  }

  function interview(root) {
    const problem = root.dataset.problem;
    const limit = Number(root.dataset.seconds);
    const form = root.querySelector("[data-answer-form]");
    const answer = root.querySelector("[data-answer]");
    const started = root.querySelector("[data-started]");
    const countdown = root.querySelector("[data-countdown]");
    const note = root.querySelector("[data-countdown-note]");
    let state = load(problem);
    const fresh = "clockReset" in root.dataset; // the server set a new clock
    if (state && !fresh && state.seconds === limit && state.started) {
      // The same interview, reloaded: its clock keeps running from when it started.
      started.value = state.started;
    } else {
      state = {answer: state ? state.answer : "", seconds: limit, started: started.value,
               startedAt: Date.now()};
    }
    if (!answer.value && state.answer) {
      answer.value = state.answer;
      note.textContent = "Your answer so far was restored.";
    }
    state.answer = answer.value;
    save(problem, state);
    answer.addEventListener("input", () => {
      state.answer = answer.value;
      save(problem, state);
    });
    let submitted = false;
    form.addEventListener("submit", () => {
      submitted = true;
      state.answer = answer.value;
      save(problem, state); // cleared only once the server has the attempt
    });
    function tick() {
      const left = limit - (Date.now() - state.startedAt) / 1000;
      countdown.textContent = clockText(left);
      countdown.classList.toggle("is-late", left <= 60);
      if (left <= 0 && !submitted) {
        submitted = true;
        note.textContent = "Time is up: your answer is being submitted.";
        state.answer = answer.value;
        save(problem, state);
        form.requestSubmit ? form.requestSubmit() : form.submit();
        return;
      }
      if (!submitted) window.setTimeout(tick, 250);
    }
    tick();
  }

  function ready() {
    document.querySelectorAll("[data-mock-interview]").forEach(interview);
    // The attempt page: the server has the answer, so this browser's copy can go.
    document.querySelectorAll("[data-practice-clear]").forEach((el) => {
      try {
        window.localStorage.removeItem(storageKey(el.dataset.practiceClear));
      } catch (error) {
        // nothing to clear
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
