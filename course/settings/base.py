"""Settings shared by every environment. Safe defaults: nothing secret is needed to run tests.

Environment variables that switch on the parts used at scale:
- DATABASE_URL: PostgreSQL (postgres://user:pass@host:5432/name); SQLite under var/ otherwise.
- REDIS_URL: the broker and the pub/sub bus for run events.
- ENGINE_MODEL: a local Hugging Face directory the workers load instead of the demo model.
- CELERY_QUEUE: Celery's default queue (small tasks such as worker.describe).
- ENGINE_QUEUE, EXPERIMENT_QUEUE: the queues of the shared-engine workers (demo runs, /v1) and
  of the experiment workers (engines of their own).
"""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("COURSE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only-key-not-for-production-8f3k2j4h5g6f7d8s9a0")
DEBUG = False
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",
    "axes",
    "course",
    "problems",
    "demos",
]

MIDDLEWARE = [
    # Outermost: whatever Django answers under /v1 in HTML becomes an OpenAI-style JSON error.
    "course.middleware.v1_json_errors",
    "django.middleware.security.SecurityMiddleware",
    # Gzips whole HTML pages; before the others so it sees their finished body.
    "course.middleware.HtmlGZipMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it answers requests made while logins are paused.
    "axes.middleware.AxesMiddleware",
]

# Content-Security-Policy (django-csp): scripts only from this site's own files (htmx, its SSE
# extension, plotly.js and ours are all served from static/), no eval, no inline script.
# Styles allow inline: plotly.js writes style attributes and <style> elements as it draws.
# connect-src 'self' covers htmx's requests and the demos' EventSource streams.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

ROOT_URLCONF = "course.urls"
ASGI_APPLICATION = "course.asgi.application"
WSGI_APPLICATION = "course.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # problems/ holds each problem's prose as content/pNN.html.
        "DIRS": [BASE_DIR / "templates", BASE_DIR / "problems"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "course.context_processors.progress",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}", conn_max_age=60, conn_health_checks=True
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses an authentication attempt while logins are paused.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login throttling: after AXES_FAILURE_LIMIT wrong passwords for one username from one address,
# that pair is paused for the cool-off. The pair, not the username alone: locking a username
# let anyone lock anyone out (5 wrong passwords for "carol" from one address, and carol's own
# correct password from hers answered 429). An address that fails LOGIN_ADDRESS_FAILURE_LIMIT
# logins within the cool-off, whatever the usernames, is paused too (course/throttle.py).
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["ip_address", "username"]]
LOGIN_ADDRESS_FAILURE_LIMIT = int(os.environ.get("LOGIN_ADDRESS_FAILURE_LIMIT", "30"))
# Successful-login records older than this are deleted by the hourly sweep (failed attempts go
# once their cool-off has passed).
AXES_ACCESS_LOG_KEEP_DAYS = int(os.environ.get("AXES_ACCESS_LOG_KEEP_DAYS", "30"))
# Accounts are free, so sign-ups per address are limited (per hour), and so are the anonymous
# sessions one address makes (every cookie-less progress post or run made a session row), and
# practice attempts per visitor or account (per hour).
SIGNUPS_PER_ADDRESS_PER_HOUR = int(os.environ.get("SIGNUPS_PER_ADDRESS_PER_HOUR", "5"))
NEW_SESSIONS_PER_ADDRESS_PER_HOUR = int(os.environ.get("NEW_SESSIONS_PER_ADDRESS_PER_HOUR",
                                                       "60"))
PRACTICE_ATTEMPTS_PER_HOUR = int(os.environ.get("PRACTICE_ATTEMPTS_PER_HOUR", "30"))
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "course.views.login_locked_out"
# The client's address, the same rule the demo limits use (TRUSTED_PROXY_COUNT below).
AXES_CLIENT_IP_CALLABLE = "demos.services.client_address_for_request"
AXES_VERBOSE = False

