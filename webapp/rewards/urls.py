from django.urls import path

from webapp.rewards import views

app_name = "rewards"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("rubrics/<str:domain>/", views.rubrics, name="rubrics"),
    path("versions/new/<str:domain>/", views.version_new, name="version_new"),
    path("versions/<int:pk>/", views.version_detail, name="version"),
    path("score/", views.score, name="score"),
    path("trajectories/<int:pk>/scores/", views.trajectory_scores, name="trajectory_scores"),
    path("pairs/", views.pairs, name="pairs"),
    path("pairs/build/", views.pairs_build, name="pairs_build"),
]
