"""GET /metrics: every live worker's engine metrics in Prometheus's text format.

Each engine worker publishes its own registry's text to Redis every second
(`course:metrics:<hostname>`, 15 s TTL; worker/engine_metrics.py). This view reads them all,
parses them with prometheus_client, adds a `worker` label naming the source, and writes the
union back out with prometheus_client: one scrape sees the whole fleet, with vLLM's metric
names, and a worker that stopped drops out within 15 s. Sum over `worker` for fleet totals.

Only the client addresses in settings.METRICS_ALLOWED_IPS are answered (127.0.0.1 and ::1 by
default; "*" for any); others get 403. Behind a proxy, list the proxy's address and let the
proxy restrict who scrapes.
"""

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from worker.engine_metrics import METRICS_KEY_PREFIX


class FleetCollector:
    """The union of the workers' published metrics, each sample labelled with its worker."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts

    def collect(self):  # noqa: ANN201 (prometheus_client's collector protocol)
        families: dict[str, Metric] = {}
        for worker, text in sorted(self.texts.items()):
            for family in text_string_to_metric_families(text):
                merged = families.get(family.name)
                if merged is None:
                    merged = families[family.name] = Metric(family.name, family.documentation,
                                                            family.type, family.unit)
                for sample in family.samples:
                    merged.add_sample(sample.name, {**sample.labels, "worker": worker},
                                      sample.value, sample.timestamp, sample.exemplar)
        yield from families.values()


def fleet_metrics_texts(client: redis.Redis) -> dict[str, str]:
    """Each live worker's published text, by hostname."""
    keys = sorted(k.decode() if isinstance(k, bytes) else k
                  for k in client.scan_iter(match=f"{METRICS_KEY_PREFIX}*", count=100))
    if not keys:
        return {}
    values = client.mget(keys)
    return {key.removeprefix(METRICS_KEY_PREFIX): value.decode()
            for key, value in zip(keys, values, strict=True) if value is not None}


def _allowed(request: HttpRequest) -> bool:
    from demos.services import client_address_for_request

    # The client as the limits see it: behind a proxy on the same host, REMOTE_ADDR is always
    # 127.0.0.1, which made /metrics public.
    allowed = settings.METRICS_ALLOWED_IPS
    return "*" in allowed or (client_address_for_request(request) or "") in allowed


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return HttpResponse("forbidden: this address may not read /metrics\n", status=403,
                            content_type="text/plain")
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        texts = fleet_metrics_texts(client)
    except (redis.RedisError, OSError) as exc:
        return HttpResponse(f"redis unavailable: {exc.__class__.__name__}\n", status=503,
                            content_type="text/plain")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(texts))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
