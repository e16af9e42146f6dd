from django.urls import path

from webapp.calibration import views

app_name = "calibration"

urlpatterns = [
    path("", views.queue_list, name="queues"),
    path("new/", views.queue_new, name="queue_new"),
    path("calibration/", views.calibration_page, name="calibration"),
    path("calibration/fit/", views.calibration_fit, name="fit"),
    path("calibration/<int:pk>/", views.calibration_detail, name="fitted"),
    path("calibration/<int:pk>/apply/", views.calibration_apply, name="apply"),
    path("calibration/<int:pk>/changes/", views.calibration_changes, name="changes"),
    path("<int:pk>/", views.queue_detail, name="queue"),
    path("<int:pk>/work/", views.queue_work, name="work"),
    path("<int:pk>/peek/", views.queue_peek, name="peek"),
    path("<int:pk>/items/<int:item>/", views.item_page, name="item"),
    path("<int:pk>/items/<int:item>/label/", views.label, name="label"),
    path("<int:pk>/items/<int:item>/first-error/", views.first_error, name="first_error"),
    path("<int:pk>/items/<int:item>/submit/", views.submit, name="submit"),
    path("<int:pk>/items/<int:item>/history/", views.item_history, name="history"),
]
