from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "webapp.tasks"
    label = "tasks"

    def ready(self) -> None:
        from webapp.common.seed import register_seeder
        from webapp.tasks.services import task_sets_seed_builtin

        register_seeder("task sets", task_sets_seed_builtin)
