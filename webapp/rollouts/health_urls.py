"""Task health pages (docs/task-health.md), served under /tasks/ beside the tasks app's pages:
their figures need the policies and trajectories, which the tasks app below cannot import."""

from django.urls import path

from webapp.rollouts import views

app_name = "health"

urlpatterns = [
    path("sets/<int:pk>/health/", views.task_set_health, name="set"),
    path("<int:pk>/health/", views.task_health, name="task"),
    path("<int:pk>/health/episodes/", views.task_health_episodes, name="episodes"),
]
