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
