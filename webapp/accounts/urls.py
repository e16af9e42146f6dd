from django.urls import path

from webapp.accounts import views

app_name = "accounts"

urlpatterns = [
    path("users/", views.user_list, name="users"),
    path("users/<int:pk>/", views.user_update, name="user-update"),
]
