from django.apps import AppConfig


class DomainsConfig(AppConfig):
    name = "webapp.domains"
    label = "domains"
