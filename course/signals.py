from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from course.practice import practice_merge_visitor
from course.progress import progress_merge_session


@receiver(user_logged_in)
def merge_progress_on_login(sender, request, user, **kwargs) -> None:
    # Django's login() keeps the session's data (it cycles the key, not the contents).
    if request is not None:
        progress_merge_session(request=request, user=user)
        practice_merge_visitor(request=request, user=user)
