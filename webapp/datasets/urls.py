from django.urls import path

from webapp.datasets import views

app_name = "datasets"

urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("new/", views.dataset_new, name="new"),
    path("<int:pk>/", views.dataset_detail, name="detail"),
    path("<int:pk>/files/<path:name>", views.dataset_file, name="file"),
]
