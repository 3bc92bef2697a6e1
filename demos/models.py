"""A run: one press of a demo's "Run" button, from the queue to its end."""

import uuid

from django.db import models


class Run(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE_STATES = (State.QUEUED, State.RUNNING)
    TERMINAL_STATES = (State.FINISHED, State.FAILED, State.CANCELLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    demo = models.SlugField(max_length=40)
    params = models.JSONField(default=dict)
    # "user:<pk>" for accounts, "session:<key>" for anonymous visitors.
    owner = models.CharField(max_length=80, db_index=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED,
                             db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "state"], name="demos_run_owner_state")]

    def __str__(self) -> str:
        return f"{self.demo} run {self.id} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES
