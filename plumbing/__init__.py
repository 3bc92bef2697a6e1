"""Plumbing that the web (course/), the demos (demos/) and the workers (worker/) share: a run's
event stream and control keys in Redis, the Redis handle, a run's heartbeat, and where a
worker's measurements are kept.

It sits below all three and imports none of them, so imports go one way only: course and
demos above, worker below them, this below everything (tests/test_import_direction.py holds
it to that).
"""
