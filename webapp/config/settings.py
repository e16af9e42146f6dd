"""Steplab settings: everything comes from environment variables, with safe development defaults.

Development (nothing set): SQLite under ``var/`` and kombu's serverless ``filesystem://`` broker.
Production: ``DATABASE_URL`` (PostgreSQL), ``CELERY_BROKER_URL`` (Redis), ``SECRET_KEY``,
``DEBUG=0``, ``ALLOWED_HOSTS``. README.md lists every variable.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from webapp.jobs.names import ALL_QUEUES, TASK_ROUTES, Queue

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean: use 1/0, true/false, yes/no or on/off."
    )


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", True)

_DEV_SECRET_KEY = "django-insecure-steplab-development-key-do-not-use-in-production"  # noqa: S105
_NEW_KEY_HINT = "e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(64))'"
SECRET_KEY = os.environ.get("SECRET_KEY", "").strip()
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            f"SECRET_KEY is not set and DEBUG=0. Set SECRET_KEY to a long random value, {_NEW_KEY_HINT}."
        )
    SECRET_KEY = _DEV_SECRET_KEY
# The development key (and any key Django marks insecure) is public: with it anyone can forge
# sessions. DEBUG=0 refuses it wherever it came from; the run command refuses it for any bind
# that is not loopback (docs/security.md).
STEPLAB_SECRET_KEY_IS_DEVELOPMENT = SECRET_KEY == _DEV_SECRET_KEY or SECRET_KEY.startswith(
    "django-insecure-"
)
if STEPLAB_SECRET_KEY_IS_DEVELOPMENT and not DEBUG:
    raise ImproperlyConfigured(
        "SECRET_KEY is the development key (or starts with 'django-insecure-') and DEBUG=0. "
        f"Set SECRET_KEY to a long random value of your own, {_NEW_KEY_HINT}."
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Where Steplab keeps files: var/ holds the embedded database and broker; the data dir holds
# exports, checkpoints and uploads.
VAR_DIR = Path(os.environ.get("STEPLAB_VAR_DIR", BASE_DIR / "var")).resolve()
STEPLAB_DATA_DIR = Path(os.environ.get("STEPLAB_DATA_DIR", VAR_DIR / "data")).resolve()

# steplab/browser's screenshots (JPEG files under STEPLAB_DATA_DIR/screenshots, one per step):
# STEPLAB_BROWSER_SCREENSHOTS=0 turns them off for every episode the app plays.
STEPLAB_BROWSER_SCREENSHOTS = os.environ.get(
    "STEPLAB_BROWSER_SCREENSHOTS", "1"
).strip().lower() not in (
    "0",
    "false",
    "no",
    "off",
)
# Where a task's repository may come from (docs/security.md): the archives uploaded with task
# sets, and the directories an administrator lists in STEPLAB_TASK_REPO_ROOTS (default: none).
# trainer_core reads the same variable wherever an episode starts (workers, the CLI).
STEPLAB_TASK_ARCHIVES_DIR = STEPLAB_DATA_DIR / "task-archives"
STEPLAB_TASK_REPO_ROOTS = [
    part.strip()
    for part in os.environ.get("STEPLAB_TASK_REPO_ROOTS", "").split(os.pathsep)
    if part.strip()
]
if str(STEPLAB_TASK_ARCHIVES_DIR) not in STEPLAB_TASK_REPO_ROOTS:
    STEPLAB_TASK_REPO_ROOTS.append(str(STEPLAB_TASK_ARCHIVES_DIR))
os.environ["STEPLAB_TASK_REPO_ROOTS"] = os.pathsep.join(STEPLAB_TASK_REPO_ROOTS)
# Where a local model (a training run's base model, a local policy's model_dir) may be read
# from: Steplab's data directory (models, checkpoints) and the directories an administrator
# lists in STEPLAB_MODEL_ROOTS.
STEPLAB_MODEL_ROOTS = [
    part.strip()
    for part in os.environ.get("STEPLAB_MODEL_ROOTS", "").split(os.pathsep)
    if part.strip()
] + [str(STEPLAB_DATA_DIR)]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "axes",
    "ninja",
    "webapp.common",
    "webapp.accounts",
    "webapp.jobs",
    "webapp.tasks",
    "webapp.domains",
    "webapp.trajectories",
    "webapp.rollouts",
    "webapp.rewards",
    "webapp.calibration",
    "webapp.datasets",
    "webapp.training",
    "webapp.evaluation",
    "webapp.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "webapp.config.security.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "webapp.accounts.middleware.RolePermissionMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "webapp.config.urls"
WSGI_APPLICATION = "webapp.config.wsgi.application"
ASGI_APPLICATION = "webapp.config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "builtins": ["template_partials.templatetags.partials"],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "webapp.accounts.navigation.navigation",
            ],
        },
    }
]

# --- database ---------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
if DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    }
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"]["CONN_MAX_AGE"] = 0
else:
    SQLITE_PATH = Path(os.environ.get("STEPLAB_SQLITE_PATH", VAR_DIR / "steplab.sqlite3"))
    SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": SQLITE_PATH,
            "TEST": {"NAME": str(SQLITE_PATH.with_name("test-" + SQLITE_PATH.name))},
        }
    }

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while a worker writes; IMMEDIATE transactions take the write
    # lock up front (no upgrade deadlocks); the timeout waits for the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# Login throttling (django-axes, docs/security.md): STEPLAB_LOGIN_FAILURES_ALLOWED wrong
# passwords for one username from one address are ordinary failures; the next wrong one and every
# attempt after it (the right password too) get the 429 page until STEPLAB_LOGIN_COOLOFF_MINUTES
# pass without another failure. A successful login clears the count. An admin lifts a lock early
# with `steplab manage axes_reset_username NAME`.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(env_float("STEPLAB_LOGIN_FAILURES_ALLOWED", 5)) + 1  # locks on this one
AXES_COOLOFF_TIME = timedelta(minutes=env_float("STEPLAB_LOGIN_COOLOFF_MINUTES", 15.0))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG
if DEBUG:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing root

# --- security (check --deploy is clean when DEBUG=0) ---------------------------------------
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# Every page: scripts, styles, fonts and requests only from this site; no inline script, inline
# style, eval, plugin, frame or foreign form target (webapp/config/security.py adds the header).
STEPLAB_CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
# Error pages never show settings, the process environment or cookies, even the debug page that
# the run command shows on loopback (webapp/config/security.py).
DEFAULT_EXCEPTION_REPORTER_FILTER = "webapp.config.security.QuietExceptionReporterFilter"
if not DEBUG:
    # Behind a TLS-terminating proxy that sets X-Forwarded-Proto. Set STEPLAB_HTTPS=0 only for a
    # plain-HTTP private deployment (check --deploy will then warn, as it should).
    _https = env_bool("STEPLAB_HTTPS", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = _https
    SESSION_COOKIE_SECURE = _https
    CSRF_COOKIE_SECURE = _https
    SECURE_HSTS_SECONDS = int(env_float("SECURE_HSTS_SECONDS", 31536000 if _https else 0))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", _https)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", _https)

# --- Celery -------------------------------------------------------------------------------
STEPLAB_QUEUES = ALL_QUEUES  # webapp/jobs/names.py owns the queue and task names

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "").strip() or "filesystem://"
BROKER_DIR = VAR_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    for _folder in ("queue", "control"):
        (BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
else:
    # Redis re-delivers an unacknowledged task after visibility_timeout. Long jobs are protected
    # by their own heartbeat (a duplicate delivery of a live job is dropped), so this mainly
    # bounds how long a task lost with a dead worker waits before it is offered again.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_float("STEPLAB_BROKER_VISIBILITY_TIMEOUT", 7200.0),
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_DEFAULT_QUEUE = Queue.DEFAULT.value
CELERY_TASK_CREATE_MISSING_QUEUES = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Task names start with their queue's area (see webapp/jobs/names.py).
CELERY_TASK_ROUTES = TASK_ROUTES

# --- jobs -----------------------------------------------------------------------------------
# A running job's worker refreshes the heartbeat this often (seconds)...
STEPLAB_JOB_HEARTBEAT_SECONDS = env_float("STEPLAB_JOB_HEARTBEAT_SECONDS", 5.0)
# ...and a running job whose heartbeat is older than this is taken for dead.
STEPLAB_JOB_DEAD_AFTER_SECONDS = env_float("STEPLAB_JOB_DEAD_AFTER_SECONDS", 60.0)
# A dead job is re-queued at most this many times before it is failed.
STEPLAB_JOB_MAX_ATTEMPTS = int(env_float("STEPLAB_JOB_MAX_ATTEMPTS", 3))
# Progress writes from one job are throttled to one per this many seconds.
STEPLAB_PROGRESS_MIN_INTERVAL = env_float("STEPLAB_PROGRESS_MIN_INTERVAL", 0.5)
# A worker that has not reported for this long is shown offline.
STEPLAB_WORKER_ONLINE_SECONDS = env_float("STEPLAB_WORKER_ONLINE_SECONDS", 30.0)
STEPLAB_LOG_TAIL_LINES = 200
# Uploads larger than this (all files together) import as a background job with progress.
# A live (pushed) trajectory with no push for this long is failed as abandoned.
STEPLAB_LIVE_ABANDON_MINUTES = env_float("STEPLAB_LIVE_ABANDON_MINUTES", 30.0)
# GDI ranking weights (docs/gdi.md), e.g. "reward=0.5,reuse=0.2,feedback=0.2,recency=0.1"; names
# left out keep knowlyr's defaults (0.35, 0.30, 0.20, 0.15); normalised to sum 1.
STEPLAB_GDI_WEIGHTS = os.environ.get("STEPLAB_GDI_WEIGHTS", "")
# OpenTelemetry (OTLP/HTTP) ingestion: a request body at most this large, compressed and once
# decompressed (read in bounded chunks: a gzip bomb is refused), and at most this many spans and
# GenAI events kept for one trajectory.
STEPLAB_OTLP_MAX_BYTES = int(env_float("STEPLAB_OTLP_MAX_BYTES", 64 * 2**20))
STEPLAB_OTLP_MAX_RECORDS = int(env_float("STEPLAB_OTLP_MAX_RECORDS", 20_000))
STEPLAB_IMPORT_INLINE_MAX_BYTES = int(env_float("STEPLAB_IMPORT_INLINE_MAX_BYTES", 4_000_000))
# What one import reads at most (a file refused by a limit is reported, the others import):
# a file on disk, one zip member decompressed, all members of one archive decompressed, the
# files in one archive, and how deeply a stored JSON value (tool parameters, metadata) nests.
STEPLAB_IMPORT_MAX_FILE_BYTES = int(env_float("STEPLAB_IMPORT_MAX_FILE_BYTES", 256 * 2**20))
STEPLAB_IMPORT_MAX_MEMBER_BYTES = int(env_float("STEPLAB_IMPORT_MAX_MEMBER_BYTES", 256 * 2**20))
STEPLAB_IMPORT_MAX_ARCHIVE_BYTES = int(env_float("STEPLAB_IMPORT_MAX_ARCHIVE_BYTES", 2**30))
STEPLAB_IMPORT_MAX_MEMBERS = int(env_float("STEPLAB_IMPORT_MAX_MEMBERS", 10_000))
STEPLAB_IMPORT_MAX_DEPTH = int(env_float("STEPLAB_IMPORT_MAX_DEPTH", 64))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
