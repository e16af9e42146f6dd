from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "webapp.evaluation"
    label = "evaluation"

    def ready(self) -> None:
        from webapp.evaluation import jobs, selectors
        from webapp.training import hooks

        jobs.register()
        hooks.register_run_section(
            "evaluation/partials/checkpoint_curve.html", selectors.training_run_section
        )
