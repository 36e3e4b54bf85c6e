"""Django settings, read from the environment with embedded defaults (SQLite, filesystem broker, simulated cluster)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("GANGWAY_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


# Production is the default: DEBUG only when asked for (the demo and the tests ask), and no public key then.
DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set and DEBUG is off: set SECRET_KEY to a long random string "
            "(python -c 'import secrets; print(secrets.token_urlsafe(50))'), or DEBUG=1 for development"
        )
    SECRET_KEY = "dev-only-insecure-key-never-used-with-debug-off"
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,0.0.0.0,[::1]").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

# HTTPS, on unless DEBUG. Behind a TLS-terminating proxy, SECURE_PROXY_SSL_HEADER names the header it sets
# ("HTTP_X_FORWARDED_PROTO=https"); trust it only when the proxy strips that header from clients.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0" if DEBUG else "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
if os.environ.get("SECURE_PROXY_SSL_HEADER"):
    _header, _, _value = os.environ["SECURE_PROXY_SSL_HEADER"].partition("=")
    SECURE_PROXY_SSL_HEADER = (_header.strip(), _value.strip() or "https")
# Preloading (security.W021) commits the whole domain to HTTPS in browsers' built-in lists: the domain owner's call.
# In-cluster scrapers speak plain HTTP to /metrics (it is token-protected).
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "axes",
    "portal.accounts",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "scheduling",
    "portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.middleware.RejectNulInQueryMiddleware",
    "portal.staticserve.CollectedFirstWhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
]

# Logins are rate limited (django-axes): AXES_FAILURE_LIMIT wrong passwords for one username from one address
# lock that pair out for AXES_COOLOFF_MINUTES.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = dt.timedelta(minutes=float(os.environ.get("AXES_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

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
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'gangway.sqlite3'}"),
        # Persistent connections (seconds) save a connection per request; each is checked before reuse, so a
        # database restart costs one failed check, not a failed request.
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, worker, beat) share the file: wait for locks instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
    DATABASES["default"].setdefault("TEST", {})["NAME"] = os.environ.get("GANGWAY_TEST_SQLITE_NAME") or None

if os.environ.get("GANGWAY_TEST_DB_NAME"):
    # Lets concurrent test runs on one PostgreSQL server use separate test databases.
    DATABASES["default"].setdefault("TEST", {})["NAME"] = os.environ["GANGWAY_TEST_DB_NAME"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "portal.staticfinders.VendorFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# Vendored JavaScript carries its package's version in its name (portal/staticfinders.py): cached for ten years.
WHITENOISE_IMMUTABLE_FILE_TEST = r"/vendor/[a-z]+-[0-9][0-9A-Za-z.]*\.min\.js$"
WHITENOISE_MAX_AGE = int(os.environ.get("GANGWAY_STATIC_MAX_AGE_S", "3600"))  # our own CSS and JS

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "web:job-list"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "portal.accounts.authentication.NamedTokenAuthentication",
    ],
    # Per user (signed in) and per address (anonymous); a flood of bad tokens is limited in the authentication.
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle", "rest_framework.throttling.AnonRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "user": os.environ.get("GANGWAY_THROTTLE_USER", "1200/min"),
        "anon": os.environ.get("GANGWAY_THROTTLE_ANON", "60/min"),
    },
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    # JSON only: a form body would silently drop nested fields such as `quotas` (415 instead).
    "DEFAULT_PARSER_CLASSES": ["portal.api.parsers.BoundedJSONParser"],
}
GANGWAY_API_MAX_BODY_BYTES = int(os.environ.get("GANGWAY_API_MAX_BODY_BYTES", str(1024 * 1024)))
GANGWAY_API_MAX_JSON_DEPTH = int(os.environ.get("GANGWAY_API_MAX_JSON_DEPTH", "32"))
GANGWAY_BAD_TOKENS_PER_MINUTE = int(os.environ.get("GANGWAY_BAD_TOKENS_PER_MINUTE", "20"))
KNOX_TOKEN_MODEL = "accounts.ApiToken"
# knox's own migrations create its (here swapped-out) token table regardless; without them no table is made,
# so nothing references auth_user that the models do not know about (test flushes truncate auth_user).
MIGRATION_MODULES = {"knox": None}
REST_KNOX = {"TOKEN_TTL": dt.timedelta(days=90), "AUTH_HEADER_PREFIX": "Token"}
# Throttle counters and bad-token counts are shared by every web process through Redis when GANGWAY_CACHE_URL
# names one; the embedded setup keeps them per process. While Redis is down the limits lapse (portal.cache): the
# API keeps answering.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
if os.environ.get("GANGWAY_CACHE_URL", "").startswith(("redis://", "rediss://")):
    CACHES = {"default": {"BACKEND": "portal.cache.FailOpenRedisCache", "LOCATION": os.environ["GANGWAY_CACHE_URL"],
                          "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}}

SPECTACULAR_SETTINGS = {
    "TITLE": "Gangway API",
    "DESCRIPTION": "Submit gangs, manage teams, queues and quotas, inspect the fleet and preemption plans.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and docs describe every endpoint: for signed-in users only, like the API itself.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "portal.api.schema.document_errors"],
}

# --- Celery ----------------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _celery_dir = VAR_DIR / "celery"
    for _sub in ("out", "processed", "control"):
        (_celery_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "control_folder": str(_celery_dir / "control"),
        "data_folder_in": str(_celery_dir / "out"),
        "data_folder_out": str(_celery_dir / "out"),
        "processed_folder": str(_celery_dir / "processed"),
        "store_processed": False,
    }
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- Gangway ---------------------------------------------------------------------------------
GANGWAY_CLUSTER = os.environ.get("GANGWAY_CLUSTER", "simulated")
GANGWAY_FLEET = os.environ.get("GANGWAY_FLEET", "")
GANGWAY_RECONCILE_INTERVAL_S = float(os.environ.get("GANGWAY_RECONCILE_INTERVAL_S", "5"))
GANGWAY_RECONCILE_ON_WRITE = env_bool("GANGWAY_RECONCILE_ON_WRITE", True)
GANGWAY_PENDING_PER_QUEUE = int(os.environ.get("GANGWAY_PENDING_PER_QUEUE", "5000"))
GANGWAY_RECONCILE_LOCK_LEASE_S = float(os.environ.get("GANGWAY_RECONCILE_LOCK_LEASE_S", "4"))
"""The reconcile lock is a lease its holder renews every third of this while the pass runs: a killed holder
stalls admissions for at most this long."""
# A pass that sees nothing new skips explaining; explanations still catch up with time (costs of fixes, when running
# jobs should end) at least this often.
GANGWAY_EXPLAIN_REFRESH_S = float(os.environ.get("GANGWAY_EXPLAIN_REFRESH_S", "60"))
GANGWAY_USAGE_INTERVAL_S = float(os.environ.get("GANGWAY_USAGE_INTERVAL_S", "60"))
GANGWAY_USAGE_RETENTION_S = float(os.environ.get("GANGWAY_USAGE_RETENTION_S", str(8 * 24 * 3600)))
GANGWAY_USAGE_RAW_RETENTION_S = float(os.environ.get("GANGWAY_USAGE_RAW_RETENTION_S", str(3 * 3600)))
GANGWAY_IDLE_THRESHOLD_PERCENT = float(os.environ.get("GANGWAY_IDLE_THRESHOLD_PERCENT", "10"))
GANGWAY_IDLE_GRACE_S = float(os.environ.get("GANGWAY_IDLE_GRACE_S", "600"))
GANGWAY_ESTIMATE_INTERVAL_S = float(os.environ.get("GANGWAY_ESTIMATE_INTERVAL_S", "300"))
GANGWAY_ESTIMATE_MIN_GAP_S = float(os.environ.get("GANGWAY_ESTIMATE_MIN_GAP_S", "15"))
"""After a pass that moved the queue the estimates are recomputed at once, but at most once in this many seconds."""
GANGWAY_ESTIMATE_HORIZON_S = float(os.environ.get("GANGWAY_ESTIMATE_HORIZON_S", str(7 * 24 * 3600)))
GANGWAY_PROMETHEUS_URL = os.environ.get("GANGWAY_PROMETHEUS_URL", "")
GANGWAY_METRICS_TOKEN = os.environ.get("GANGWAY_METRICS_TOKEN", "")
"""Bearer token of the Prometheus scraper for /metrics (unset: /metrics is off)."""
GANGWAY_DEMO = env_bool("GANGWAY_DEMO", False)
"""The demo (`./dev demo`): the login page shows the demo logins."""
GANGWAY_NAMESPACE = os.environ.get("GANGWAY_NAMESPACE", "default")
"""Namespace of the Jobs Gangway creates for jobs submitted through its API with a pod template."""
# Test hook only: a worker exits right after a pass commits admissions and before it applies them.
GANGWAY_FAULT_AFTER_COMMIT = env_bool("GANGWAY_FAULT_AFTER_COMMIT", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"scheduling": {"handlers": ["console"], "level": os.environ.get("GANGWAY_LOG_LEVEL", "INFO")}},
}
