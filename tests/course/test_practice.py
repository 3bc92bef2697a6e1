"""Practice: mock interviews (start, submit, grade, history), what the page's sections give
them, ownership, merging on login, and spaced reviews across simulated days."""

import datetime
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory

from course import practice
from course.models import PageReview, PracticeAttempt
from problems.registry import PROBLEMS, Problem

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

PASSWORD = "a-long-Passphrase-42"


def _started(client: Client, number: int, minutes: int | None = None) -> str:
    url = f"/practice/{number}/" + (f"?minutes={minutes}" if minutes else "")
    html = client.get(url).content.decode()
    return re.search(r'name="started" value="([^"]+)"', html).group(1)


def _submit(client: Client, number: int, answer: str = "My answer.") -> PracticeAttempt:
    response = client.post(f"/practice/{number}/",
                           {"answer": answer, "started": _started(client, number)})
    assert response.status_code == 302, response.content.decode()[:400]
    uid = response["Location"].rstrip("/").rsplit("/", 1)[-1]
    return PracticeAttempt.objects.get(uid=uid)


def _sheet(number: int) -> practice.PracticeSheet:
    request = RequestFactory().get("/")
    from django.contrib.auth.models import AnonymousUser
    request.user = AnonymousUser()
    request.session = {}
    return practice.practice_sheet(problem=PROBLEMS[number], request=request)


def test_the_sheet_is_cut_from_the_problems_page():
    sheet = _sheet(1)
    assert sheet.question == practice.QUESTIONS[1]
    assert "API server" in sheet.answer
    # Every "listens for" point of problem 1, in order, and no heading leaks in.
    assert len(sheet.points) == 10
    assert sheet.points[1].text.startswith("A queue exists")
    assert "<h3>" not in sheet.answer
    assert len(sheet.followups) >= 4
    first = sheet.followups[0]
    assert "wall-clock time" in first.question
    assert "decode loop" in first.hint and "<summary>" not in first.hint


def test_every_written_problem_can_be_practised():
    written = practice.practice_problems()
    assert written, "some problem is written"
    for problem in written:
        sheet = _sheet(problem.number)
        assert sheet is not None, problem.number
        assert sheet.points and sheet.followups, problem.number
    assert set(practice.QUESTIONS) == set(PROBLEMS)


def test_an_unwritten_problem_is_404_and_listed_as_being_written(client, monkeypatch):
    # Every problem is written now: take problem 25's page away for this test.
    written = Problem.template_name.fget
    monkeypatch.setattr(Problem, "template_name",
                        property(lambda p: None if p.number == 25 else written(p)))
    assert client.get("/practice/25/").status_code == 404
    assert client.get("/practice/99/").status_code == 404
    html = client.get("/practice/").content.decode()
    assert "being written" in html


def test_interview_page_shows_question_clock_and_answer_box(client):
    html = client.get("/practice/1/?minutes=7").content.decode()
    assert practice.QUESTIONS[1].split(".")[0][:40] in html.replace("&#x27;", "'")
    assert 'data-seconds="420"' in html
    assert 'name="answer"' in html
    # The model answer is not on the interview page.
    assert "authenticates it" not in html


@pytest.mark.parametrize("minutes", ["0", "61", "five", "-3"])
def test_bad_minutes_get_an_error_beside_the_field(client, minutes):
    response = client.get(f"/practice/1/?minutes={minutes}")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="id_minutes_error"' in html
    assert f'data-seconds="{practice.MINUTES_DEFAULT * 60}"' in html


def test_submit_saves_the_attempt_and_shows_both_answers(client):
    attempt = _submit(client, 1, "First the tokenizer, then the queue.")
    assert attempt.problem == 1 and attempt.user is None and attempt.visitor
    assert attempt.seconds_limit == 300 and 0 <= attempt.seconds_used <= 300
    assert len(attempt.points) == 10 and attempt.graded_at is None
    html = client.get(f"/practice/attempts/{attempt.uid}/").content.decode()
    assert "First the tokenizer, then the queue." in html
    assert "authenticates it" in html  # the model answer beside it
    assert html.count('name="heard"') == 10
    assert "<details><summary>Hint</summary>" in html  # the follow-up's hint, hidden


