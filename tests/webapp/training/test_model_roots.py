"""A base model or a local policy's model is read only from the model roots (the data directory
and STEPLAB_MODEL_ROOTS): a path elsewhere on the server is refused, symlinks resolved first."""

from __future__ import annotations

import pytest
from django.conf import settings

from webapp.common.errors import ApplicationError
from webapp.rollouts.models import Policy
from webapp.rollouts.services import policy_build, policy_save
from webapp.training.services import base_model_dir

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.mark.parametrize("path", ["/", "/etc", "VAR_DIR", "DATA/../.."])
def test_a_base_model_outside_the_roots_is_refused(path):
    path = (
        str(settings.VAR_DIR)
        if path == "VAR_DIR"
        else path.replace("DATA", str(settings.STEPLAB_DATA_DIR))
    )
    with pytest.raises(ApplicationError, match="outside the directories"):
        base_model_dir(base_model=path)


def test_a_model_under_the_data_directory_is_accepted_and_a_link_out_is_not(tmp_path):
    models = settings.STEPLAB_DATA_DIR / "models"
    (models / "tiny").mkdir(parents=True, exist_ok=True)
    assert base_model_dir(base_model=str(models / "tiny")) == str((models / "tiny").resolve())
    link = models / "escape"
    if not link.exists():
        link.symlink_to(tmp_path)
    with pytest.raises(ApplicationError, match="outside the directories"):
        base_model_dir(base_model=str(link))


def test_a_local_policy_is_checked_when_saved_and_when_built():
    with pytest.raises(ApplicationError, match="outside the directories"):
        policy_save(name="peek", kind="local", parameters={"model_dir": "/etc"})
    row = Policy.objects.create(name="edited", kind="local", parameters={"model_dir": "/etc"})
    with pytest.raises(ApplicationError, match="outside the directories"):
        policy_build(policy=row)
