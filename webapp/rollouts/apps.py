from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    name = "webapp.rollouts"
    label = "rollouts"

    def ready(self) -> None:
        from webapp.common.seed import register_seeder
        from webapp.rollouts import jobs
        from webapp.rollouts.services import policies_seed_builtin

        jobs.register()
        register_seeder("policies", policies_seed_builtin)