def test_a_lost_clock_keeps_the_answer_and_asks_again(client):
    response = client.post("/practice/1/", {"answer": "kept words", "started": "forged"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "kept words" in html and 'id="id_started_error"' in html
    assert PracticeAttempt.objects.count() == 0
    # Another problem's clock does not count for this one.
    response = client.post("/practice/1/", {"answer": "x", "started": _started(client, 2)})
    assert response.status_code == 400


def test_an_answer_too_long_is_kept_and_refused(client):
    text = "a" * (practice.ANSWER_MAX_CHARS + 1)
    response = client.post("/practice/1/", {"answer": text, "started": _started(client, 1)})
    assert response.status_code == 400
    assert 'id="id_answer_error"' in response.content.decode()
    assert text in response.content.decode()


def test_grading_saves_the_points_and_the_history_shows_them(client):
    attempt = _submit(client, 1)
    response = client.post(f"/practice/attempts/{attempt.uid}/", {"heard": ["0", "2", "3"]})
    assert response.status_code == 302
    attempt.refresh_from_db()
    assert attempt.heard_count == 3 and attempt.graded_at is not None
    assert [p["heard"] for p in attempt.points][:4] == [True, False, True, True]
    html = client.get("/practice/1/history/").content.decode()
    assert "3 of 10" in html
    assert "Points heard in each attempt" in html  # the plot and its table
    # The most-missed list names a missed point and links to where the page covers it.
    assert attempt.points[1]["text"][:30] in html
    covers = practice.point_covers(problem=1, text=attempt.points[1]["text"])
    assert f'href="/pages/01/#{covers.anchor}"' in html
    assert f"read {covers.label} again" in html


def test_a_missed_point_links_to_the_part_of_the_page_that_teaches_it():
    sheet = _sheet(11)
    by_start = {p.text.split()[0]: p.text for p in sheet.points}
    outliers = practice.point_covers(problem=11, text=by_start["Outliers"])
    assert outliers.anchor == "problem-11-concepts"
    assert outliers.label == "Concepts: Outliers, and why calibration exists"
    hardware = practice.point_covers(problem=11, text=by_start["Hardware"])
    assert hardware.label == "Concepts: Which hardware computes in which format"
    preemption = practice.point_covers(
        problem=1, text="Preemption re-does work by recomputation, and prefix caching makes "
                        "that recompute cheap.")
    assert preemption.label == "Concepts: When memory runs out: preemption"
    assert practice.point_covers(problem=1, text="zzzz qqqq") is None


@pytest.mark.parametrize("heard", [["x"], ["10"], ["-1"]])
def test_bad_ticks_are_400_and_save_nothing(client, heard):
    attempt = _submit(client, 1)
    response = client.post(f"/practice/attempts/{attempt.uid}/", {"heard": heard})
    assert response.status_code == 400
    attempt.refresh_from_db()
    assert attempt.graded_at is None


def test_points_missed_ranks_across_attempts(client):
    for heard in (["0"], ["0", "1"], ["0", "1", "2"]):
        attempt = _submit(client, 1)
        client.post(f"/practice/attempts/{attempt.uid}/", {"heard": heard})
    request = RequestFactory().get("/")
    attempts = list(PracticeAttempt.objects.all())
    missed = practice.points_missed(attempts=attempts)
    texts = [p["text"] for p in attempts[0].points]
    # Point 0 never missed; points 3..9 missed three times; point 2 twice; point 1 once.
    assert texts[0] not in [m.text for m in missed]
    assert missed[0].missed == 3 and missed[0].asked == 3
    by_text = {m.text: m for m in practice.points_missed(attempts=attempts, limit=50)}
    assert by_text[texts[1]].missed == 1 and by_text[texts[2]].missed == 2
    assert request  # (the selector needs no request)


def test_someone_elses_attempt_is_404(client):
    attempt = _submit(client, 1)
    other = Client()
    assert other.get(f"/practice/attempts/{attempt.uid}/").status_code == 404
    assert other.post(f"/practice/attempts/{attempt.uid}/", {"heard": ["0"]}).status_code == 404


def test_login_moves_attempts_to_the_account_without_loss_or_duplicates(client):
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    mine = _submit(client, 1)  # anonymous
    client.post("/pages/01/progress", {"done": "1"})  # schedules a review as a visitor
    client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    mine.refresh_from_db()
    assert mine.user == user and mine.visitor == ""
    assert PracticeAttempt.objects.count() == 1
    assert PageReview.objects.get().user == user
    # Logging in again (another session, nothing new) duplicates nothing.
    other = Client()
    other.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert PracticeAttempt.objects.count() == 1
    html = other.get("/practice/1/history/").content.decode()
    assert str(mine.uid) in html


def test_login_keeps_the_sooner_of_two_reviews_of_a_page(client):
    user = get_user_model().objects.create_user("lin", password=PASSWORD)
    today = datetime.date(2026, 12, 3)
    PageReview.objects.create(user=user, page=1, step=3, due_on=today + datetime.timedelta(21))
    client.post("/pages/01/progress", {"done": "1"})  # visitor's review: due in a day
    client.post("/accounts/login/", {"username": "lin", "password": PASSWORD})
    review = PageReview.objects.get()
    assert review.user == user and review.step == 0
    assert review.due_on < today + datetime.timedelta(21)


def _request_for(client: Client):
    """A request carrying this client's session and user, for calling services directly."""
    from django.contrib.auth import get_user
    from django.contrib.sessions.backends.db import SessionStore
    request = RequestFactory().get("/")
    request.session = SessionStore(client.session.session_key)
    request.user = get_user(request)
    return request


def test_reviews_follow_the_ladder_across_simulated_days(client):
    day0 = datetime.date(2026, 12, 3)
    client.post("/pages/01/progress", {"done": "1"})
    request = _request_for(client)
    review = PageReview.objects.get()
    review.due_on = day0 + datetime.timedelta(1)
    review.save()
    assert practice.reviews_due(request=request, today=day0) == []
    day1 = day0 + datetime.timedelta(1)
    assert [r.page for r in practice.reviews_due(request=request, today=day1)] == [1]

    def answer(day: datetime.date, heard: int) -> PageReview:
        attempt = _submit(client, 1)
        practice.attempt_grade(request=_request_for(client), attempt=attempt,
                               heard=set(range(heard)), today=day)
        return PageReview.objects.get()

    # Well answered (8 of 10): one rung up, due 3 days later.
    r = answer(day1, 8)
    assert r.step == 1 and r.due_on == day1 + datetime.timedelta(3)
    # Practising before it is due does not move it.
    r = answer(day1 + datetime.timedelta(1), 10)
    assert r.step == 1 and r.due_on == day1 + datetime.timedelta(3)
    day4 = day1 + datetime.timedelta(3)
    r = answer(day4, 9)
    assert r.step == 2 and r.due_on == day4 + datetime.timedelta(7)
    # Middling (5 of 10): same rung again.
    day11 = day4 + datetime.timedelta(7)
    r = answer(day11, 5)
    assert r.step == 2 and r.due_on == day11 + datetime.timedelta(7)
    # Poor (2 of 10): back to a day.
    day18 = day11 + datetime.timedelta(7)
    r = answer(day18, 2)
    assert r.step == 0 and r.due_on == day18 + datetime.timedelta(1)


def test_review_ladder_rules():
    assert practice.review_step_next(step=0, share_heard=0.75) == 1
    assert practice.review_step_next(step=4, share_heard=1.0) == 4  # the top rung stays
    assert practice.review_step_next(step=3, share_heard=0.5) == 3
    assert practice.review_step_next(step=3, share_heard=0.39) == 0


def test_unmarking_a_page_drops_its_review(client):
    client.post("/pages/01/progress", {"done": "1"})
    assert PageReview.objects.count() == 1
    client.post("/pages/01/progress", {"done": "0"})
    assert PageReview.objects.count() == 0


def test_home_shows_reviews_due_and_the_review_link_starts_one(client):
    client.post("/pages/01/progress", {"done": "1"})
    assert "Due for review today: nothing" in client.get("/").content.decode()
    PageReview.objects.update(due_on=datetime.date(2000, 1, 1))
    html = client.get("/").content.decode()
    assert "Due for review today:" in html and "/practice/review/1/" in html
    response = client.get("/practice/review/1/")
    assert response.status_code == 302
    assert re.fullmatch(r"/practice/[12]/\?review=1", response["Location"])
    assert client.get("/practice/review/11/").status_code == 404


def test_random_draws_from_the_pages_done(client):
    client.post("/pages/01/progress", {"done": "1"})
    for _ in range(5):
        location = client.get("/practice/random/")["Location"]
        assert location in ("/practice/1/", "/practice/2/")


def test_each_written_problem_links_to_its_mock_interview(client):
    html = client.get("/pages/01/").content.decode()
    assert 'href="/practice/1/"' in html and 'href="/practice/2/"' in html


# Review fixes ---------------------------------------------------------------------------------


def _data(html: str, name: str) -> str | None:
    m = re.search(rf'data-{name}="([^"]*)"', html)
    return m.group(1) if m else None


def test_the_same_interview_posted_twice_saves_one_attempt(client):
    # A double click, or the clock firing as the button is pressed, posts the same interview.
    started = _started(client, 1)
    first = client.post("/practice/1/", {"answer": "Once.", "started": started})
    second = client.post("/practice/1/", {"answer": "Once.", "started": started})
    assert first.status_code == second.status_code == 302
    assert first["Location"] == second["Location"]
    assert PracticeAttempt.objects.count() == 1
    # Edited after going back: that is a different answer, and it is kept too.
    client.post("/practice/1/", {"answer": "Once, and more.", "started": started})
    assert PracticeAttempt.objects.count() == 2


def test_the_attempt_page_names_its_interview_so_only_that_draft_is_dropped(client):
    html = client.get("/practice/1/").content.decode()
    nonce = _data(html, "nonce")
    started = re.search(r'name="started" value="([^"]+)"', html).group(1)
    response = client.post("/practice/1/", {"answer": "A.", "started": started})
    attempt_html = client.get(response["Location"]).content.decode()
    assert nonce and re.fullmatch(r"[0-9a-f]{32}", nonce)
    assert _data(attempt_html, "nonce") == nonce
    assert _data(attempt_html, "owner") == _data(html, "owner")
    assert PracticeAttempt.objects.get().nonce == nonce


def test_crlf_counts_as_one_character_and_nul_is_dropped(client):
    # The browser's maxlength counts a line end as one character, but posts it as two: an
    # answer at the limit with line ends must not be refused (the clock would resubmit it).
    text = ("x" * 99 + "\r\n") * (practice.ANSWER_MAX_CHARS // 100)
    attempt = _submit(client, 1, answer=text)
    assert len(attempt.answer) == practice.ANSWER_MAX_CHARS
    assert "\r" not in attempt.answer
    # PostgreSQL text cannot hold NUL: it is dropped rather than failing with a 500.
    attempt = _submit(client, 1, answer="before\x00after")
    assert attempt.answer == "beforeafter"


def test_a_failed_submission_is_marked_so_the_clock_does_not_resend_it(client):
    text = "a" * (practice.ANSWER_MAX_CHARS + 1)
    html = client.post("/practice/1/", {"answer": text, "started": _started(client, 1)}
                       ).content.decode()
    assert "data-submit-failed" in html
    assert "data-submit-failed" not in client.get("/practice/1/").content.decode()


def test_start_again_restarts_the_clock_even_with_the_same_minutes(client):
    html = client.get("/practice/1/").content.decode()
    assert "data-clock-reset" not in html
    assert 'name="restart" value="1"' in html  # the "Start again" form asks for a new clock
    assert "data-clock-reset" in client.get("/practice/1/?minutes=5&restart=1").content.decode()


def test_drafts_are_kept_under_their_owners_tag(client):
    get_user_model().objects.create_user("ada", password=PASSWORD)
    get_user_model().objects.create_user("bob", password=PASSWORD)
    visitor_html = client.get("/practice/1/").content.decode()
    visitor_tag = _data(visitor_html, "owner")
    assert visitor_tag and _data(visitor_html, "owner-merged") is None
    # Another browser is another visitor, with another tag; the tag is stable across pages.
    assert _data(Client().get("/practice/1/").content.decode(), "owner") != visitor_tag
    assert _data(client.get("/practice/2/").content.decode(), "owner") == visitor_tag
    # After login the account has its own tag, and the visitor's drafts are the account's.
    client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    ada_html = client.get("/practice/1/").content.decode()
    ada_tag = _data(ada_html, "owner")
    assert ada_tag != visitor_tag and _data(ada_html, "owner-merged") == visitor_tag
    # Ada logs out and Bob logs in on the same browser: none of Ada's drafts is his.
    client.post("/accounts/logout/")
    client.post("/accounts/login/", {"username": "bob", "password": PASSWORD})
    bob_html = client.get("/practice/1/").content.decode()
    assert _data(bob_html, "owner") not in (ada_tag, visitor_tag)
    assert _data(bob_html, "owner-merged") not in (ada_tag, visitor_tag)


def test_an_anonymous_visitors_practice_outlives_the_default_session(client):
    # Django's sessions last two weeks; the review ladder reaches 60 days. A visitor who
    # practises keeps their session (attempts, reviews, pages done) for 90 days after.
    _submit(client, 1)
    assert client.session.get_expiry_age() == practice.VISITOR_KEEP_SECONDS
    assert practice.VISITOR_KEEP_SECONDS > practice.REVIEW_INTERVALS_DAYS[-1] * 24 * 3600
    client.post("/pages/01/progress", {"done": "1"})
    assert client.session.get_expiry_age() == practice.VISITOR_KEEP_SECONDS
    # Once logged in, the session follows the site's policy again.
    get_user_model().objects.create_user("ada", password=PASSWORD)
    client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    from django.conf import settings
    assert client.session.get_expiry_age() == settings.SESSION_COOKIE_AGE


def test_an_anonymous_review_graded_late_renews_the_session(client):
    # The attempt kept the session 90 days; grading it as a review weeks later moves the next
    # review up to 60 days past the grading day, so the grading must renew the session too.
    from django.contrib.sessions.models import Session
    from django.utils import timezone
    client.post("/pages/01/progress", {"done": "1"})
    PageReview.objects.update(due_on=datetime.date(2000, 1, 1), step=4)  # due, top rung
    attempt = _submit(client, 1)
    key = client.session.session_key
    soon = timezone.now() + datetime.timedelta(days=10)  # as if 80 of the 90 days had gone
    Session.objects.filter(session_key=key).update(expire_date=soon)
    heard = [str(i) for i in range(len(attempt.points))]
    response = client.post(f"/practice/attempts/{attempt.uid}/", {"heard": heard})
    assert response.status_code == 302
    review = PageReview.objects.get()
    assert review.due_on > timezone.localdate() + datetime.timedelta(days=10)
    expire = Session.objects.get(session_key=key).expire_date
    assert expire > timezone.now() + datetime.timedelta(days=89)


def test_the_clock_counts_from_the_first_keystroke_not_the_page_load(client, monkeypatch):
    """The page says how long the question was read before the clock started (reading_s);
    the server takes it off its own count, never more than had passed: loaded at t, submitted
    at t + 200 s after 80 s of reading → 120 s used; a claimed 500 s of reading → 0 s, not
    negative; garbage → the whole 200 s."""
    import time as time_module

    started = _started(client, 1)
    now = time_module.time()
    monkeypatch.setattr("course.practice_views.time.time", lambda: now + 200)
    used = []
    for reading in ("80", "500", "soon", "nan"):
        response = client.post("/practice/1/", {"answer": f"Read {reading}.", "started": started,
                                                "reading_s": reading})
        assert response.status_code == 302
        uid = response["Location"].rstrip("/").rsplit("/", 1)[-1]
        used.append(PracticeAttempt.objects.get(uid=uid).seconds_used)
    assert used[0] in (119, 120, 121)
    assert used[1] == 0
    assert used[2] in (199, 200, 201) and used[3] in (199, 200, 201)


def test_a_point_made_in_part_counts_half(client):
    """Ten points; two made and one in part: 2.5 of 10 = 25% heard, shown as "2 of 10, 1 in
    part". A box ticked both ways counts as made."""
    attempt = _submit(client, 1)
    html = client.get(f"/practice/attempts/{attempt.uid}/").content.decode()
    assert html.count('name="partly"') == 10
    # The follow-up is asked before the grading form, which leads away to the history.
    assert html.index('class="followup"') < html.index('class="points-checklist"')
    client.post(f"/practice/attempts/{attempt.uid}/",
                {"heard": ["0", "1"], "partly": ["2", "1"]})
    attempt.refresh_from_db()
    assert attempt.heard_count == 2 and attempt.partly_count == 1
    assert attempt.share_heard == pytest.approx(0.25)
    assert [p["partly"] for p in attempt.points][:3] == [False, False, True]
    history = client.get("/practice/1/history/").content.decode()
    assert "2 of 10, 1 in part" in history
    response = client.post(f"/practice/attempts/{attempt.uid}/", {"partly": ["10"]})
    assert response.status_code == 400
