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
    # Where an anonymous visitor's request came from: runs are limited per address too, since
    # dropping cookies makes a new visitor every time.
    client_addr = models.GenericIPAddressField(null=True, blank=True)
    # The tokens this run asks the engine for (prompt + max_tokens, per stream): the queue is
    # capped by work, not only by the number of runs.
    work_tokens = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "state"], name="demos_run_owner_state"),
                   models.Index(fields=["state", "created_at"], name="demos_run_state_created")]
        constraints = [
            # One active run per owner, held by the database: a check in Python alone let
            # parallel requests from one session start several.
            models.UniqueConstraint(fields=["owner"],
                                    condition=models.Q(state__in=["queued", "running"]),
                                    name="demos_run_one_active_per_owner"),
        ]

    def __str__(self) -> str:
        return f"{self.demo} run {self.id} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES
