"""Reward-model versions freeze the domain profile version they score with; scores record it.

Until now the scoring job read the domain's *current* profile whenever it ran, so a version had
no profile of its own. This migration gives every existing version the profile version that is
current at migration time (the profile of the version's domain; none when that domain has no
profile in the database, in which case the version scores with the built-in profile of that
name, fixed in code). From then on editing a profile never changes what an existing version
computes; a version created after an edit scores with the edited profile.

Existing scores record the profile version that was current when they were stored (the newest
version of the domain's profile created before the score; none before the domain had one in the
database), which is the one the scoring job read unless the profile was edited while that job
ran. So a score made before a profile edit shows the older profile version, and may differ from
what its reward-model version computes from now on.
"""

import django.db.models.deletion
from django.db import migrations, models


def freeze_profiles(apps, schema_editor):
    DomainProfile = apps.get_model("domains", "DomainProfile")
    RewardModel = apps.get_model("rewards", "RewardModel")
    TrajectoryScore = apps.get_model("rewards", "TrajectoryScore")
    for domain in RewardModel.objects.values_list("domain", flat=True).distinct():
        current = DomainProfile.objects.filter(name=domain, is_current=True).first()
        if current is not None:
            RewardModel.objects.filter(domain=domain).update(profile=current)
        versions = list(DomainProfile.objects.filter(name=domain).order_by("version"))
        for position, version in enumerate(versions):
            scores = TrajectoryScore.objects.filter(
                reward_model__domain=domain, scored_at__gte=version.created_at
            )
            if position + 1 < len(versions):
                scores = scores.filter(scored_at__lt=versions[position + 1].created_at)
            scores.update(profile=version)


class Migration(migrations.Migration):
    dependencies = [
        ("domains", "0001_initial"),
        ("rewards", "0002_stepscore_raw_total"),
    ]

    operations = [
        migrations.AddField(
            model_name="rewardmodel",
            name="profile",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="reward_models",
                to="domains.domainprofile",
            ),
        ),
        migrations.AddField(
            model_name="trajectoryscore",
            name="profile",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="domains.domainprofile",
            ),
        ),
        migrations.RunPython(freeze_profiles, migrations.RunPython.noop),
    ]
