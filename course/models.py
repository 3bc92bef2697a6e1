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
