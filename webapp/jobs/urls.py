from django.urls import path

from webapp.jobs import views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="list"),
    path("diagnostic/new/", views.diagnostic_new, name="diagnostic-new"),
    path("queues/", views.queues_fragment, name="queues"),
    path("<int:pk>/", views.job_detail, name="detail"),
    path("<int:pk>/progress/", views.job_progress, name="progress"),
    path("<int:pk>/cancel/", views.job_cancel, name="cancel"),
]
