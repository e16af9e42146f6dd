from django.apps import AppConfig


class DomainsConfig(AppConfig):
    name = "webapp.domains"
    label = "domains"

    def ready(self) -> None:
        from webapp.common.seed import register_seeder
        from webapp.domains.services import profiles_seed_builtin

        register_seeder("domain profiles", profiles_seed_builtin)
