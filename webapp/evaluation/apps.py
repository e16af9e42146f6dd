from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "webapp.evaluation"
    label = "evaluation"
