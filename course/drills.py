"""Drills as practice: who answered what, accuracy per topic, the weak topics that come back
sooner, and rapid-fire rounds of ten.

The questions and their grading are problems/drills.py (no database); this module records
attempts (an account's, or an anonymous visitor's until they log in, as practice does), picks
the next question, and keeps a round's state in the session.
"""

import random
import secrets
import time
from dataclasses import dataclass

from django.http import HttpRequest

from course.models import DrillAttempt
from course.practice import _owner_fields, _owner_filter
from problems.drills import (
    KINDS,
    ROUND_SIZE,
    SECONDS_PER_QUESTION,
    TOPICS,
    DrillKind,
    Grade,
    Question,
    kinds_for,
)

ROUND_KEY = "drill_round"
# A round's clock: a little grace for the request to arrive after the page's own clock fires.
LATE_GRACE_SECONDS = 5
# How many of a topic's latest attempts decide whether it is weak.
RECENT = 10
SEED_MAX = 2**31 - 1
# Points in a round: right 1, the right order of magnitude ½.
POINTS = {"right": 1.0, "close": 0.5, "wrong": 0.0, "late": 0.0}


def drill_record(*, request: HttpRequest, question: Question, answer: str, grade: Grade | None,
                 round_id: str = "", seconds_used: int | None = None) -> DrillAttempt:
    """Save one graded answer (grade None: the round's clock ran out)."""
    return DrillAttempt.objects.create(
        **_owner_fields(request), kind=question.kind.slug, topic=question.kind.topic,
        seed=question.seed, answer=answer[:80], verdict=grade.verdict if grade else "late",
        mistake=grade.mistake.name[:120] if grade and grade.mistake else "",
        round=round_id, seconds_used=seconds_used)


def drill_attempts(*, request: HttpRequest) -> list[DrillAttempt]:
    owner = _owner_filter(request)
    if owner is None:
        return []
    return list(DrillAttempt.objects.filter(owner))


@dataclass(frozen=True)
class TopicStats:
    topic: str
    label: str
    kinds: int
    attempts: int
    right: int
    close: int
    missed: int
    recent_accuracy: float | None  # share right among the latest RECENT, None untried

    @property
    def accuracy(self) -> float | None:
        return self.right / self.attempts if self.attempts else None


def topic_stats(*, request: HttpRequest,
                attempts: list[DrillAttempt] | None = None) -> list[TopicStats]:
    """Every topic with its counts, in the order the course teaches them."""
    attempts = drill_attempts(request=request) if attempts is None else attempts
    rows = []
    for topic, label in TOPICS.items():
        mine = [a for a in attempts if a.topic == topic]  # newest first
        recent = mine[:RECENT]
        rows.append(TopicStats(
            topic=topic, label=label, kinds=len(kinds_for(topic=topic)), attempts=len(mine),
            right=sum(a.verdict == "right" for a in mine),
            close=sum(a.verdict == "close" for a in mine),
            missed=sum(a.verdict in ("wrong", "late") for a in mine),
            recent_accuracy=(sum(a.verdict == "right" for a in recent) / len(recent)
                             if recent else None)))
    return rows


def topic_weights(stats: list[TopicStats]) -> dict[str, float]:
    """How often each topic comes up in a mixed set: a weak topic (missed lately) several times
    as often as one answered well, an untried one in between, so weak spots come back sooner."""
    weights = {}
    for s in stats:
        if s.recent_accuracy is None:
            weights[s.topic] = 2.0
        else:
            weights[s.topic] = 1.0 + 4.0 * (1.0 - s.recent_accuracy)
    return weights


def weak_topics(stats: list[TopicStats], *, count: int = 3) -> list[str]:
    """The topics answered worst lately (at least one miss among the latest), worst first."""
    tried = [s for s in stats if s.recent_accuracy is not None and s.recent_accuracy < 1.0]
    tried.sort(key=lambda s: (s.recent_accuracy, -s.attempts))
    return [s.topic for s in tried[:count]]


