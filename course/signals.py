from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from course.practice import practice_merge_visitor
from course.progress import progress_merge_session


@receiver(user_logged_in)
def merge_progress_on_login(sender, request, user, **kwargs) -> None:
    # Django's login() keeps the session's data (it cycles the key, not the contents).
    if request is not None:
        progress_merge_session(request=request, user=user)
        practice_merge_visitor(request=request, user=user)


@receiver(user_login_failed)
def count_failed_login_per_address(sender, credentials, request=None, **kwargs) -> None:
    """Every failed login counts against its address (course.views.login_view refuses an
    address past LOGIN_ADDRESS_FAILURE_LIMIT within the cool-off, whatever the usernames)."""
    from django.conf import settings

    from course.throttle import address_of, window_take

    if request is None:
        return
    try:
        window_take(scope=f"loginfail:{address_of(request)}",
                    limit=settings.LOGIN_ADDRESS_FAILURE_LIMIT,
                    window_s=settings.AXES_COOLOFF_TIME.total_seconds())
    except Exception:  # Redis away: the address-and-username lock (axes) still holds
        import logging

        logging.getLogger(__name__).warning("could not count a failed login", exc_info=True)
