"""Schema 1.1: message steps (user, assistant and system turns) beside tool steps. Adds the
step's kind, role and text and the trajectory's message count, then rebuilds the message steps
of every imported trajectory from its kept raw source (else from the dialogue its metadata kept)
and moves every step score, label, label edit and first-error mark with its step
(webapp/trajectories/upgrade.py). Reversible: the reverse removes the message steps again."""

from django.db import migrations, models

from webapp.trajectories.upgrade import downgrade_stored, upgrade_stored


def forward(apps, schema_editor):
    upgrade_stored(apps, schema_editor)


def backward(apps, schema_editor):
    downgrade_stored(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("trajectories", "0003_search_params_format_index"),
        ("rewards", "0003_reward_model_profile"),
        ("calibration", "0002_simulated_annotation"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="kind",
            field=models.CharField(
                choices=[("tool", "Tool call"), ("message", "Message")],
                default="tool",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="step",
            name="role",
            field=models.CharField(blank=True, default="", max_length=16),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="step",
            name="text",
            field=models.TextField(blank=True, default=""),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="step",
            name="tool",
            field=models.CharField(blank=True, db_index=True, max_length=200),
        ),
        migrations.AddField(
            model_name="trajectory",
            name="message_count",
            field=models.IntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="trajectory",
            name="schema_version",
            field=models.CharField(default="1.1", max_length=16),
        ),
        migrations.RunPython(forward, backward, elidable=False),
    ]
