from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts import selectors, services
from webapp.accounts.forms import RoleForm, UserCreateForm
from webapp.accounts.models import Role
from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError

login = requires(Need.PUBLIC)(auth_views.LoginView.as_view(redirect_authenticated_user=True))
logout = requires(Need.READ)(auth_views.LogoutView.as_view())


@requires(Need.ADMINISTER)
def user_list(request):
    form = UserCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = services.user_create(**form.cleaned_data)
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Created {user.username} ({user.get_role_display()}).")
            return redirect("accounts:users")
    users = selectors.user_list()
    return render(
        request,
        "accounts/users.html",
        {"active_area": "users", "users": users, "form": form, "roles": Role.choices},
    )


@requires(Need.ADMINISTER)
@require_POST
def user_update(request, pk: int):
    user = selectors.user_get(id=pk)
    try:
        if "role" in request.POST:
            form = RoleForm(request.POST)
            if not form.is_valid():
                raise ApplicationError("Pick one of the listed roles.")
            services.user_set_role(
                user=user, role=form.cleaned_data["role"], acting_user=request.user
            )
            messages.success(request, f"{user.username} is now {user.get_role_display().lower()}.")
        elif "active" in request.POST:
            active = request.POST["active"] == "1"
            services.user_set_active(user=user, active=active, acting_user=request.user)
            messages.success(
                request, f"{user.username} {'activated' if active else 'deactivated'}."
            )
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("accounts:users")
