from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "webapp.tasks"
    label = "tasks"
