"""Practice: timed mock interviews graded against what the interviewer listens for, a history of
attempts per problem, and spaced reviews of the pages marked done.

Everything a mock interview shows comes from the problem's own page: the model answer, the
"listens for" points (one checklist item each) and the follow-ups with their hints are cut out
of the problem as the course page renders it, so practice never drifts from the course.

Who owns an attempt: an account when signed in, otherwise a visitor id kept in the session. On
login the visitor's attempts and reviews move to the account (the same rows, so nothing is lost
and nothing is counted twice). Services write (`attempt_start`, `attempt_grade`,
`review_on_page_marked`, `practice_merge_visitor`); selectors read.
"""

import datetime
import functools
import math
import random
import re
import uuid
from dataclasses import dataclass
from html import unescape

from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.safestring import SafeString, mark_safe

from course.models import DrillAttempt, PageReview, PracticeAttempt
from course.progress import progress_pages_done
from problems.registry import PAGES, PROBLEMS, Problem, page_get

VISITOR_KEY = "practice_visitor"
# The visitor id merged into the account at the last login: its drafts in the browser are the
# account's now.
MERGED_VISITOR_KEY = "practice_merged_visitor"
# An anonymous visitor's session (and with it their attempts, reviews and pages done) lasts this
# long after their last practice: longer than the ladder's last interval, so a review due in 60
# days still finds them. Django's default (two weeks) would orphan it. Login sets it back.
VISITOR_KEEP_SECONDS = 90 * 24 * 3600
MINUTES_DEFAULT = 5
MINUTES_MIN, MINUTES_MAX = 1, 60
ANSWER_MAX_CHARS = 20_000
# Seconds past the limit still accepted as "on time": the page's own clock submits at zero, and
# the request takes a moment to arrive.
LATE_GRACE_SECONDS = 30

# Days until the next review, one rung per well-answered review (a ladder like Leitner's boxes).
REVIEW_INTERVALS_DAYS = (1, 3, 7, 21, 60)
# A review counts as well answered when at least this share of the points was heard (the
# next review moves one rung further out), as poor below POOR_SHARE (back to the first rung);
# in between it stays on its rung.
GOOD_SHARE = 0.75
POOR_SHARE = 0.4

# The question as an interviewer would put it, one per problem: shorter and more open than the
# problem's title, the way it is asked across the table.
QUESTIONS: dict[int, str] = {
    1: "Walk me through everything that happens between a user pressing enter and the first "
       "token of the answer appearing. Where does the time go?",
    2: "How would you stream tokens to a browser, and what should the server do when the "
       "client disconnects or cancels halfway through?",
    3: "We serve a 70B model with a 32K context to 100 concurrent users. How much KV cache is "
       "that, and how many GPUs does it take?",
    4: "Explain PagedAttention. What problem does it solve, and what does it cost?",
    5: "FlashAttention computes the same attention as the standard kernel. Why is it faster?",
    6: "Compare static and continuous batching. When does continuous batching win big, and "
       "when does it barely matter?",
    7: "A 100,000-token prompt arrives while other users are streaming. What happens to them, "
       "and how does chunked prefill help?",
    8: "How does prefix caching work, and how would you route requests across replicas so it "
       "actually hits?",
    9: "Users complain the tokens come out too slowly. How do you cut inter-token latency "
       "without giving up throughput?",
    10: "When does speculative decoding speed things up, and when does it make them slower?",
    11: "Compare FP8, INT8, INT4 and NVFP4 for serving a model. Which would you pick, and why?",
    12: "H100, H200, B200 or L40S: how would you choose the GPU for an inference service?",
    13: "How would you profile an inference engine with Nsight to find where a step's time goes?",
    14: "The GPU shows 30% utilisation under load. How do you find out why, and what do you do?",
    15: "Write a fused RMSNorm kernel in Triton. Why is it faster than the PyTorch version?",
    16: "What would you put on the dashboard of an LLM serving system, and what would you alert "
        "on?",
    17: "Our p99 latency is ten times our p50. Where does the tail come from, and how do you "
        "shrink it?",
    18: "How would you benchmark vLLM against TensorRT-LLM and SGLang so the comparison is "
        "fair?",
    19: "How do you roll out a new model or a new quantisation safely, with automatic rollback?",
    20: "Replicas take minutes to start. How would you autoscale an inference fleet?",
    21: "One tenant sends most of the traffic and the others starve. How do you make serving "
        "fair, and how do you do admission control?",
    22: "Would you split prefill and decode onto different machines? What does moving the KV "
        "cache cost?",
    23: "How would you serve a large mixture-of-experts model across many GPUs: tensor, "
        "pipeline or expert parallelism?",
    24: "Cut our cost per million tokens by 70%. Where do you start, and what does each lever "
        "give?",
    25: "Design ChatGPT-style serving for a million daily users. How many GPUs, and how does "
        "it hold up at the peak?",
}


