from django.urls import path

from webapp.domains import views

app_name = "domains"

urlpatterns = [
    path("", views.profile_list, name="list"),
    path("<slug:name>/", views.profile_detail, name="detail"),
    path("<slug:name>/v<int:version>/", views.profile_detail, name="version"),
    path("<slug:name>/edit/", views.profile_edit, name="edit"),
]