# How many proxies that append to X-Forwarded-For sit in front of the web processes (0: none,
# REMOTE_ADDR is the client). Login throttling and the demo limits count per client address.
TRUSTED_PROXY_COUNT = int(os.environ.get("TRUSTED_PROXY_COUNT", "0"))

LOGIN_URL = "course:login"
LOGIN_REDIRECT_URL = "course:home"
LOGOUT_REDIRECT_URL = "course:home"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns when it is missing
STATICFILES_DIRS = [BASE_DIR / "static"]
# Outside production, serve straight from static/ without collectstatic.
WHITENOISE_USE_FINDERS = True

# Redis: Celery's broker and result store, and the pub/sub channel of each run's events.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("CELERY_TASK_SOFT_TIME_LIMIT", "120"))
CELERY_TASK_TIME_LIMIT = int(os.environ.get("CELERY_TASK_TIME_LIMIT", "150"))
# A demo task holds a model: one task at a time per worker process, none reserved ahead.
CELERY_WORKER_CONCURRENCY = int(os.environ.get("CELERY_WORKER_CONCURRENCY", "1"))
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "celery")
CELERY_RESULT_EXPIRES = 3600

# The inference engine the workers load (a local Hugging Face directory).
ENGINE_MODEL = os.environ.get("ENGINE_MODEL",
                              str(BASE_DIR / "worker" / "models" / "course-lm"))
ENGINE_DEVICE = os.environ.get("ENGINE_DEVICE", "cpu")  # "cuda" on GPU workers
# Chat-like requests (lifecycle and streaming runs, /v1) join each worker's shared engine on
# ENGINE_QUEUE (workers with --pool threads); experiments build engines of their own on
# EXPERIMENT_QUEUE (one at a time per worker process).
ENGINE_QUEUE = os.environ.get("ENGINE_QUEUE", "engine")
EXPERIMENT_QUEUE = os.environ.get("EXPERIMENT_QUEUE", "experiments")
ENGINE_WORKER_CONCURRENCY = int(os.environ.get("ENGINE_WORKER_CONCURRENCY", "32"))

# The OpenAI-compatible API at /v1: per-key limits (requests and tokens per minute).
API_KEY_REQUESTS_PER_MINUTE = int(os.environ.get("API_KEY_REQUESTS_PER_MINUTE", "60"))
API_KEY_TOKENS_PER_MINUTE = int(os.environ.get("API_KEY_TOKENS_PER_MINUTE", "20000"))
API_MAX_TOKENS = int(os.environ.get("API_MAX_TOKENS", "512"))  # per request, at most
# Requests of one account running at once, and active keys per account: the limits above count
# per account, so a second key is no second share.
API_CONCURRENT_PER_USER = int(os.environ.get("API_CONCURRENT_PER_USER", "4"))
API_KEYS_PER_USER = int(os.environ.get("API_KEYS_PER_USER", "5"))
# Refused before anything is tokenized: a /v1 body past this many bytes (413), a prompt or all
# messages' text past this many characters (400). The shipped model's context is 1,024 tokens
# and its longest token is 16 characters, so no prompt past 16,384 characters can fit; 64,000
# leaves room for a model with a longer context, and tokenizing that much takes milliseconds.
API_MAX_BODY_BYTES = int(os.environ.get("API_MAX_BODY_BYTES", str(2**20)))
API_MAX_PROMPT_CHARS = int(os.environ.get("API_MAX_PROMPT_CHARS", "64000"))
# Failed key lookups per client address per minute before /v1 answers 429 to that address.
API_AUTH_FAILURES_PER_MINUTE = int(os.environ.get("API_AUTH_FAILURES_PER_MINUTE", "20"))
# /metrics answers only these client addresses (comma-separated; "*" for any).
METRICS_ALLOWED_IPS = [a for a in os.environ.get("METRICS_ALLOWED_IPS",
                                                 "127.0.0.1,::1").split(",") if a]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
