from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    name = "webapp.calibration"
    label = "calibration"
