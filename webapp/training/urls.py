from django.urls import path

from webapp.training import views

app_name = "training"

urlpatterns = [
    path("", views.run_list, name="list"),
    path("new/", views.run_new, name="new"),
    path("preview/", views.run_preview, name="preview"),
    path("tiny-model/", views.tiny_model_create, name="tiny_create"),
    path("tiny-model/<int:job>/", views.tiny_model_result, name="tiny_result"),
    path("<int:pk>/", views.run_detail, name="detail"),
    path("checkpoints/<int:pk>/register/", views.checkpoint_register, name="register"),
    path("lineage/<int:policy>/", views.lineage, name="lineage"),
]