# Reading a problem's sections -----------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    html: SafeString  # the point as the page writes it (it may hold <code>)
    text: str  # plain text, which identifies the point across attempts


@dataclass(frozen=True)
class FollowUp:
    question: SafeString
    hint: SafeString


@dataclass(frozen=True)
class PracticeSheet:
    """What a mock interview on one problem needs, cut out of its page."""

    problem: Problem
    question: str
    answer: SafeString
    points: tuple[Point, ...]
    followups: tuple[FollowUp, ...]


_TAG = re.compile(r"<[^>]+>")


def _plain(html: str) -> str:
    return " ".join(unescape(_TAG.sub(" ", html)).split())


def _elements(html: str, tag: str) -> list[str]:
    """The inner HTML of each outermost `<tag>` in `html` (nested ones stay inside)."""
    found, depth, start = [], 0, 0
    for m in re.finditer(rf"<(/?){tag}\b[^>]*>", html):
        if m.group(1):
            depth -= 1
            if depth == 0:
                found.append(html[start:m.start()])
        else:
            if depth == 0:
                start = m.end()
            depth += 1
    return found


def _section(html: str, section_id: str) -> str:
    """The inner HTML of the problem section with this id, its heading removed."""
    opening = re.search(rf'<section\b[^>]*\bid="{re.escape(section_id)}"[^>]*>', html)
    if opening is None:
        return ""
    depth, end = 1, len(html)
    for m in re.finditer(r"<(/?)section\b[^>]*>", html[opening.end():]):
        depth += -1 if m.group(1) else 1
        if depth == 0:
            end = opening.end() + m.start()
            break
    return re.sub(r"^\s*<h3>.*?</h3>", "", html[opening.end():end], count=1, flags=re.S)


def practice_problems() -> list[Problem]:
    """The problems whose pages are written, in course order: the ones that can be practised."""
    return [p for page in PAGES for p in page.problems if p.template_name is not None]


def practice_sheet(*, problem: Problem, request: HttpRequest) -> PracticeSheet | None:
    """The problem's question, model answer, points and follow-ups; None while it is unwritten
    or its page lacks them."""
    if problem.template_name is None:
        return None
    html = render_to_string(problem.template_name, {"problem": problem}, request=request)
    anchor = problem.anchor
    answer = _section(html, f"{anchor}-answer").strip()
    listens = _section(html, f"{anchor}-listens")
    points = tuple(Point(mark_safe(li.strip()), _plain(li))  # noqa: S308 (the course's own prose)
                   for li in _elements(listens, "li"))
    followups_html = _section(html, f"{anchor}-followups")
    followups = []
    for question, answer_part in zip(_elements(followups_html, "dt"),
                                     _elements(followups_html, "dd"), strict=False):
        hint = _elements(answer_part, "details")
        hint_html = re.sub(r"^\s*<summary>.*?</summary>", "", hint[0] if hint else answer_part,
                           count=1, flags=re.S)
        followups.append(FollowUp(mark_safe(question.strip()), mark_safe(hint_html.strip())))  # noqa: S308
    if not answer or not points:
        return None
    return PracticeSheet(problem=problem, question=QUESTIONS[problem.number],
                         answer=mark_safe(answer), points=points,  # noqa: S308
                         followups=tuple(followups))


# Owners ---------------------------------------------------------------------------------------


def _visitor_id(request: HttpRequest, *, create: bool) -> str | None:
    visitor = request.session.get(VISITOR_KEY)
    if isinstance(visitor, str) and re.fullmatch(r"[0-9a-f]{32}", visitor):
        return visitor
    if not create:
        return None
    visitor = uuid.uuid4().hex
    request.session[VISITOR_KEY] = visitor
    return visitor


