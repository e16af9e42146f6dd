from django.urls import path

from webapp.rollouts import views

app_name = "rollouts"

urlpatterns = [
    path("", views.run_list, name="runs"),
    path("collect/", views.collect_new, name="collect"),
    path("collect/estimate/", views.collect_estimate, name="estimate"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/live/", views.run_live, name="run_live"),
    path("policies/", views.policy_list, name="policies"),
    path("policies/new/", views.policy_new, name="policy_new"),
    path("policies/<int:pk>/", views.policy_detail, name="policy"),
    path("policies/<int:pk>/edit/", views.policy_edit, name="policy_edit"),
    path("policies/<int:pk>/try/", views.policy_try, name="policy_try"),
    path("policies/<int:pk>/try/<int:job>/", views.policy_try_result, name="policy_try_result"),
    path("branch/<int:trajectory>/<int:step>/", views.branch_new, name="branch_new"),
    path("branches/<int:pk>/", views.branch_set_detail, name="branch_set"),
    path(
        "branches/<int:pk>/export/<str:kind>.jsonl",
        views.branch_set_export,
        name="branch_set_export",
    ),
    path("branches/of/<int:trajectory>/", views.trajectory_branches, name="trajectory_branches"),
]
