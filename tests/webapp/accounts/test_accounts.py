"""Logging in and out, the first local admin, and user management by an admin."""

from __future__ import annotations

import stat

import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.urls import reverse

from webapp.accounts.models import Role
from webapp.accounts.permissions import Need, user_can
from webapp.accounts.services import ensure_local_admin

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

STRONG_PASSWORD = "violet-kettle-harbour-81"


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def logged_in_user_id(client):
    return client.session.get(SESSION_KEY)


def assert_sent_to_login(response, path: str = "/"):
    expected = f"{reverse('login')}?next={path}"
    assert response.status_code == 302 and response["Location"] == expected, (
        f"GET {path} should redirect to {expected}, got {response.status_code} "
        f"{response.get('Location')!r}"
    )


@pytest.fixture
def no_admin_env(monkeypatch):
    monkeypatch.delenv("STEPLAB_ADMIN_USERNAME", raising=False)
    monkeypatch.delenv("STEPLAB_ADMIN_PASSWORD", raising=False)


@pytest.fixture
def admin_client(client, make_user):
    admin = make_user(Role.ADMIN)
    client.force_login(admin)
    client.user = admin
    return client


# --- logging in and out -------------------------------------------------------------------------


def test_login_with_the_right_password_lands_on_the_dashboard(client, make_user):
    user = make_user(Role.VIEWER)
    response = client.post(
        reverse("login"), {"username": user.username, "password": user.raw_password}
    )
    assert response.status_code == 302 and response["Location"] == reverse("dashboard") == "/", (
        f"a good login should redirect to the dashboard '/', got {response.status_code} "
        f"{response.get('Location')!r}"
    )
    assert str(logged_in_user_id(client)) == str(user.pk), "the session is not logged in"
    dashboard = client.get("/")
    assert dashboard.status_code == 200, f"the dashboard answered {dashboard.status_code}"


def test_login_with_a_wrong_password_shows_an_error_and_stays_logged_out(client, make_user):
    user = make_user(Role.VIEWER)
    response = client.post(reverse("login"), {"username": user.username, "password": "wrong-one"})
    assert response.status_code == 200, (
        f"a failed login should show the form again, got {response.status_code}"
    )
    content = response.content.decode()
    assert 'class="error"' in content and "correct username and password" in content, (
        "a failed login shows no error message"
    )
    assert logged_in_user_id(client) is None, "a wrong password logged the user in"
    assert_sent_to_login(client.get("/"))


