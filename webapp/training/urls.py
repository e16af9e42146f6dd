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
    path("rl/new/", views.rl_new, name="rl_new"),
    path("rl/preview/", views.rl_preview, name="rl_preview"),
    path("rl/<int:pk>/", views.rl_detail, name="rl_detail"),
    path("rl/<int:pk>/steps/<int:step>/", views.rl_step, name="rl_step"),
    path("rl/<int:pk>/samplers/", views.rl_add_sampler, name="rl_add_sampler"),
    path("rl/<int:pk>/cancel/", views.rl_cancel, name="rl_cancel"),
]