def _owner_filter(request: HttpRequest) -> Q | None:
    """Rows this visitor owns, or None when an anonymous visitor has none yet."""
    if request.user.is_authenticated:
        return Q(user=request.user)
    visitor = _visitor_id(request, create=False)
    return Q(user=None, visitor=visitor) if visitor else None


def _tag(owner: str) -> str:
    return salted_hmac("course.practice.owner", owner).hexdigest()[:20]


def practice_owner_tags(request: HttpRequest, *, create: bool = True) -> tuple[str, str]:
    """Who owns a draft kept in the browser, as an opaque tag (never the id itself), and the tag
    of the visitor merged into this account at login ("" when none): drafts are stored under the
    owner's tag, so a second person on the same browser never sees the first one's answer.
    Without `create`, an anonymous visitor with no id yet gets a tag for this page only, and no
    session is written for them."""
    if request.user.is_authenticated:
        merged = request.session.get(MERGED_VISITOR_KEY)
        return (_tag(f"user:{request.user.pk}"),
                _tag(f"visitor:{merged}") if isinstance(merged, str) and merged else "")
    visitor = _visitor_id(request, create=create) or f"page-{uuid.uuid4().hex}"
    return _tag(f"visitor:{visitor}"), ""


def answer_clean(answer: str) -> str:
    """The answer as stored: line ends as the browser counts them (one character each, as its
    maxlength does) and no NUL characters, which PostgreSQL text cannot hold."""
    return answer.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


def _owner_fields(request: HttpRequest) -> dict:
    if request.user.is_authenticated:
        return {"user": request.user, "visitor": ""}
    request.session.set_expiry(VISITOR_KEEP_SECONDS)  # kept while the visitor practises
    return {"user": None, "visitor": _visitor_id(request, create=True)}


# Attempts -------------------------------------------------------------------------------------


def attempt_start(*, request: HttpRequest, problem: Problem, sheet: PracticeSheet, answer: str,
                  seconds_limit: int, seconds_used: int, nonce: str = "") -> PracticeAttempt:
    """Save a submitted answer, with a follow-up drawn for it; the points are graded next. The
    same interview posting the same answer again (a double click, the clock firing as the
    button is pressed, a resubmission from the back button) gives the attempt already saved."""
    owner = _owner_filter(request)
    if nonce and owner is not None:
        same = PracticeAttempt.objects.filter(owner, problem=problem.number, nonce=nonce,
                                              answer=answer).first()
        if same is not None:
            return same
    return PracticeAttempt.objects.create(
        **_owner_fields(request), problem=problem.number, answer=answer, nonce=nonce,
        seconds_limit=seconds_limit, seconds_used=min(seconds_used,
                                                      seconds_limit + LATE_GRACE_SECONDS),
        points=[{"text": p.text, "heard": False} for p in sheet.points],
        followup=random.randrange(len(sheet.followups)) if sheet.followups else None,
    )


def attempt_get(*, request: HttpRequest, uid: uuid.UUID) -> PracticeAttempt | None:
    """The visitor's own attempt with this id, or None (someone else's is never shown)."""
    owner = _owner_filter(request)
    if owner is None:
        return None
    return PracticeAttempt.objects.filter(owner, uid=uid).first()


def attempt_grade(*, request: HttpRequest, attempt: PracticeAttempt, heard: set[int],
                  partly: set[int] = frozenset(),
                  today: datetime.date | None = None) -> PracticeAttempt:
    """Record which points the learner says they made, and which only in part (a point often
    bundles several claims: half credit); a graded attempt on a page whose review is due counts
    as that review."""
    attempt.points = [{"text": p["text"], "heard": i in heard,
                       "partly": i in partly and i not in heard}
                      for i, p in enumerate(attempt.points)]
    first_grade = attempt.graded_at is None
    attempt.graded_at = timezone.now()
    attempt.save(update_fields=["points", "graded_at"])
    if first_grade:
        review_on_attempt(request=request, attempt=attempt, today=today)
    return attempt


def attempts_for(*, request: HttpRequest, problem: int | None = None) -> list[PracticeAttempt]:
    """The visitor's attempts, newest first, for one problem or all."""
    owner = _owner_filter(request)
    if owner is None:
        return []
    rows = PracticeAttempt.objects.filter(owner)
    if problem is not None:
        rows = rows.filter(problem=problem)
    return list(rows.order_by("-created_at"))


