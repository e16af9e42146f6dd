"""Full-text search on PostgreSQL: a tsvector per trajectory (its prompt, and every step's thought,
tool and the head of its observation), GIN-indexed. Filled by the import and finish services.
SQLite searches by substring instead, so this migration does nothing there."""

from django.db import migrations


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE trajectories_trajectory ADD COLUMN IF NOT EXISTS search_vector tsvector"
        )
        schema_editor.execute(
            "CREATE INDEX IF NOT EXISTS trajectories_trajectory_search ON trajectories_trajectory USING GIN (search_vector)"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS trajectories_trajectory_search")
        schema_editor.execute(
            "ALTER TABLE trajectories_trajectory DROP COLUMN IF EXISTS search_vector"
        )


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