def test_logout_is_a_post_and_afterwards_the_dashboard_asks_for_login(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    refused = client.get(reverse("logout"))
    assert refused.status_code == 405, f"GET /logout/ should be refused, got {refused.status_code}"
    assert logged_in_user_id(client) is not None, "a GET to /logout/ logged the user out"

    response = client.post(reverse("logout"))
    assert response.status_code == 302 and response["Location"] == reverse("login"), (
        f"logout should redirect to the login page, got {response.status_code} "
        f"{response.get('Location')!r}"
    )
    assert logged_in_user_id(client) is None, "POST /logout/ left the session logged in"
    assert_sent_to_login(client.get("/"))


# --- the first local admin ----------------------------------------------------------------------


def test_ensure_local_admin_creates_one_admin_with_a_random_password_file(
    client, tmp_path, no_admin_env
):
    User = get_user_model()
    result = ensure_local_admin(var_dir=tmp_path)
    assert result.created, "no admin existed, so ensure_local_admin should have created one"
    password_file = tmp_path / "admin-password.txt"
    assert result.password_file == password_file and password_file.is_file(), (
        f"the password should be written to {password_file}, result says {result.password_file}"
    )
    mode = stat.S_IMODE(password_file.stat().st_mode)
    assert mode == 0o600, f"{password_file} has mode {oct(mode)}, expected 0o600"
    fields = dict(
        line.split(": ", 1) for line in password_file.read_text().splitlines() if ": " in line
    )
    assert fields.get("username") == result.username and fields.get("password"), (
        f"{password_file} should hold 'username: ...' and 'password: ...' lines"
    )
    admins = User.objects.filter(role=Role.ADMIN)
    assert admins.count() == 1, f"expected one admin, found {admins.count()}"
    assert admins.get().username == result.username

    response = client.post(
        reverse("login"), {"username": fields["username"], "password": fields["password"]}
    )
    assert response.status_code == 302 and logged_in_user_id(client) is not None, (
        "the password written to admin-password.txt does not log in"
    )

    again = ensure_local_admin(var_dir=tmp_path)
    assert not again.created and again.password_file is None, (
        "a second ensure_local_admin call should do nothing when an admin exists"
    )
    assert User.objects.count() == 1, f"the second call created users: {User.objects.count()}"
    assert password_file.read_text().endswith(f"password: {fields['password']}\n"), (
        "the second call rewrote the password file"
    )


def test_ensure_local_admin_uses_the_environment_and_writes_no_file(client, tmp_path, monkeypatch):
    monkeypatch.setenv("STEPLAB_ADMIN_USERNAME", "chief")
    monkeypatch.setenv("STEPLAB_ADMIN_PASSWORD", STRONG_PASSWORD)
    result = ensure_local_admin(var_dir=tmp_path)
    assert result.created and result.username == "chief", f"unexpected result {result}"
    assert result.password_file is None and list(tmp_path.iterdir()) == [], (
        f"with STEPLAB_ADMIN_PASSWORD set no file should be written, found "
        f"{list(tmp_path.iterdir())}"
    )
    admin = get_user_model().objects.get(username="chief")
    assert admin.role == Role.ADMIN and admin.is_superuser, (
        f"the environment admin has role={admin.role}, is_superuser={admin.is_superuser}"
    )
    client.post(reverse("login"), {"username": "chief", "password": STRONG_PASSWORD})
    assert str(logged_in_user_id(client)) == str(admin.pk), (
        "STEPLAB_ADMIN_PASSWORD does not log the admin in"
    )


# --- managing users -----------------------------------------------------------------------------


def test_an_admin_creates_a_user_with_a_role(admin_client):
    response = admin_client.post(
        reverse("accounts:users"),
        {"username": "newbie", "email": "", "password": STRONG_PASSWORD, "role": Role.ANNOTATOR},
        follow=True,
    )
    assert response.redirect_chain == [(reverse("accounts:users"), 302)], (
        f"creating a user should redirect back to the users page, got {response.redirect_chain}"
        f" ({response.status_code})"
    )
    user = get_user_model().objects.filter(username="newbie").first()
    assert user is not None, "the user was not created"
    assert user.role == Role.ANNOTATOR, f"the user has role {user.role}, expected annotator"
    assert user.check_password(STRONG_PASSWORD), "the user's password was not set"
    assert "Created newbie (Annotator)." in messages_of(response), (
        f"no confirmation shown; messages: {messages_of(response)}"
    )


def test_an_admin_changes_a_role(admin_client, make_user):
    user = make_user(Role.VIEWER)
    response = admin_client.post(
        reverse("accounts:user-update", kwargs={"pk": user.pk}),
        {"role": Role.OPERATOR},
        follow=True,
    )
    user.refresh_from_db()
    assert user.role == Role.OPERATOR, f"the role is {user.role}, expected operator"
    assert f"{user.username} is now operator." in messages_of(response), (
        f"no confirmation shown; messages: {messages_of(response)}"
    )


def test_an_admin_cannot_remove_their_own_admin_role(admin_client):
    admin = admin_client.user
    response = admin_client.post(
        reverse("accounts:user-update", kwargs={"pk": admin.pk}),
        {"role": Role.VIEWER},
        follow=True,
    )
    admin.refresh_from_db()
    assert admin.role == Role.ADMIN, f"the admin demoted themselves to {admin.role}"
    assert any("cannot take the admin role from yourself" in m for m in messages_of(response)), (
        f"no explanation shown; messages: {messages_of(response)}"
    )
    assert "cannot take the admin role from yourself" in response.content.decode(), (
        "the explanation is not rendered on the page"
    )


def test_a_weak_password_is_rejected_and_no_user_is_created(admin_client):
    response = admin_client.post(
        reverse("accounts:users"),
        {"username": "weakling", "email": "", "password": "password", "role": Role.VIEWER},
    )
    assert response.status_code == 200, (
        f"a rejected user should re-show the form, got {response.status_code}"
    )
    content = response.content.decode()
    assert "Password rejected" in content and "too common" in content, (
        "the page does not say why the password was rejected"
    )
    assert not get_user_model().objects.filter(username="weakling").exists(), (
        "a user with a weak password was created"
    )


def test_a_non_admin_cannot_create_users(client, make_user):
    client.force_login(make_user(Role.OPERATOR))
    response = client.post(
        reverse("accounts:users"),
        {"username": "sneaky", "email": "", "password": STRONG_PASSWORD, "role": Role.ADMIN},
    )
    assert response.status_code == 403, f"an operator got {response.status_code}, expected 403"
    assert not get_user_model().objects.filter(username="sneaky").exists(), (
        "an operator created a user"
    )


def test_a_superuser_with_the_viewer_role_still_counts_as_admin(client, django_user_model):
    boss = django_user_model.objects.create_superuser(
        username="boss", password=STRONG_PASSWORD, role=Role.VIEWER
    )
    assert boss.role == Role.VIEWER, f"the role column should stay viewer, got {boss.role}"
    assert boss.effective_role == Role.ADMIN, (
        f"a superuser's effective_role is {boss.effective_role}, expected admin"
    )
    assert user_can(boss, Need.ADMINISTER), "a superuser cannot administer"
    client.force_login(boss)
    response = client.get(reverse("accounts:users"))
    assert response.status_code == 200, (
        f"a superuser with role viewer got {response.status_code} on the users page"
    )


def test_first_admin_name_taken_by_a_non_admin_is_a_clear_error(tmp_path, make_user, monkeypatch):
    from webapp.common.errors import ApplicationError

    make_user(Role.VIEWER, username="boss")
    monkeypatch.setenv("STEPLAB_ADMIN_USERNAME", "boss")
    with pytest.raises(ApplicationError, match="non-admin user named 'boss' exists"):
        ensure_local_admin(var_dir=tmp_path)
    assert not (tmp_path / "admin-password.txt").exists()


def test_a_weak_admin_password_from_the_environment_is_rejected(tmp_path, monkeypatch):
    from webapp.common.errors import ApplicationError

    monkeypatch.setenv("STEPLAB_ADMIN_PASSWORD", "123")
    with pytest.raises(ApplicationError, match="STEPLAB_ADMIN_PASSWORD is rejected"):
        ensure_local_admin(var_dir=tmp_path)
    assert not get_user_model().objects.exists()


def test_the_403_page_says_which_role_is_needed(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    response = client.get(reverse("jobs:diagnostic-new"))
    assert response.status_code == 403
    assert b"This needs the operator role or higher." in response.content
    assert b"Back to the dashboard" in response.content