MODES = ("mixed", "weak")


def mode_valid(mode: str) -> bool:
    return mode in MODES or mode in TOPICS


def kind_pick(*, request: HttpRequest, mode: str, rng: random.Random,
              stats: list[TopicStats] | None = None) -> DrillKind:
    """The next drill kind for `mode`: a topic's own kinds, the weak topics' ("weak", or mixed
    when none is weak yet), or any topic weighted towards the weak ones ("mixed")."""
    if mode in TOPICS:
        return rng.choice(kinds_for(topic=mode))
    stats = topic_stats(request=request) if stats is None else stats
    if mode == "weak":
        weak = weak_topics(stats)
        if weak:
            return rng.choice([k for k in KINDS if k.topic in weak])
    weights = topic_weights(stats)
    topic = rng.choices(list(weights), weights=list(weights.values()))[0]
    return rng.choice(kinds_for(topic=topic))


def seed_new() -> int:
    return secrets.randbelow(SEED_MAX) + 1


# ---- rounds ----------------------------------------------------------------------------------

def round_start(*, request: HttpRequest, mode: str) -> dict:
    """A new round of ROUND_SIZE questions for `mode`, kept in the session."""
    rng = random.Random(secrets.randbits(64))
    stats = topic_stats(request=request)
    items = []
    for _ in range(ROUND_SIZE):
        kind = kind_pick(request=request, mode=mode, rng=rng, stats=stats)
        items.append([kind.slug, seed_new()])
    state = {"id": secrets.token_hex(8), "mode": mode, "items": items, "index": 0,
             "results": [], "shown_at": None}
    request.session[ROUND_KEY] = state
    return state


def round_get(request: HttpRequest) -> dict | None:
    state = request.session.get(ROUND_KEY)
    if not isinstance(state, dict) or not isinstance(state.get("items"), list):
        return None
    return state


def round_question_shown(request: HttpRequest, state: dict) -> int:
    """Start the current question's clock the first time it is shown; the seconds left."""
    if state.get("shown_at") is None:
        state["shown_at"] = time.time()
        request.session[ROUND_KEY] = state
    return max(0, int(SECONDS_PER_QUESTION - (time.time() - state["shown_at"])))


def round_answer(*, request: HttpRequest, state: dict, question: Question, answer: str,
                 grade: Grade | None) -> dict:
    """Record the current question's answer (grade None: nothing readable in time) and move
    on. An answer that arrives after the clock is recorded as late whatever it says."""
    shown_at = state.get("shown_at") or time.time()
    used = int(time.time() - shown_at)
    if used > SECONDS_PER_QUESTION + LATE_GRACE_SECONDS:
        grade = None
    attempt = drill_record(request=request, question=question, answer=answer, grade=grade,
                           round_id=state["id"], seconds_used=used)
    state["results"].append({"kind": question.kind.slug, "seed": question.seed,
                             "verdict": attempt.verdict, "answer": answer[:80],
                             "seconds": used})
    state["index"] += 1
    state["shown_at"] = None
    request.session[ROUND_KEY] = state
    return state


def round_score(state: dict) -> tuple[float, int]:
    """Points scored (right 1, the right order of magnitude ½) and questions asked."""
    return sum(POINTS.get(r["verdict"], 0.0) for r in state["results"]), len(state["items"])


def drill_history(*, request: HttpRequest) -> list[tuple[str, list[tuple[str, float]]]]:
    """Accuracy per topic over time: for each topic tried, (day, share right that day) oldest
    first."""
    by_topic: dict[str, dict[str, list[int]]] = {}
    for a in reversed(drill_attempts(request=request)):
        day = a.created_at.date().isoformat()
        counts = by_topic.setdefault(a.topic, {}).setdefault(day, [0, 0])
        counts[0] += a.verdict == "right"
        counts[1] += 1
    return [(topic, [(day, right / n) for day, (right, n) in days.items()])
            for topic, days in by_topic.items()]
