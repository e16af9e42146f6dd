from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="datasetsnapshot",
            name="token_check",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
