"""A run's events in Redis: moved to plumbing/events.py, below the web, the demos and the
workers alike; the demos' modules keep importing it by this name."""

from plumbing.events import (
    STREAM_END_TYPES,
    TERMINAL_TYPES,
    XREAD_BLOCK_MS,
    Event,
    cancel_key,
    cancel_request,
    cancel_targets,
    event_publish,
    events_key,
    events_read,
    heartbeat_alive,
    heartbeat_beat,
    heartbeat_key,
    redis_client,
)

__all__ = ["STREAM_END_TYPES", "TERMINAL_TYPES", "XREAD_BLOCK_MS", "Event", "cancel_key",
           "cancel_request", "cancel_targets", "event_publish", "events_key", "events_read",
           "heartbeat_alive", "heartbeat_beat", "heartbeat_key", "redis_client"]
