from django.urls import path

from webapp.datasets import token_pages, views

app_name = "datasets"

urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("new/", views.dataset_new, name="new"),
    path("<int:pk>/", views.dataset_detail, name="detail"),
    path("<int:pk>/files/<path:name>", views.dataset_file, name="file"),
    path("<int:pk>/rows/<int:index>/tokens/", token_pages.row_tokens, name="row_tokens"),
]
