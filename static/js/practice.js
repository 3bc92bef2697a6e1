// Mock interviews: the countdown, and the answer kept in this browser as it is typed, so a
// reload or a closed tab loses nothing. The page works without this script (no clock, no
// autosave); with it, the clock submits the answer when it reaches zero.
//
// A draft is stored under its owner's tag (an opaque id the server gives, one per account or
// anonymous visitor) and the problem, so a second person on the same browser never sees the
// first one's answer; after login, a draft typed before it is found under the merged visitor's
// tag and moves to the account. Each interview has its own id (nonce): the attempt page drops
// the draft only when it shows that same interview's attempt.
(function () {
  "use strict";

  const storageKey = (owner, problem) => `course.practice.${owner}.${problem}`;

  function load(key) {
    try {
      return JSON.parse(window.localStorage.getItem(key)) || null;
    } catch (error) {
      return null; // storage off or corrupt: start afresh
    }
  }

  function save(key, state) {
    try {
      window.localStorage.setItem(key, JSON.stringify(state));
    } catch (error) {
      // Storage full or disabled: the answer still posts with the form.
    }
  }

  function remove(key) {
    try {
      window.localStorage.removeItem(key);
    } catch (error) {
      // nothing to remove
    }
  }

  function clockText(seconds) {
    const whole = Math.max(0, Math.ceil(seconds));
    const minutes = Math.floor(whole / 60);
    return `${minutes}:${String(whole % 60).padStart(2, "0")} left`;
  }

  function interview(root) {
    const problem = root.dataset.problem;
    const key = storageKey(root.dataset.owner, problem);
    const limit = Number(root.dataset.seconds);
    const form = root.querySelector("[data-answer-form]");
    const answer = root.querySelector("[data-answer]");
    const started = root.querySelector("[data-started]");
    const countdown = root.querySelector("[data-countdown]");
    const reading = root.querySelector("[data-reading]");
    const startButton = root.querySelector("[data-clock-start]");
    const note = root.querySelector("[data-countdown-note]");
    let state = load(key);
    if (!state && root.dataset.ownerMerged) {
      // Typed before logging in: the account owns it now.
      const mergedKey = storageKey(root.dataset.ownerMerged, problem);
      state = load(mergedKey);
      if (state) {
        save(key, state);
        remove(mergedKey);
      }
    }
    const fresh = "clockReset" in root.dataset; // the server set a new clock
    // A failed submission (an error shown beside a field) is never sent again by the clock.
    const failed = "submitFailed" in root.dataset;
    if (fresh && window.history.replaceState) {
      // "Start again" once: a reload of this address keeps the clock it started.
      const url = new URL(window.location.href);
      if (url.searchParams.has("restart")) {
        url.searchParams.delete("restart");
        window.history.replaceState(null, "", url);
      }
    }
    if (state && !fresh && state.seconds === limit && state.started) {
      // The same interview, reloaded: its clock keeps running from when it started.
      started.value = state.started;
    } else {
      // The clock waits for the learner: it starts at the first keystroke or at Start.
      state = {answer: state ? state.answer : "", seconds: limit, started: started.value,
               nonce: root.dataset.nonce, loadedAt: Date.now(), startedAt: null};
    }
    // Drafts saved before the clock waited for a keystroke started it on load.
    if (state.loadedAt === undefined) state.loadedAt = state.startedAt;
    if (!answer.value && state.answer) {
      answer.value = state.answer;
      note.textContent = "Your answer so far was restored.";
    }
    state.answer = answer.value;
    save(key, state);
    function clockStart() {
      if (state.startedAt) return;
      state.startedAt = Date.now();
      save(key, state);
      tick();
    }
    answer.addEventListener("keydown", clockStart);
    answer.addEventListener("input", () => {
      clockStart(); // pasted or dictated text starts it too
      state.answer = answer.value;
      save(key, state);
    });
    if (startButton) {
      startButton.closest("[data-clock-start-row]").hidden = false;
      startButton.addEventListener("click", () => {
        clockStart();
        answer.focus();
      });
    }
    let submitted = false;
    form.addEventListener("submit", () => {
      submitted = true;
      state.answer = answer.value;
      save(key, state); // dropped only once the server shows this interview's attempt
    });
    let warned = false;
    let ticking = false;
    function tick() {
      if (!state.startedAt) {
        countdown.textContent = `${clockText(limit).replace(" left", "")} on the clock`;
        return;
      }
      // What the server subtracts from its own count: the question read before the clock ran.
      reading.value = String(Math.max(0, (state.startedAt - state.loadedAt) / 1000));
      if (startButton) startButton.closest("[data-clock-start-row]").hidden = true;
      const left = limit - (Date.now() - state.startedAt) / 1000;
      countdown.textContent = clockText(left);
      countdown.classList.toggle("is-late", left <= 60);
      if (left <= 60 && left > 0 && !warned && limit > 60) {
        warned = true; // said once, politely, for screen readers (the timer itself is silent)
        note.textContent = "One minute left.";
      }
      if (left <= 0 && failed && !submitted) {
        note.textContent = "Time is up. Your answer is kept: correct it and submit it.";
        return;
      }
      if (left <= 0 && !submitted) {
        submitted = true;
        note.textContent = "Time is up: your answer is being submitted.";
        state.answer = answer.value;
        save(key, state);
        form.requestSubmit ? form.requestSubmit() : form.submit();
        return;
      }
      if (!submitted && !ticking) {
        ticking = true;
        window.setTimeout(() => { ticking = false; tick(); }, 250);
      }
    }
    tick();
  }

  function ready() {
    document.querySelectorAll("[data-mock-interview]").forEach(interview);
    // The attempt page: the server has this interview's answer, so its draft can go (a draft
    // of another interview on the same problem, still being written, stays).
    document.querySelectorAll("[data-practice-clear]").forEach((el) => {
      const key = storageKey(el.dataset.owner, el.dataset.practiceClear);
      const state = load(key);
      if (state && el.dataset.nonce && state.nonce === el.dataset.nonce) remove(key);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
