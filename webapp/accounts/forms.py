from __future__ import annotations

from django import forms

from webapp.accounts.models import Role


class UserCreateForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    password = forms.CharField(
        widget=forms.PasswordInput, help_text="At least 8 characters, not too common."
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
