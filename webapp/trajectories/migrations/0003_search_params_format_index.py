"""Search finds tool parameters: the PostgreSQL search document of every trajectory is rebuilt
with the string and number values of its steps' parameters (webapp/trajectories/search.py). The
source format is indexed, for the filter menus' counts. SQLite searches by substring and needs
no document."""

from django.db import migrations, models

# The document as this migration builds it (search.SEARCH_DOCUMENT at the time).
DOCUMENT = """
UPDATE trajectories_trajectory t SET search_vector = to_tsvector('simple'::regconfig, left(
  coalesce(t.prompt, '') || ' ' || coalesce((
    SELECT string_agg(concat_ws(' ', s.thought, s.tool, p.text, translate(p.text, '/', ' '),
                                left(coalesce(s.observation, ''), 1000)), ' ' ORDER BY s.index)
    FROM trajectories_step s
    LEFT JOIN LATERAL (
      SELECT string_agg(v #>> '{}', ' ') AS text
      FROM jsonb_path_query(s.params, 'strict $.**') AS v
      WHERE jsonb_typeof(v) IN ('string', 'number')
    ) p ON true
    WHERE s.trajectory_id = t.id), ''), 300000))
WHERE t.id >= %s AND t.id < %s
"""
BATCH = 5000


def reindex(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT min(id), max(id) FROM trajectories_trajectory")
        low, high = cursor.fetchone()
        if low is None:
            return
        for start in range(low, high + 1, BATCH):
            cursor.execute(DOCUMENT, [start, start + BATCH])


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0002_step_fulltext_index")]
    operations = [
        migrations.AlterField(
            model_name="trajectory",
            name="source_format",
            field=models.CharField(blank=True, db_index=True, max_length=64),
        ),
        migrations.RunPython(reindex, migrations.RunPython.noop),
    ]
