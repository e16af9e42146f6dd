"""Issue 17 point 4, production-safe defaults: error pages show no setting, every page carries a
Content-Security-Policy, ``next`` stays on this site, wrong passwords are throttled, DEBUG=0
refuses the development key, and the templates hold no inline script or style."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from webapp.accounts.models import Role

REPO = Path(__file__).resolve().parents[3]
DB_SECRET = "hunter2-db-password-xyzzy"
BROKER_SECRET = "broker-password-plugh"
FAKE_DATABASE_URL = f"postgres://steplab:{DB_SECRET}@db.internal:5432/steplab"
FAKE_BROKER_URL = f"redis://:{BROKER_SECRET}@cache.internal:6379/0"


def _boom(client):
    client.raise_request_exception = False
    # runserver copies the process environment into META; the test client gets it by hand.
    return client.get("/boom/", DATABASE_URL=FAKE_DATABASE_URL, CELERY_BROKER_URL=FAKE_BROKER_URL)


def _assert_no_setting(page: str) -> None:
    for secret in (DB_SECRET, BROKER_SECRET, FAKE_DATABASE_URL, FAKE_BROKER_URL):
        assert secret not in page, f"the error page shows {secret!r}"
    assert settings.SECRET_KEY not in page


# --- error pages ------------------------------------------------------------------------------


@pytest.mark.urls("tests.webapp.accounts.boom_urls")
@pytest.mark.django_db
def test_a_500_under_production_settings_shows_no_setting(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    with override_settings(
        DEBUG=False, DATABASE_URL=FAKE_DATABASE_URL, CELERY_BROKER_URL=FAKE_BROKER_URL
    ):
        response = _boom(client)
    page = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on the server" in page
    assert "Traceback" not in page and "RuntimeError" not in page
    assert "CELERY_BROKER_URL" not in page and "DATABASE_URL" not in page
    _assert_no_setting(page)


@pytest.mark.urls("tests.webapp.accounts.boom_urls")
@pytest.mark.django_db
def test_even_the_loopback_debug_page_shows_no_setting_environment_or_cookie(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    with override_settings(
        DEBUG=True, DATABASE_URL=FAKE_DATABASE_URL, CELERY_BROKER_URL=FAKE_BROKER_URL
    ):
        response = _boom(client)
    page = response.content.decode()
    assert response.status_code == 500
    assert "RuntimeError" in page, "the debug page itself is still there on loopback"
    assert "not shown on error pages" in page
    assert "<td>DATABASE_URL</td>" not in page and "<td>ALLOWED_HOSTS</td>" not in page
    _assert_no_setting(page)
    assert client.cookies["sessionid"].value not in page


# --- Content-Security-Policy ------------------------------------------------------------------


@pytest.mark.django_db
def test_every_page_carries_the_content_security_policy(client, make_user):
    anonymous = client.get(reverse("login"))
    policy = anonymous["Content-Security-Policy"]
    assert policy == settings.STEPLAB_CONTENT_SECURITY_POLICY
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy
    client.force_login(make_user(Role.OPERATOR))
    for name in ("dashboard", "trajectories:list", "jobs:list"):
        response = client.get(reverse(name))
        assert response.status_code == 200
        assert response["Content-Security-Policy"] == policy, name


INLINE = {
    "inline <script> (put it in static/js/)": re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.I),
    "<style> element (put it in static/css/)": re.compile(r"<style\b", re.I),
    "inline event handler (bind it in static/js/)": re.compile(r"\son[a-z]+\s*=", re.I),
    "style attribute (use a class)": re.compile(r"\sstyle\s*=", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
    "hx-on / js: values (htmx would eval them)": re.compile(r"\shx-on|\"js:", re.I),
}


def inline_code(text: str) -> list[str]:
    return [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {what}"
        for what, pattern in INLINE.items()
        for m in pattern.finditer(text)
    ]


def test_templates_hold_no_inline_script_style_or_handler():
    folders = [REPO / "templates", *sorted((REPO / "webapp").glob("*/templates"))]
    found = {
        str(path.relative_to(REPO)): problems
        for folder in folders
        for path in sorted(folder.rglob("*.html"))
        if (problems := inline_code(path.read_text()))
    }
    assert not found, f"the Content-Security-Policy blocks these: {found}"
    bad = '<div style="width: 3%" onclick="go()"><script>x()</script><style>p{}</style>'
    assert len(inline_code(bad)) == 4
    assert inline_code('<script src="/static/js/a.js"></script><p class="pct-3">') == []


# --- next ---------------------------------------------------------------------------------------

EXTERNAL = [
    "https://evil.example/phish",
    "//evil.example/phish",
    "\\\\evil.example",
    "/\\evil.example",
    "javascript:alert(1)",
    "http://testserver.evil.example/",
]


@pytest.mark.django_db
@pytest.mark.parametrize("target", EXTERNAL)
def test_an_external_next_is_ignored_by_tag_export_and_login(client, make_user, target):
    user = make_user(Role.OPERATOR)
    client.force_login(user)
    tagged = client.post(
        reverse("trajectories:tag"), {"tag": "t", "selected": ["999999"], "next": target}
    )
    assert tagged.status_code == 302 and tagged["Location"] == reverse("trajectories:list")
    exported = client.post(reverse("trajectories:export_selection"), {"next": target})
    assert exported.status_code == 302 and exported["Location"] == reverse("trajectories:list")
    client.logout()
    form = client.get(reverse("login"), {"next": target})
    assert target not in form.content.decode()
    login = client.post(
        reverse("login"),
        {"username": user.username, "password": user.raw_password, "next": target},
    )
    assert login.status_code == 302 and login["Location"] == reverse("dashboard")


@pytest.mark.django_db
def test_a_next_on_this_site_is_still_followed(client, make_user):
    client.force_login(make_user(Role.OPERATOR))
    back = "/trajectories/?agent=swe-agent&sort=-steps"
    tagged = client.post(reverse("trajectories:tag"), {"tag": "t", "selected": ["1"], "next": back})
    assert tagged["Location"] == back


# --- login throttling ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_sixth_wrong_password_in_a_minute_is_throttled(client, make_user):
    user = make_user(Role.VIEWER)
    other = make_user(Role.VIEWER)
    assert settings.AXES_FAILURE_LIMIT == 6, "five wrong passwords allowed, the sixth locks"
    for attempt in range(1, 6):
        response = client.post(reverse("login"), {"username": user.username, "password": "no"})
        assert response.status_code == 200, f"wrong password {attempt} is an ordinary failure"
        assert "Please enter a correct username and password" in response.content.decode()
    sixth = client.post(reverse("login"), {"username": user.username, "password": "no"})
    assert sixth.status_code == 429
    assert "Too many failed logins" in sixth.content.decode()
    right = client.post(
        reverse("login"), {"username": user.username, "password": user.raw_password}
    )
    assert right.status_code == 429, "while locked, the right password does not log in either"
    assert "_auth_user_id" not in client.session
    fine = client.post(
        reverse("login"), {"username": other.username, "password": other.raw_password}
    )
    assert fine.status_code == 302, "another account from the same address is not locked"


# --- settings -------------------------------------------------------------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("DATABASE_URL", "CELERY_", "STEPLAB_", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS")
        )
    }
    return {**env, **extra}


def _django(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    prelude = "import django; django.setup(); from django.conf import settings; "
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=REPO,
        env={**env, "DJANGO_SETTINGS_MODULE": "webapp.config.settings"},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    "key",
    [
        "django-insecure-steplab-development-key-do-not-use-in-production",
        "django-insecure-" + secrets.token_urlsafe(40),
    ],
)
def test_debug_off_refuses_the_development_key_even_when_set_explicitly(tmp_path, key):
    env = _clean_env(DEBUG="0", SECRET_KEY=key, STEPLAB_VAR_DIR=str(tmp_path))
    proc = _django("print('started')", env)
    assert proc.returncode != 0 and "started" not in proc.stdout
    assert "SECRET_KEY is the development key" in proc.stderr


def test_production_cookies_are_secure_and_http_only(tmp_path):
    env = _clean_env(DEBUG="0", SECRET_KEY=secrets.token_urlsafe(64), STEPLAB_VAR_DIR=str(tmp_path))
    proc = _django(
        "print(settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE, "
        "settings.SESSION_COOKIE_HTTPONLY, settings.SECURE_SSL_REDIRECT, "
        "settings.SECURE_HSTS_SECONDS > 0, settings.SESSION_COOKIE_SAMESITE)",
        env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "True", "True", "True", "Lax"]
