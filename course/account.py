"""/account/: a signed-in learner's API keys for /v1 (make one, see it once, revoke it)."""

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from course.api_keys import TooManyKeys, api_key_create, api_key_revoke, api_keys_for
from course.forms import DescribedErrorsMixin
from course.openai_api import model_id
from problems.arithmetic.wording import count_phrase


class ApiKeyForm(DescribedErrorsMixin, forms.Form):
    name = forms.CharField(label="Key name", max_length=60, help_text="To tell your keys apart, "
                           "such as the laptop or script that uses it.",
                           error_messages={"required": "Give the key a name."})


@login_required
@require_http_methods(["GET", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    form = ApiKeyForm(request.POST or None)
    new_key = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                _, new_key = api_key_create(user=request.user, name=form.cleaned_data["name"])
                form = ApiKeyForm()
            except TooManyKeys as exc:
                form.add_error("name", str(exc))
                status = 400
        else:
            status = 400
    # The new key is in this response only: it is never stored, so never shown again.
    response = render(request, "course/account.html", {
        "form": form, "new_key": new_key, "keys": api_keys_for(user=request.user),
        "model_id": model_id(), "base_url": request.build_absolute_uri("/v1"),
        "requests_per_minute": settings.API_KEY_REQUESTS_PER_MINUTE,
        "tokens_per_minute": settings.API_KEY_TOKENS_PER_MINUTE,
        "concurrent": count_phrase(settings.API_CONCURRENT_PER_USER, "request"),
        "keys_max": count_phrase(settings.API_KEYS_PER_USER, "key"),
    }, status=status)
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def account_key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    api_key_revoke(user=request.user, key_id=key_id)
    return redirect("course:account")
