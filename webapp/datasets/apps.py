from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "webapp.datasets"
    label = "datasets"

    def ready(self) -> None:
        from webapp.datasets import jobs

        jobs.register()
