"""A per-process cache of rendered HTML fragments that depend only on their inputs.

What the calculators render is deterministic: the same calculator, prefix and inputs always
give the same steps, plot and form, so the default views every visitor sees (and any inputs
asked for again) are rendered once per process, not once per request. Keys are built by the
caller from everything the fragment depends on (slug, prefix, normalized query, ...); nothing
here knows any formula. Bounded by bytes (least recently used goes first); a restart or a
deploy empties it, which is when the arithmetic or the templates can change.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping

from django.conf import settings

KEY_CHARS_MAX = 4000  # inputs longer than this are not worth remembering (nor safe to keep)


class FragmentCache:
    def __init__(self, *, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, str] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_render(self, key: Hashable, render: Callable[[], str]) -> str:
        """The fragment cached under `key`, or `render()`'s, remembered for next time."""
        with self._lock:
            html = self._entries.get(key)
            if html is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return html
            self.misses += 1
        html = render()
        size = len(html)
        if size * 4 > self.max_bytes:  # one fragment must not push out everything else
            return html
        with self._lock:
            if key not in self._entries:
                self._entries[key] = html
                self.bytes += size
                while self.bytes > self.max_bytes:
                    _, dropped = self._entries.popitem(last=False)
                    self.bytes -= len(dropped)
        return html

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = self.hits = self.misses = 0


fragments = FragmentCache(max_bytes=int(getattr(settings, "RENDER_CACHE_BYTES", 32 * 2**20)))


def query_key(query: Mapping | None, *, prefix: str) -> tuple | None:
    """The query's items that belong to fields prefixed `prefix-` (a calculator's own), sorted,
    as a hashable key; None when they are too long to be worth caching."""
    if not query:
        return ()
    lists = query.lists() if hasattr(query, "lists") else ((k, [v]) for k, v in query.items())
    items = tuple(sorted((k, tuple(str(v) for v in values)) for k, values in lists
                         if k.startswith(f"{prefix}-")))
    if sum(len(k) + sum(len(v) for v in values) for k, values in items) > KEY_CHARS_MAX:
        return None
    return items


def render_cached(key: tuple | None, render: Callable[[], str]) -> str:
    """`render()` through the fragment cache when `key` is not None (and caching is on)."""
    if key is None or not getattr(settings, "RENDER_CACHE", True):
        return render()
    return fragments.get_or_render(key, render)


class ValueCache:
    """Like FragmentCache, for computed values (a problem's worked figures) rather than HTML:
    bounded by entries, least recently used first out. The values must not be changed by
    whoever reads them (templates only read)."""

    def __init__(self, *, max_entries: int) -> None:
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compute(self, key: Hashable, compute: Callable[[], object]) -> object:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
            self.misses += 1
        value = compute()
        with self._lock:
            self._entries.setdefault(key, value)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


# Each problem's worked figures by its query (every content module reads request.GET only):
# page 01's two problems computed 14 calculators' steps and plots on every view, about 80% of
# the page's render.
contexts = ValueCache(max_entries=int(getattr(settings, "RENDER_CACHE_CONTEXTS", 512)))


def whole_query_key(query: Mapping | None) -> tuple | None:
    """Every item of the query, sorted, as a hashable key; None when too long to keep."""
    if not query:
        return ()
    lists = query.lists() if hasattr(query, "lists") else ((k, [v]) for k, v in query.items())
    items = tuple(sorted((k, tuple(str(v) for v in values)) for k, values in lists))
    if sum(len(k) + sum(len(v) for v in values) for k, values in items) > KEY_CHARS_MAX:
        return None
    return items
