from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    name = "webapp.calibration"
    label = "calibration"

    def ready(self) -> None:
        from webapp.accounts.permissions import Need
        from webapp.calibration import jobs, selectors
        from webapp.trajectories import bulk, gdi

        jobs.register()
        gdi.register_feedback_source(selectors.gdi_feedback)
        bulk.register(
            bulk.BulkAction(
                "annotate",
                "Add to an annotation queue",
                "calibration:queue_new",
                Need.OPERATE,
                "post",
                20,
            )  # fmt: skip
        )
