import uuid

from django.conf import settings
from django.db import models


class PageProgress(models.Model):
    """One page an account has marked done. Anonymous visitors keep theirs in the session."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="page_progress")
    page = models.PositiveSmallIntegerField()
    done_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "page"], name="unique_page_progress_per_user"),
        ]
        ordering = ["page"]

    def __str__(self) -> str:
        return f"{self.user} done page {self.page:02d}"


class ApiKey(models.Model):
    """A learner's key for the OpenAI-compatible API at /v1. Only a SHA-256 of the key is
    stored; the key itself is shown once, when it is made."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_keys")
    name = models.CharField(max_length=60)
    prefix = models.CharField(max_length=16)  # the key's first characters, to tell keys apart
    key_hash = models.CharField(max_length=64, unique=True)  # hex SHA-256 of the whole key
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} key {self.prefix}… ({self.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


def _one_owner(name: str) -> models.CheckConstraint:
    # An account, or an anonymous visitor's id from the session: exactly one of the two.
    return models.CheckConstraint(
        condition=(models.Q(user__isnull=False, visitor="")
                   | models.Q(user__isnull=True) & ~models.Q(visitor="")),
        name=name)


class PracticeAttempt(models.Model):
    """One mock interview: the answer typed against the clock, and which of the problem's
    "listens for" points the learner ticked as made. Owned by an account or, before login, by
    the visitor id in the session (moved to the account on login)."""

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True,
                             blank=True, related_name="practice_attempts")
    visitor = models.CharField(max_length=32, blank=True, db_index=True)
    problem = models.PositiveSmallIntegerField()
    answer = models.TextField(blank=True)
    seconds_limit = models.PositiveIntegerField()
    seconds_used = models.PositiveIntegerField()
    # [{"text": the point in plain text, "heard": bool, "partly": bool (made in part; absent in
    # attempts graded before partial credit)}], in the page's order, as it was asked.
    points = models.JSONField(default=list)
    followup = models.PositiveSmallIntegerField(null=True, blank=True)  # index of the one drawn
    # The interview's own id, from its signed clock: the browser drops its draft only when the
    # attempt it sees is that interview's, and a second post of the same answer is not saved twice.
    nonce = models.CharField(max_length=32, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    graded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [_one_owner("practice_attempt_one_owner")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"attempt on problem {self.problem} ({self.heard_count}/{len(self.points)})"

    @property
    def heard_count(self) -> int:
        return sum(1 for p in self.points if p.get("heard"))

    @property
    def partly_count(self) -> int:
        return sum(1 for p in self.points if p.get("partly") and not p.get("heard"))

    @property
    def share_heard(self) -> float:
        """The share of the points made, a point made only in part counting half."""
        credit = self.heard_count + 0.5 * self.partly_count
        return credit / len(self.points) if self.points else 0.0


class PageReview(models.Model):
    """When a page done is next due for review, and on which rung of the interval ladder."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True,
                             blank=True, related_name="page_reviews")
    visitor = models.CharField(max_length=32, blank=True, db_index=True)
    page = models.PositiveSmallIntegerField()
    step = models.PositiveSmallIntegerField(default=0)
    due_on = models.DateField()
    last_reviewed_on = models.DateField(null=True, blank=True)

    class Meta:
        constraints = [
            _one_owner("page_review_one_owner"),
            models.UniqueConstraint(fields=["user", "page"], condition=models.Q(visitor=""),
                                    name="unique_page_review_per_user"),
            models.UniqueConstraint(fields=["visitor", "page"],
                                    condition=models.Q(user__isnull=True),
                                    name="unique_page_review_per_visitor"),
        ]
        ordering = ["due_on", "page"]

    def __str__(self) -> str:
        return f"review of page {self.page:02d} due {self.due_on}"


class DrillAttempt(models.Model):
    """One drill answered: the question (its kind and seed, so it can be drawn again), the
    answer typed, and how it was graded. Owned like practice attempts: an account, or before
    login the visitor id in the session (moved to the account on login)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True,
                             blank=True, related_name="drill_attempts")
    visitor = models.CharField(max_length=32, blank=True, db_index=True)
    kind = models.CharField(max_length=40)
    topic = models.CharField(max_length=40)
    seed = models.PositiveIntegerField()
    answer = models.CharField(max_length=80)
    # "right" (within 10%), "close" (within 2×), "wrong", or "late" (past a round's clock).
    verdict = models.CharField(max_length=8)
    mistake = models.CharField(max_length=120, blank=True)
    round = models.CharField(max_length=32, blank=True, db_index=True)
    seconds_used = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [_one_owner("drill_attempt_one_owner")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"drill {self.kind}:{self.seed} {self.verdict}"
