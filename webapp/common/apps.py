from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "webapp.common"
    label = "common"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from webapp.common.stored_values import tolerate_unreadable_dates

        connection_created.connect(tolerate_unreadable_dates, dispatch_uid="tolerate_dates")
