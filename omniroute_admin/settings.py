"""The one settings file. Every environment variable is read here, typed, and listed
in `.env.example`; a bad value raises ImproperlyConfigured at start-up, never later.

Defaults are the embedded ones (SQLite and a filesystem broker in `var/`), so
`make run` needs no services; production sets DATABASE_URL and CELERY_BROKER_URL.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)  # the embedded defaults (SQLite, broker, beat) live here
(VAR_DIR / "staticfiles").mkdir(exist_ok=True)

DEVELOPMENT_SECRET_KEY = "development-only-secret-key-never-use-in-production"

env = environ.Env()
# A local `.env` (written by `make run` on first start) fills in what the shell has not set.
if (BASE_DIR / ".env").is_file():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _typed(name: str, cast: Any, default: Any) -> Any:
    """Read one variable through django-environ, turning a bad value into a start-up error."""
    try:
        return cast(name, default=default)
    except (ValueError, TypeError, environ.ImproperlyConfigured) as error:
        raise ImproperlyConfigured(f"{name} has an invalid value: {error}") from error


DEBUG: bool = _typed("DJANGO_DEBUG", env.bool, True)
SECRET_KEY: str = _typed("DJANGO_SECRET_KEY", env.str, DEVELOPMENT_SECRET_KEY)
if not DEBUG and SECRET_KEY == DEVELOPMENT_SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off: the development key is public."
    )
ALLOWED_HOSTS: list[str] = _typed("DJANGO_ALLOWED_HOSTS", env.list, ["127.0.0.1", "localhost"])

# Credentials are encrypted at rest with this key set (see ladder/crypto.py for the format).
OMNIROUTE_CREDENTIAL_KEY: str = _typed("OMNIROUTE_CREDENTIAL_KEY", env.str, "")


def _check_credential_keys(value: str) -> None:
    """Refuse a malformed key set at start-up rather than on the first credential write."""
    from cryptography.fernet import Fernet

    for part in (p.strip() for p in value.split(",") if p.strip()):
        key_id, sep, key = part.partition(":")
        try:
            if not sep or not key_id:
                raise ValueError
            Fernet(key.encode())
        except ValueError:
            raise ImproperlyConfigured(
                "OMNIROUTE_CREDENTIAL_KEY must be 'key_id:fernet_key[,key_id:fernet_key...]' "
                f"(key {key_id or '?'!r} is malformed)."
            ) from None


_check_credential_keys(OMNIROUTE_CREDENTIAL_KEY)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ninja",  # serves Swagger UI from local static files (no CDN, CSP-friendly)
    "django_htmx",
    "template_partials",
    "billing",
    "ladder",
]

MIDDLEWARE = [
    "omniroute_admin.middleware.BodySizeLimitMiddleware",
    # Outermost but the body limit: it compresses what every other one has written
    # (dashboard HTML only, never the API or a stream).
    "omniroute_admin.middleware.DashboardGZipMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "omniroute_admin.middleware.SecurityHeadersMiddleware",
    # Outside the deadline too: its own 503s are framed by nobody either.
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # After the security headers, so its own 503s carry them; before anything that may
    # touch the database (sessions, users), which it runs under its deadline.
    "omniroute_admin.deadline.RequestDeadlineMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "omniroute_admin.middleware.IdleSessionTimeoutMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A viewer's POST anywhere in the dashboard is a 403 (never a 405).
    "omniroute_admin.dashboard.ViewerWritesForbiddenMiddleware",
]

ROOT_URLCONF = "omniroute_admin.urls"
WSGI_APPLICATION = "omniroute_admin.wsgi.application"
ASGI_APPLICATION = "omniroute_admin.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DEFAULT_SQLITE_URL = f"sqlite:///{VAR_DIR / 'omniroute.sqlite3'}"
DATABASES = {"default": _typed("DATABASE_URL", env.db_url, DEFAULT_SQLITE_URL)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Fail fast instead of hanging a gateway request on a sick database.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "connect_timeout": _typed("DATABASE_CONNECT_TIMEOUT_SECONDS", env.int, 2),
            "options": "-c statement_timeout={}".format(
                _typed("DATABASE_STATEMENT_TIMEOUT_MS", env.int, 2000)
            ),
            # The gateway's token query (ladder/tokens.py) runs as a prepared statement,
            # planned once per connection; the ORM's queries are never prepared. Off
            # (None) behind a transaction-pooling PgBouncer older than 1.21.
            "prepare_threshold": 0
            if _typed("DATABASE_PREPARED_STATEMENTS", env.bool, True)
            else None,
        }
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file (not memory) test database, so a real Celery worker process in the
    # integration tests can open the same database as the test.
    # One file per test run (by process id), so parallel runs never share it.
    DATABASES["default"].setdefault("TEST", {}).setdefault(
        "NAME", str(VAR_DIR / f"test-{os.getpid()}.sqlite3")
    )
    # Web, worker and beat share one file in `make run`: wait for locks instead of failing.
    # IMMEDIATE transactions take the write lock up front, so a read-then-write never hits
    # "database is locked"; WAL lets readers go on while one process writes.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
DATABASES["default"]["CONN_MAX_AGE"] = _typed("DATABASE_CONN_MAX_AGE_SECONDS", env.int, 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# API requests answer within this many seconds, a JSON 503 with Retry-After past it: the
# timeouts above cannot fire on a database that stops answering mid-query (0 disables).
API_REQUEST_DEADLINE_SECONDS: float = _typed("API_REQUEST_DEADLINE_SECONDS", env.float, 0.9)
if API_REQUEST_DEADLINE_SECONDS < 0:
    raise ImproperlyConfigured("API_REQUEST_DEADLINE_SECONDS must be 0 (off) or more.")
# Dashboard requests (every path but the API's, static files and /healthz) run on their
# own DASHBOARD_MAX_THREADS threads per process and answer a 503 error state past this
# many seconds (0 disables both), so open tabs polling a hung database hold at most that
# many of the server's threads. Keep DASHBOARD_MAX_THREADS below the server's threads per
# process (the README runs gunicorn with 8): the rest are always free for the API.
DASHBOARD_REQUEST_DEADLINE_SECONDS: float = _typed(
    "DASHBOARD_REQUEST_DEADLINE_SECONDS", env.float, 10.0
)
if DASHBOARD_REQUEST_DEADLINE_SECONDS < 0:
    raise ImproperlyConfigured("DASHBOARD_REQUEST_DEADLINE_SECONDS must be 0 (off) or more.")
DASHBOARD_MAX_THREADS: int = _typed("DASHBOARD_MAX_THREADS", env.int, 4)
if DASHBOARD_MAX_THREADS < 1:
    raise ImproperlyConfigured("DASHBOARD_MAX_THREADS must be at least 1.")
# With every dashboard thread busy, up to this many dashboard requests wait for the next
# free one (a page load fires a few at once), each at most DASHBOARD_QUEUE_WAIT_SECONDS
# (and never past its deadline); beyond the queue, or past that wait, the 503 error state.
DASHBOARD_QUEUE_LENGTH: int = _typed("DASHBOARD_QUEUE_LENGTH", env.int, 4)
if DASHBOARD_QUEUE_LENGTH < 0:
    raise ImproperlyConfigured("DASHBOARD_QUEUE_LENGTH must be 0 (no queue) or more.")
DASHBOARD_QUEUE_WAIT_SECONDS: float = _typed("DASHBOARD_QUEUE_WAIT_SECONDS", env.float, 2.0)
if DASHBOARD_QUEUE_WAIT_SECONDS < 0:
    raise ImproperlyConfigured("DASHBOARD_QUEUE_WAIT_SECONDS must be 0 (no wait) or more.")
# Under the ASGI server (omniroute_admin.asgi) every request but a held change-feed
# answer runs on this many threads per process: the WSGI server's `--threads`.
ASGI_WSGI_THREADS: int = _typed("ASGI_WSGI_THREADS", env.int, 8)
if ASGI_WSGI_THREADS < 1:
    raise ImproperlyConfigured("ASGI_WSGI_THREADS must be at least 1.")
# The production worker class (omniroute_admin.worker) closes a connection that has not
# sent a whole request, headers and body, this many seconds after it opened (or after the
# request's first byte on a kept-alive connection): a slow client cannot hold a socket.
REQUEST_READ_TIMEOUT_SECONDS: float = _typed("REQUEST_READ_TIMEOUT_SECONDS", env.float, 5.0)
if REQUEST_READ_TIMEOUT_SECONDS <= 0:
    raise ImproperlyConfigured("REQUEST_READ_TIMEOUT_SECONDS must be more than 0.")
# The change feed's listener (PostgreSQL) re-reads the counters this often besides on
# every notification: a health check of its connection and a catch-up (docs/HOT_PATH.md).
CHANGE_FEED_RESYNC_SECONDS: float = _typed("CHANGE_FEED_RESYNC_SECONDS", env.float, 10.0)
if CHANGE_FEED_RESYNC_SECONDS <= 0:
    raise ImproperlyConfigured("CHANGE_FEED_RESYNC_SECONDS must be more than 0.")
# Each web process caches pool decisions and their rendered bodies (ladder.services,
# ladder.api.pool_answers): at most this many bytes together (three quarters decisions, a quarter
# bodies), least recently used out first; a single answer above an eighth of its share is
# served but not kept. 0 caches nothing.
DECISION_CACHE_MAX_BYTES: int = _typed("DECISION_CACHE_MAX_BYTES", env.int, 64 * 1024 * 1024)
# Whether computed decisions record the pool timeline (ladder.services.timeline): on in
# every deployment; off only to measure what recording costs (bench/hot_path.py
# --timeline off), since the timeline page and its API then miss every change.
POOL_TIMELINE_RECORDING: bool = _typed("POOL_TIMELINE_RECORDING", env.bool, True)
if DECISION_CACHE_MAX_BYTES < 0:
    raise ImproperlyConfigured("DECISION_CACHE_MAX_BYTES must be 0 (no cache) or more.")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve static files from the app folders too, so no collectstatic is needed to start.
WHITENOISE_USE_FINDERS = True

# Request bodies over this many bytes are answered 413 (API writes are small).
DATA_UPLOAD_MAX_MEMORY_SIZE: int = _typed("REQUEST_MAX_BODY_BYTES", env.int, 5 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE

# Security headers. No inline script or style anywhere, no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Behind TLS in production (debug off): secure cookies, HSTS and the HTTPS redirect.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_SSL_REDIRECT: bool = _typed("DJANGO_SECURE_SSL_REDIRECT", env.bool, not DEBUG)
SECURE_HSTS_SECONDS = 0 if DEBUG else 31_536_000
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = False  # a deliberate, domain-wide commitment left to the operator
# The one `check --deploy` exception, documented in docs/RELIABILITY.md: preloading HSTS
# binds every subdomain of the operator's domain, which this app cannot decide for them.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
# Sessions: an absolute limit, an idle limit, and a new session key at every login
# (Django's login() rotates it).
SESSION_COOKIE_AGE: int = _typed("SESSION_ABSOLUTE_TIMEOUT_SECONDS", env.int, 12 * 3600)
SESSION_IDLE_TIMEOUT_SECONDS: int = _typed("SESSION_IDLE_TIMEOUT_SECONDS", env.int, 30 * 60)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"

# Failed sign-in throttling (ladder/web/login_throttle.py), counted in this cache.
CACHES = {"default": _typed("CACHE_URL", env.cache_url, "locmemcache://omniroute")}
LOGIN_FAILURE_WINDOW_SECONDS: int = _typed("LOGIN_FAILURE_WINDOW_SECONDS", env.int, 15 * 60)
LOGIN_MAX_FAILURES_PER_USER: int = _typed("LOGIN_MAX_FAILURES_PER_USER", env.int, 5)
LOGIN_MAX_FAILURES_PER_ADDRESS: int = _typed("LOGIN_MAX_FAILURES_PER_ADDRESS", env.int, 20)

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Celery: the app is `omniroute_admin` (`celery -A omniroute_admin worker -B`).
BROKER_DIR = Path(_typed("CELERY_FILESYSTEM_BROKER_DIR", env.str, str(VAR_DIR / "broker")))
CELERY_BROKER_URL: str = _typed("CELERY_BROKER_URL", env.str, "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    (BROKER_DIR / "processed").mkdir(parents=True, exist_ok=True)
    (BROKER_DIR / "control").mkdir(parents=True, exist_ok=True)
FILESYSTEM_BROKER_POLL_SECONDS: float = _typed(
    "CELERY_FILESYSTEM_BROKER_POLL_SECONDS", env.float, 0.1
)
if not FILESYSTEM_BROKER_POLL_SECONDS > 0:  # 0 would list the folder without pause
    raise ImproperlyConfigured("CELERY_FILESYSTEM_BROKER_POLL_SECONDS must be more than 0.")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = (
    {
        "data_folder_in": str(BROKER_DIR),
        "data_folder_out": str(BROKER_DIR),
        "processed_folder": str(BROKER_DIR / "processed"),
        # Broadcast (pidbox) files; kombu's default is a folder in the working directory.
        "control_folder": str(BROKER_DIR / "control"),
        # How often an idle worker lists the folder (kombu's default is 1 s). A worker
        # holds at most `concurrency x prefetch` unacknowledged messages and fetches more
        # only at its next look, so at 1 s the third of a tick's beat messages waited a
        # whole second and expired (each beat task expires after one beat period): the due
        # scan never ran. A tenth of a second is a cheap directory listing.
        "polling_interval": FILESYSTEM_BROKER_POLL_SECONDS,
    }
    if CELERY_BROKER_URL.startswith("filesystem://")
    else {"visibility_timeout": 3600}
)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
# Publishing must not hang a web request when the broker is down: fail fast instead.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2}
CELERY_BROKER_CONNECTION_TIMEOUT = 2.0
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TASK_DEFAULT_QUEUE: str = _typed("CELERY_TASK_DEFAULT_QUEUE", env.str, "omniroute")
# Webhook deliveries go to a queue of their own, consumed by their own worker processes
# (`celery worker -Q` this queue; docs/OPERATIONS.md), so a slow receiver can hold a
# notifier but never a worker a quota refresh waits for.
CELERY_NOTIFICATIONS_QUEUE: str = _typed(
    "CELERY_NOTIFICATIONS_QUEUE", env.str, "omniroute-notifications"
)
if CELERY_NOTIFICATIONS_QUEUE == CELERY_TASK_DEFAULT_QUEUE:
    raise ImproperlyConfigured(
        "CELERY_NOTIFICATIONS_QUEUE must differ from CELERY_TASK_DEFAULT_QUEUE."
    )
CELERY_TASK_ROUTES: dict[str, dict[str, str]] = {
    "ladder.tasks.deliver_notification_task": {"queue": CELERY_NOTIFICATIONS_QUEUE},
}

# Quota refresh. A reading is polled again once this old (and always before it would go
# stale under max_state_age_seconds); the beat looks for due connections this often.
QUOTA_REFRESH_INTERVAL_SECONDS: int = _typed("QUOTA_REFRESH_INTERVAL_SECONDS", env.int, 180)
QUOTA_BEAT_SECONDS: float = _typed("QUOTA_BEAT_SECONDS", env.float, 10.0)
QUOTA_HTTP_TIMEOUT_SECONDS: float = _typed("QUOTA_HTTP_TIMEOUT_SECONDS", env.float, 10.0)
# One refresh of a connection at a time: a refresh holds a lease on the connection this
# long. A worker killed mid-poll leaves its lease to expire, so it must outlast any poll.
QUOTA_REFRESH_LEASE_SECONDS: float = _typed("QUOTA_REFRESH_LEASE_SECONDS", env.float, 45.0)
if QUOTA_REFRESH_LEASE_SECONDS <= QUOTA_HTTP_TIMEOUT_SECONDS:
    raise ImproperlyConfigured(
        "QUOTA_REFRESH_LEASE_SECONDS must be longer than QUOTA_HTTP_TIMEOUT_SECONDS."
    )
# At most this many usage-endpoint calls run at once, across every worker.
QUOTA_MAX_CONCURRENT_POLLS: int = _typed("QUOTA_MAX_CONCURRENT_POLLS", env.int, 4)
QUOTA_READING_RETENTION_DAYS: int = _typed("QUOTA_READING_RETENTION_DAYS", env.int, 14)
# A refresh for a reading's reset instant is scheduled this long after it.
QUOTA_RESET_GRACE_SECONDS: float = _typed("QUOTA_RESET_GRACE_SECONDS", env.float, 1.5)
# Each adapter's endpoint can be overridden by QUOTA_URL_<NAME> (full URL).
QUOTA_ADAPTERS = ("claude", "codex", "copilot", "gemini-cli", "antigravity")
QUOTA_URL_OVERRIDES: dict[str, str] = {
    name: url
    for name in QUOTA_ADAPTERS
    if (url := _typed("QUOTA_URL_" + name.upper().replace("-", "_"), env.str, ""))
}
for _name, _url in QUOTA_URL_OVERRIDES.items():
    if not _url.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"The quota URL override for {_name} must be an http(s) URL.")

# The beat is late once its heartbeat (sent every beat period) is older than this:
# /readyz answers 503 naming `beat`, the overview warns (ladder/beat.py).
BEAT_HEARTBEAT_MAX_AGE_SECONDS: float = _typed(
    "BEAT_HEARTBEAT_MAX_AGE_SECONDS", env.float, 3 * QUOTA_BEAT_SECONDS
)
if BEAT_HEARTBEAT_MAX_AGE_SECONDS <= QUOTA_BEAT_SECONDS:
    raise ImproperlyConfigured(
        "BEAT_HEARTBEAT_MAX_AGE_SECONDS must be longer than QUOTA_BEAT_SECONDS."
    )

# Notifications (ladder/services/notifications.py, docs/NOTIFICATIONS.md). The beat evaluates what
# changed this often; `auto/subscription` must stay empty this long before it is notified.
NOTIFY_EVALUATE_SECONDS: float = _typed("NOTIFY_EVALUATE_SECONDS", env.float, 30.0)
NOTIFY_SUBSCRIPTION_EMPTY_SECONDS: int = _typed("NOTIFY_SUBSCRIPTION_EMPTY_SECONDS", env.int, 300)
# A delivery is tried at most this many times, waiting min(base * 2^(n-1), max) seconds
# after the n-th failure (defaults: 6 tries over about 31 minutes).
NOTIFY_MAX_ATTEMPTS: int = _typed("NOTIFY_MAX_ATTEMPTS", env.int, 6)
NOTIFY_RETRY_BASE_SECONDS: float = _typed("NOTIFY_RETRY_BASE_SECONDS", env.float, 60.0)
NOTIFY_RETRY_MAX_SECONDS: float = _typed("NOTIFY_RETRY_MAX_SECONDS", env.float, 960.0)
NOTIFY_HTTP_TIMEOUT_SECONDS: float = _typed("NOTIFY_HTTP_TIMEOUT_SECONDS", env.float, 10.0)
# One attempt (connect, TLS, request, the answer's status and headers) ends this many
# seconds after it starts, however slowly the receiver drips its answer: the timeout
# above bounds each read only.
NOTIFY_ATTEMPT_DEADLINE_SECONDS: float = _typed("NOTIFY_ATTEMPT_DEADLINE_SECONDS", env.float, 15.0)
# Loopback and private-range targets are refused unless this is on (link-local and cloud
# metadata addresses stay refused even then).
NOTIFY_ALLOW_PRIVATE_TARGETS: bool = _typed("NOTIFY_ALLOW_PRIVATE_TARGETS", env.bool, False)
# The dashboard's address as operators reach it: each notification links to its subject's
# page under it (a webhook is sent by the worker, which knows no request to ask).
DASHBOARD_BASE_URL: str = _typed("DASHBOARD_BASE_URL", env.str, "http://127.0.0.1:8000").rstrip("/")
if not DASHBOARD_BASE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("DASHBOARD_BASE_URL must be an http:// or https:// address.")
for _name, _value, _least in (
    ("NOTIFY_EVALUATE_SECONDS", NOTIFY_EVALUATE_SECONDS, 1),
    ("NOTIFY_SUBSCRIPTION_EMPTY_SECONDS", NOTIFY_SUBSCRIPTION_EMPTY_SECONDS, 0),
    ("NOTIFY_MAX_ATTEMPTS", NOTIFY_MAX_ATTEMPTS, 1),
    ("NOTIFY_RETRY_BASE_SECONDS", NOTIFY_RETRY_BASE_SECONDS, 0.1),
    ("NOTIFY_RETRY_MAX_SECONDS", NOTIFY_RETRY_MAX_SECONDS, 0.1),
    ("NOTIFY_HTTP_TIMEOUT_SECONDS", NOTIFY_HTTP_TIMEOUT_SECONDS, 0.1),
    ("NOTIFY_ATTEMPT_DEADLINE_SECONDS", NOTIFY_ATTEMPT_DEADLINE_SECONDS, 0.1),
):
    if _value < _least:
        raise ImproperlyConfigured(f"{_name} must be at least {_least}.")
if NOTIFY_MAX_ATTEMPTS > 20:
    raise ImproperlyConfigured("NOTIFY_MAX_ATTEMPTS must be at most 20.")
if NOTIFY_ATTEMPT_DEADLINE_SECONDS > 50:  # inside deliver_notification_task's 60 s limit
    raise ImproperlyConfigured("NOTIFY_ATTEMPT_DEADLINE_SECONDS must be at most 50.")

# Forecasts (spec/ladder.md, "Forecasts"; docs/OPERATIONS.md): the paid rungs' pace is
# their ledger spend over this many recent minutes (1 to 10080, a week).
FORECAST_PAID_LOOKBACK_MINUTES: int = _typed("FORECAST_PAID_LOOKBACK_MINUTES", env.int, 60)
if not 1 <= FORECAST_PAID_LOOKBACK_MINUTES <= 10080:
    raise ImproperlyConfigured("FORECAST_PAID_LOOKBACK_MINUTES must be between 1 and 10080.")

# The one beat schedule. The heartbeat has the due scan's period and expiry: fresh, it
# proves the due scans are being sent and run.
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "enqueue-due-refreshes": {
        "task": "ladder.tasks.enqueue_due_refreshes_task",
        "schedule": QUOTA_BEAT_SECONDS,
        "options": {"expires": QUOTA_BEAT_SECONDS},
    },
    "beat-heartbeat": {
        "task": "ladder.tasks.record_beat_heartbeat_task",
        "schedule": QUOTA_BEAT_SECONDS,
        "options": {"expires": QUOTA_BEAT_SECONDS},
    },
    "evaluate-notifications": {
        "task": "ladder.tasks.evaluate_notifications_task",
        "schedule": NOTIFY_EVALUATE_SECONDS,
        "options": {"expires": NOTIFY_EVALUATE_SECONDS},
    },
    # The pool timeline (docs/HOT_PATH.md): time-driven changes within one beat period.
    "record-pool-timeline": {
        "task": "ladder.tasks.record_pool_timeline_task",
        "schedule": QUOTA_BEAT_SECONDS,
        "options": {"expires": QUOTA_BEAT_SECONDS},
    },
    # Forecast against outcome (docs/FORECASTS.md): each window's first forecast and
    # whether it ran out, looked at once a minute.
    "record-forecasts": {
        "task": "ladder.tasks.record_forecasts_task",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    "prune-readings": {
        "task": "ladder.tasks.prune_readings_task",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
}

# Every handler formats through EscapingFormatter: control characters and line breaks in
# a logged value are escaped, so no request can forge a log line (omniroute_admin/
# log_escape.py). Django's own loggers are named so they lose the handlers Django gave
# them (which format raw) and write through the root's; Celery's and gunicorn's handlers
# are wrapped where those set them up (omniroute_admin/celery.py, gunicorn.conf.py).
LOG_LEVEL: str = _typed("LOG_LEVEL", env.str, "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "omniroute_admin.log_escape.EscapingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Django gives these handlers of its own (formatting raw); cleared, so their
        # records reach the root's handler only.
        "django": {"handlers": [], "level": LOG_LEVEL, "propagate": True},
        "django.server": {"handlers": [], "level": LOG_LEVEL, "propagate": True},
        # httpx logs every request's full URL at INFO; a webhook URL's path can be its
        # secret (Slack's is), so only its warnings are kept, whatever LOG_LEVEL says.
        "httpx": {"level": "WARNING"},
        # A wire trace that quotes upstream response headers verbatim (an upstream may
        # echo the credential there): never below WARNING, whatever LOG_LEVEL says.
        "httpcore": {"level": "WARNING"},
    },
}
