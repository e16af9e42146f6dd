from django.apps import AppConfig


class TrajectoriesConfig(AppConfig):
    name = "webapp.trajectories"
    label = "trajectories"

    def ready(self) -> None:
        from webapp.accounts.permissions import Need
        from webapp.trajectories import bulk, jobs

        jobs.register()
        bulk.register(
            bulk.BulkAction(
                "export", "Export selected (JSONL)", "trajectories:export_selection", Need.READ
            )
        )