@dataclass(frozen=True)
class MissedPoint:
    problem: Problem
    text: str
    missed: int
    asked: int
    covers: "Covers | None" = None  # where the problem's page teaches this point

    @property
    def missed_share(self) -> float:
        return self.missed / self.asked


@dataclass(frozen=True)
class Covers:
    """The part of a problem's page that teaches a point: a section, and its sub-heading."""

    anchor: str  # the section's id on the course page, e.g. problem-1-concepts
    label: str  # "Concepts: What gets quantized"


# The sections that teach (the answer, listens and follow-ups only restate them).
_TEACHING_SECTIONS = (("concepts", "Concepts"), ("worked", "Worked answer"),
                      ("tradeoffs", "Trade-offs"), ("mistakes", "Common mistakes"))
_STOPWORDS = frozenset(
    "that this with from than then when what which where while each every into over under "
    "about more most much many only also just they their them there these those have been "
    "does done doing would could should must will your yours the and for are not but its".split())


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9]+", text.lower())
                     if len(w) >= 4 and w not in _STOPWORDS)


@functools.cache
def _teaching_parts(number: int) -> tuple[tuple[str, str, frozenset[str], int], ...]:
    """Each teaching section of problem `number`, cut at its <h4> sub-headings: (anchor, label,
    its words, its length in words). The prose is the same for every visitor, so it is read once
    per process."""
    from django.contrib.auth.models import AnonymousUser

    problem = PROBLEMS[number]
    if problem.template_name is None:
        return ()
    request = HttpRequest()
    request.user, request.session = AnonymousUser(), {}
    html = render_to_string(problem.template_name, {"problem": problem}, request=request)
    parts = []
    for slug, heading in _TEACHING_SECTIONS:
        anchor = f"{problem.anchor}-{slug}"
        chunks = re.split(r"<h4[^>]*>(.*?)</h4>", _section(html, anchor), flags=re.S)
        # re.split alternates: text before the first h4, then (sub-heading, text) pairs.
        pieces = [(heading, chunks[0])] + [
            (f"{heading}: {_plain(chunks[k])}", chunks[k] + " " + chunks[k + 1])
            for k in range(1, len(chunks) - 1, 2)]
        for label, body in pieces:
            plain = _plain(body)
            if plain:
                parts.append((anchor, label, _words(plain), len(plain.split())))
    return tuple(parts)


def point_covers(*, problem: int, text: str) -> Covers | None:
    """The part of the problem's page that shares the most words with the point (each part's
    count of shared words over the square root of its length, so a long section does not win
    by size alone); None when nothing is shared."""
    words = _words(text)
    best, best_score = None, 0.0
    for anchor, label, part_words, length in _teaching_parts(problem):
        score = len(words & part_words) / math.sqrt(max(length, 1))
        if score > best_score:
            best, best_score = Covers(anchor, label), score
    return best


def points_missed(*, attempts: list[PracticeAttempt], limit: int = 10) -> list[MissedPoint]:
    """The points most often missed across graded attempts, most missed first (ties: the one
    missed on the larger share of its attempts)."""
    counts: dict[tuple[int, str], list[int]] = {}
    for attempt in attempts:
        if attempt.graded_at is None:
            continue
        for point in attempt.points:
            missed_asked = counts.setdefault((attempt.problem, point["text"]), [0, 0])
            missed_asked[1] += 1
            missed_asked[0] += not point["heard"]
    ranked = sorted(((k, v) for k, v in counts.items() if v[0]),
                    key=lambda kv: (-kv[1][0], -kv[1][0] / kv[1][1], kv[0]))
    return [MissedPoint(PROBLEMS[problem], text, missed, asked,
                        point_covers(problem=problem, text=text))
            for (problem, text), (missed, asked) in ranked[:limit]]


# Spaced review --------------------------------------------------------------------------------


def _today() -> datetime.date:
    return timezone.localdate()


def review_on_page_marked(*, request: HttpRequest, page: int, done: bool,
                          today: datetime.date | None = None) -> None:
    """Marking a page done schedules its first review a day later; unmarking drops it."""
    today = today or _today()
    if not done:
        owner = _owner_filter(request)
        if owner is not None:
            PageReview.objects.filter(owner, page=page).delete()
        return
    fields = _owner_fields(request)
    PageReview.objects.get_or_create(
        **fields, page=page,
        defaults={"step": 0, "due_on": today + datetime.timedelta(days=REVIEW_INTERVALS_DAYS[0])})


