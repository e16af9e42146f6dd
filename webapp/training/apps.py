from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "webapp.training"
    label = "training"

    def ready(self) -> None:
        from webapp.training import jobs

        jobs.register()
