"""A GIN index for full-text search over steps (PostgreSQL only; SQLite searches by substring)."""

from django.db import migrations

FTS_EXPRESSION = (
    "to_tsvector('simple'::regconfig, coalesce(thought, '') || ' ' || coalesce(tool, '') || ' ' || "
    "coalesce(observation, ''))"
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS trajectories_step_fts ON trajectories_step USING GIN ({FTS_EXPRESSION})"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS trajectories_step_fts")


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