def review_step_next(*, step: int, share_heard: float) -> int:
    """The ladder rung after a review that heard `share_heard` of the points."""
    if share_heard >= GOOD_SHARE:
        return min(step + 1, len(REVIEW_INTERVALS_DAYS) - 1)
    if share_heard < POOR_SHARE:
        return 0
    return step


def review_on_attempt(*, request: HttpRequest, attempt: PracticeAttempt,
                      today: datetime.date | None = None) -> PageReview | None:
    """If the attempt's page is due for review, the attempt was the review: move the next one
    out (or closer) by how much of the answer was heard."""
    today = today or _today()
    owner = _owner_filter(request)
    if owner is None:
        return None
    page = PROBLEMS[attempt.problem].page
    review = PageReview.objects.filter(owner, page=page, due_on__lte=today).first()
    if review is None:
        return None
    review.step = review_step_next(step=review.step, share_heard=attempt.share_heard)
    review.due_on = today + datetime.timedelta(days=REVIEW_INTERVALS_DAYS[review.step])
    review.last_reviewed_on = today
    review.save(update_fields=["step", "due_on", "last_reviewed_on"])
    if not request.user.is_authenticated:
        # The review just moved up to 60 days past today, which may be later than the attempt
        # that kept the session: keep it 90 days from now, so the review still finds them.
        request.session.set_expiry(VISITOR_KEEP_SECONDS)
    return review


def reviews_due(*, request: HttpRequest, today: datetime.date | None = None) -> list[PageReview]:
    """The visitor's pages due for review today (or overdue), soonest first."""
    today = today or _today()
    owner = _owner_filter(request)
    if owner is None:
        return []
    return list(PageReview.objects.filter(owner, due_on__lte=today).order_by("due_on", "page"))


def reviews_all(*, request: HttpRequest) -> list[PageReview]:
    owner = _owner_filter(request)
    return [] if owner is None else list(PageReview.objects.filter(owner).order_by("due_on"))


def review_problem_pick(*, request: HttpRequest, page: int) -> Problem | None:
    """The page's written problem practised longest ago (never practised first)."""
    candidates = [p for p in page_get(number=page).problems if p.template_name is not None]
    if not candidates:
        return None
    last: dict[int, datetime.datetime] = {}
    for attempt in attempts_for(request=request):
        last.setdefault(attempt.problem, attempt.created_at)
    epoch = datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return min(candidates, key=lambda p: (last.get(p.number, epoch), p.number))


def practice_random_problem(*, request: HttpRequest) -> Problem | None:
    """A problem at random from the pages done (from every written one when none is done)."""
    written = practice_problems()
    done = progress_pages_done(request=request)
    pool = [p for p in written if p.page in done] or written
    return random.choice(pool) if pool else None


# Login ------------------------------------------------------------------------------------------


@transaction.atomic
def practice_merge_visitor(*, request: HttpRequest, user) -> None:  # noqa: ANN001
    """On login: the visitor's attempts and reviews become the account's. Attempts move as they
    are (no copy, so none is lost or doubled); where both hold a review of the same page, the
    sooner one is kept."""
    visitor = _visitor_id(request, create=False)
    if visitor is None:
        return
    request.session.set_expiry(None)  # the account's session follows the site's policy again
    PracticeAttempt.objects.filter(user=None, visitor=visitor).update(user=user, visitor="")
    DrillAttempt.objects.filter(user=None, visitor=visitor).update(user=user, visitor="")
    for review in PageReview.objects.filter(user=None, visitor=visitor):
        mine = PageReview.objects.filter(user=user, page=review.page).first()
        if mine is None:
            review.user, review.visitor = user, ""
            review.save(update_fields=["user", "visitor"])
            continue
        if review.due_on < mine.due_on:
            mine.due_on, mine.step = review.due_on, min(mine.step, review.step)
            mine.save(update_fields=["due_on", "step"])
        review.delete()
    request.session.pop(VISITOR_KEY, None)
    request.session[MERGED_VISITOR_KEY] = visitor
