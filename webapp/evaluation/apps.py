from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "webapp.evaluation"
    label = "evaluation"

    def ready(self) -> None:
        from webapp.evaluation import services

        services.register()
