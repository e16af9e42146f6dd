from django.urls import include, path

from webapp.accounts import views as account_views
from webapp.api.root import urls as api_urls
from webapp.jobs import views as job_views
from webapp.mcp.endpoint import mcp_endpoint

urlpatterns = [
    path("", job_views.dashboard, name="dashboard"),
    path("login/", account_views.login, name="login"),
    path("logout/", account_views.logout, name="logout"),
    path("accounts/", include("webapp.accounts.urls")),
    path("jobs/", include("webapp.jobs.urls")),
    path("tasks/", include("webapp.tasks.urls")),
    path("tasks/", include("webapp.rollouts.health_urls")),  # task health (docs/task-health.md)
    path("domains/", include("webapp.domains.urls")),
    path("trajectories/", include("webapp.trajectories.urls")),
    path("rollouts/", include("webapp.rollouts.urls")),
    path("rewards/", include("webapp.rewards.urls")),
    path("annotate/", include("webapp.calibration.urls")),
    path("datasets/", include("webapp.datasets.urls")),
    path("training/", include("webapp.training.urls")),
    path("leaderboards/", include("webapp.evaluation.urls")),
    path("tokens/", include("webapp.api.urls")),
    path("api/v1/", api_urls()),
    path("mcp", mcp_endpoint, name="mcp"),  # Steplab's MCP server over HTTP (docs/mcp.md)
]
