"""The site's own system checks (`manage.py check`, `check --deploy`)."""

from django.conf import settings
from django.core.checks import Error, Tags, register


@register(Tags.security, deploy=True)
def proxy_count_check(app_configs, **kwargs) -> list:  # noqa: ANN001
    """course.E001: the settings trust a header only a proxy sets (SECURE_PROXY_SSL_HEADER)
    but count no proxies (TRUSTED_PROXY_COUNT 0), so every client is the proxy's address:
    one password burst locks everyone out, per-address limits become site-wide, and /metrics
    answers everyone when the proxy shares the host."""
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None) and \
            int(getattr(settings, "TRUSTED_PROXY_COUNT", 0)) <= 0:
        return [Error(
            "SECURE_PROXY_SSL_HEADER trusts a proxy, but TRUSTED_PROXY_COUNT is 0: every "
            "client would be counted as the proxy's one address.",
            hint="Set TRUSTED_PROXY_COUNT to the number of proxies that append to "
            "X-Forwarded-For (1 behind one proxy).", id="course.E001")]
    return []
