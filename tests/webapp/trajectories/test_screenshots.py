"""A step's screenshot is served from the data directory's screenshots folder only: the image
of a browser episode's step shows, and a path an imported log names outside that folder (an
absolute path, ``..``, a symlink out, a file that is not an image) is never read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Step, TaskRef, Trajectory
from webapp.accounts.models import Role
from webapp.trajectories import services
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.django_db]

JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64 + b"\xff\xd9"


def _import(shots: list[str]) -> TrajectoryRow:
    steps = [
        Step(index=i, tool="click", params={"element_id": str(i)}, observation="page",
             metadata={"screenshot": shot})
        for i, shot in enumerate(shots)
    ]  # fmt: skip
    services.trajectories_import(
        results=[
            ImportResult(
                "shots.json", "steplab", "1", [Trajectory(task=TaskRef(id="t"), steps=steps)]
            )
        ]
    )
    return TrajectoryRow.objects.get()


@pytest.fixture
def viewer(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    return client


@pytest.fixture
def shots_dir():
    folder = Path(settings.STEPLAB_DATA_DIR) / "screenshots" / "episode-test"
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_steps_screenshot_shows_and_paths_outside_the_folder_are_refused(
    viewer, shots_dir, tmp_path
):
    good = shots_dir / "step-000.jpg"
    good.write_bytes(JPEG)
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(b"not for you")
    (shots_dir / "link.jpg").symlink_to(outside)
    (shots_dir / "notes.txt").write_text("text")
    row = _import(
        [
            str(good),  # absolute, inside: shown
            "screenshots/episode-test/step-000.jpg",  # relative to the data directory: shown
            str(outside),  # absolute, outside
            "screenshots/../../../../../../etc/passwd",
            "screenshots/episode-test/link.jpg",  # a symlink out of the folder
            "screenshots/episode-test/notes.txt",  # not an image
        ]
    )

    def get(index):
        return viewer.get(reverse("trajectories:screenshot", args=[row.pk, index]))

    for index in (0, 1):
        response = get(index)
        assert response.status_code == 200 and response["Content-Type"] == "image/jpeg"
        assert b"".join(response.streaming_content) == JPEG
    for index in (2, 3, 4, 5, 99):
        assert get(index).status_code == 404, index

    body = viewer.get(reverse("trajectories:steps", args=[row.pk])).content.decode()
    url = reverse("trajectories:screenshot", args=[row.pk, 0])
    assert f'<img src="{url}"' in body and body.count('data-testid="screenshot"') == 6


def test_a_step_without_a_screenshot_has_no_thumbnail(viewer):
    row = _import([])
    body = viewer.get(reverse("trajectories:detail", args=[row.pk])).content.decode()
    assert 'data-testid="screenshot"' not in body


@pytest.mark.parametrize("on", [True, False])
def test_the_app_gives_browser_episodes_the_data_directory_and_the_screenshot_setting(settings, on):
    from webapp.rollouts.services import environment_make

    settings.STEPLAB_BROWSER_SCREENSHOTS = on
    env = environment_make(env_id="steplab/browser")
    try:
        assert env.unwrapped.screenshots is on
        assert Path(env.unwrapped.data_dir) == Path(settings.STEPLAB_DATA_DIR)
    finally:
        env.close()
    other = environment_make(env_id="steplab/arithmetic")  # takes neither: nothing given
    other.close()


def test_deleting_a_trajectory_removes_its_screenshots_and_nothing_outside_the_folder(
    shots_dir, tmp_path, django_capture_on_commit_callbacks
):
    mine = shots_dir / "step-000.jpg"
    mine.write_bytes(JPEG)
    outside = tmp_path / "keep.jpg"
    outside.write_bytes(JPEG)
    row = _import([str(mine), str(outside), "screenshots/../../keep.jpg"])
    with django_capture_on_commit_callbacks(execute=True):
        services.trajectory_delete(trajectory=row)
    assert not mine.exists()
    assert outside.exists(), "a path an imported log names outside the folder is never touched"
    assert not shots_dir.exists(), "the episode's folder goes once empty"
