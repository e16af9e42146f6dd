"""The production shape: docker-compose.yml and the Dockerfile agree with the code.

Plain structural checks (no Docker engine, no database): the compose file is parsed with
``yaml.safe_load`` and the Dockerfile is read as text.
"""

from __future__ import annotations

import pathlib
import shlex

import pytest
import yaml

from webapp.jobs.names import ALL_QUEUES

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

APP_SERVICES = ("web", "worker", "gpu-worker", "rollout-worker")
#: the workers `docker compose up` starts (no profile); the scale-out profile adds rollout-worker
WORKER_SERVICES = ("worker", "gpu-worker")


@pytest.fixture(scope="module")
def compose() -> dict:
    assert COMPOSE_FILE.is_file(), f"{COMPOSE_FILE} is missing"
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict), "docker-compose.yml does not parse to a mapping"
    assert isinstance(data.get("services"), dict), "docker-compose.yml has no services mapping"
    return data


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


def _command_argv(service: dict) -> list[str]:
    """The command as an argv; for ``sh -c SCRIPT`` the words of the script."""
    command = service.get("command")
    assert command, f"service has no command: {service!r}"
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if len(argv) >= 3 and argv[0] in ("sh", "bash", "/bin/sh", "/bin/bash") and argv[1] == "-c":
        argv = shlex.split(argv[2])
    return argv


def _option(argv: list[str], *names: str) -> str | None:
    """The value of an option given as ``-Q value``, ``--queues value`` or ``--queues=value``."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name:
                assert i + 1 < len(argv), f"option {name} has no value in {argv!r}"
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _queues(service_name: str, service: dict) -> list[str]:
    argv = _command_argv(service)
    assert argv[:1] == ["celery"] and "worker" in argv, (
        f"{service_name} does not run a Celery worker: {argv!r}"
    )
    raw = _option(argv, "-Q", "--queues")
    assert raw, (
        f"{service_name} starts a worker without -Q, so it would consume Celery's default queue"
    )
    return [q.strip() for q in raw.split(",") if q.strip()]


def _volume_sources(service: dict) -> list[str]:
    sources = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            sources.append(volume.split(":", 1)[0])
        else:
            sources.append(str(volume.get("source")))
    return sources


def _volume_strings(service: dict) -> list[str]:
    strings = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            strings.append(volume)
        else:
            strings.append(f"{volume.get('source')}:{volume.get('target')}")
    return strings


def test_services_exist(services: dict) -> None:
    expected = {"postgres", "redis", "web", "worker", "gpu-worker"}
    missing = expected - set(services)
    assert not missing, f"docker-compose.yml lacks services: {sorted(missing)}"


def test_postgres_and_redis_have_healthchecks(services: dict) -> None:
    postgres = services["postgres"]
    assert str(postgres.get("image", "")).startswith("postgres:"), (
        f"postgres service uses image {postgres.get('image')!r}, expected postgres:*"
    )
    pg_test = " ".join(map(str, postgres.get("healthcheck", {}).get("test", [])))
    assert "pg_isready" in pg_test, f"postgres healthcheck does not run pg_isready: {pg_test!r}"
    assert "pgdata" in _volume_sources(postgres), "postgres does not keep its data in volume pgdata"

    redis = services["redis"]
    assert str(redis.get("image", "")).startswith("redis:"), (
        f"redis service uses image {redis.get('image')!r}, expected redis:*"
    )
    redis_test = " ".join(map(str, redis.get("healthcheck", {}).get("test", [])))
    assert "redis-cli" in redis_test and "ping" in redis_test, (
        f"redis healthcheck does not run redis-cli ping: {redis_test!r}"
    )
    assert "--appendonly yes" in str(redis.get("command", "")), (
        "redis runs without --appendonly yes, so queued tasks are lost on restart"
    )
    assert "redisdata" in _volume_sources(redis), "redis does not keep its data in volume redisdata"


def test_postgres_password_matches_database_url(services: dict) -> None:
    password = str(services["postgres"].get("environment", {}).get("POSTGRES_PASSWORD", ""))
    url = str(services["web"].get("environment", {}).get("DATABASE_URL", ""))
    assert password and password in url, (
        f"POSTGRES_PASSWORD {password!r} of the postgres service is not the one in DATABASE_URL {url!r}"
    )


def test_web_migrates_and_serves_on_8000(services: dict) -> None:
    web = services["web"]
    argv = _command_argv(web)
    assert "gunicorn" in argv, f"web does not run gunicorn: {argv!r}"
    assert "webapp.config.wsgi" in argv, (
        f"web's gunicorn does not serve webapp.config.wsgi: {argv!r}"
    )
    assert "manage.py" in argv and "migrate" in argv, f"web does not run migrations: {argv!r}"
    assert argv.index("migrate") < argv.index("gunicorn"), (
        f"web starts gunicorn before migrating: {argv!r}"
    )
    ports = [str(p) for p in web.get("ports", [])]
    assert any(p.endswith(":8000") or p == "8000" for p in ports), (
        f"web does not publish port 8000: {ports!r}"
    )


def test_cpu_worker_consumes_cpu_queues_and_mounts_docker_socket(services: dict) -> None:
    worker = services["worker"]
    queues = _queues("worker", worker)
    assert sorted(queues) == sorted(["default", "rollouts", "judge"]), (
        f"worker consumes {queues!r}, expected exactly default, rollouts, judge"
    )
    assert "gpu" not in queues, "the CPU worker must not consume the gpu queue"
    assert "/var/run/docker.sock:/var/run/docker.sock" in _volume_strings(worker), (
        "worker does not mount /var/run/docker.sock, so rollouts cannot start Docker sandboxes"
    )


def test_gpu_worker_consumes_gpu_one_at_a_time_on_an_nvidia_gpu(services: dict) -> None:
    gpu = services["gpu-worker"]
    queues = _queues("gpu-worker", gpu)
    assert queues == ["gpu"], f"gpu-worker consumes {queues!r}, expected exactly ['gpu']"
    concurrency = _option(_command_argv(gpu), "--concurrency", "-c")
    assert concurrency == "1", f"gpu-worker runs with --concurrency {concurrency!r}, expected 1"

    devices = gpu.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    assert devices, "gpu-worker reserves no devices (deploy.resources.reservations.devices)"
    assert any(
        d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices
    ), f"gpu-worker has no nvidia device reservation with the gpu capability: {devices!r}"
    assert "/var/run/docker.sock:/var/run/docker.sock" not in _volume_strings(gpu), (
        "gpu-worker mounts the Docker socket, which only the rollout worker needs"
    )


def test_every_queue_is_consumed_by_exactly_one_worker(services: dict) -> None:
    consumed: dict[str, list[str]] = {}
    for name in WORKER_SERVICES:
        for queue in _queues(name, services[name]):
            consumed.setdefault(queue, []).append(name)
    unknown = set(consumed) - set(ALL_QUEUES)
    assert not unknown, (
        f"workers consume queues not in webapp.jobs.names.ALL_QUEUES: {sorted(unknown)}"
    )
    unconsumed = set(ALL_QUEUES) - set(consumed)
    assert not unconsumed, (
        f"no worker consumes queues {sorted(unconsumed)}; their tasks would wait forever"
    )
    shared = {q: names for q, names in consumed.items() if len(names) > 1}
    assert not shared, f"queues consumed by more than one worker: {shared!r}"


def test_scale_out_profile_adds_sampler_only_workers_beside_one_trainer(services: dict) -> None:
    """docs/scaling.md: `docker compose --profile scale-out up --scale rollout-worker=N` adds N
    sampler workers (rollouts queue only, one task each) beside the default workers; the
    trainer stays the one gpu-worker, and the samplers read published versions from /data."""
    samplers = services.get("rollout-worker")
    assert samplers, "docker-compose.yml has no rollout-worker service (the scale-out profile)"
    assert samplers.get("profiles") == ["scale-out"], (
        f"rollout-worker must start only with --profile scale-out, not {samplers.get('profiles')!r}"
    )
    assert _queues("rollout-worker", samplers) == ["rollouts"], (
        "rollout-worker must consume the rollouts queue only (samplers), not the trainer's gpu queue"
    )
    argv = _command_argv(samplers)
    assert _option(argv, "--concurrency", "-c") == "1", "one sampler per rollout-worker replica"
    assert int(samplers.get("deploy", {}).get("replicas", 1)) >= 2, "several samplers by default"
    profiled = [n for n, s in services.items() if s.get("profiles")]
    assert profiled == ["rollout-worker"], f"only the samplers are profiled, not {profiled!r}"
    trainers = [n for n in WORKER_SERVICES if "gpu" in _queues(n, services[n])]
    assert trainers == ["gpu-worker"], f"exactly one trainer (gpu queue) worker, not {trainers!r}"


def test_app_services_share_image_and_environment(services: dict) -> None:
    web = services["web"]
    assert web.get("build"), "web has no build section, so `docker compose build` builds nothing"
    for name in APP_SERVICES:
        service = services[name]
        assert service.get("build") == web.get("build"), (
            f"{name} builds {service.get('build')!r}, web builds {web.get('build')!r}"
        )
        assert service.get("image") == web.get("image"), (
            f"{name} uses image {service.get('image')!r}, web uses {web.get('image')!r}"
        )
        assert service.get("environment") == web.get("environment"), (
            f"{name}'s environment differs from web's"
        )

    env = web.get("environment")
    assert isinstance(env, dict), f"web's environment is not a mapping: {env!r}"
    assert str(env.get("DATABASE_URL", "")).startswith("postgres://"), (
        f"DATABASE_URL is not a PostgreSQL URL: {env.get('DATABASE_URL')!r}"
    )
    assert "@postgres:" in str(env.get("DATABASE_URL", "")), (
        f"DATABASE_URL does not point at the postgres service: {env.get('DATABASE_URL')!r}"
    )
    assert str(env.get("CELERY_BROKER_URL", "")).startswith("redis://redis:"), (
        f"CELERY_BROKER_URL does not point at the redis service: {env.get('CELERY_BROKER_URL')!r}"
    )
    assert env.get("DEBUG") == "0", f"DEBUG is {env.get('DEBUG')!r}, expected the string '0'"
    assert env.get("SECRET_KEY"), "SECRET_KEY is not passed to the app services"
    assert "SECRET_KEY" in str(env["SECRET_KEY"]) and ":?" in str(env["SECRET_KEY"]), (
        "SECRET_KEY should be required from the environment (${SECRET_KEY:?...}), not hard-coded"
    )


def test_app_services_wait_for_healthy_postgres_and_redis(services: dict) -> None:
    for name in APP_SERVICES:
        depends_on = services[name].get("depends_on")
        assert isinstance(depends_on, dict), (
            f"{name}'s depends_on is not a mapping with conditions: {depends_on!r}"
        )
        for dependency in ("postgres", "redis"):
            condition = (depends_on.get(dependency) or {}).get("condition")
            assert condition == "service_healthy", (
                f"{name} does not wait for {dependency} to be healthy (condition: {condition!r})"
            )


def test_named_volumes_are_declared_and_used(compose: dict, services: dict) -> None:
    declared = set(compose.get("volumes") or {})
    expected = {"pgdata", "redisdata", "steplabdata"}
    assert expected <= declared, f"named volumes not declared: {sorted(expected - declared)}"

    used = {src for service in services.values() for src in _volume_sources(service)}
    unused = declared - used
    assert not unused, f"declared volumes no service uses: {sorted(unused)}"
    named_used = {src for src in used if not src.startswith(("/", ".", "~"))}
    undeclared = named_used - declared
    assert not undeclared, f"services use undeclared named volumes: {sorted(undeclared)}"

    for name in APP_SERVICES:
        assert "steplabdata:/data" in _volume_strings(services[name]), (
            f"{name} does not mount steplabdata at /data (STEPLAB_DATA_DIR)"
        )


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    assert DOCKERFILE.is_file(), f"{DOCKERFILE} is missing"
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, args = full.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends with a dangling line continuation"
    return instructions


def test_dockerfile_runs_as_non_root() -> None:
    users = [args for keyword, args in _dockerfile_instructions() if keyword == "USER"]
    assert users, "the Dockerfile has no USER instruction, so the image runs as root"
    final_user = users[-1].split(":", 1)[0]
    assert final_user not in ("root", "0"), f"the image's final USER is {users[-1]!r} (root)"


def test_dockerfile_installs_with_constraints() -> None:
    runs = [args for keyword, args in _dockerfile_instructions() if keyword == "RUN"]
    installs = [run for run in runs if "pip install" in run]
    assert installs, "the Dockerfile never runs pip install"
    assert any("-c constraints.txt" in run for run in installs), (
        f"no pip install in the Dockerfile uses -c constraints.txt (torch pin): {installs!r}"
    )


def test_dockerfile_copies_paths_that_exist() -> None:
    copies = [args for keyword, args in _dockerfile_instructions() if keyword in ("COPY", "ADD")]
    assert copies, "the Dockerfile copies nothing into the image"
    copied: set[str] = set()
    for args in copies:
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        assert len(words) >= 2, f"COPY without source and destination: {args!r}"
        for source in words[:-1]:
            copied.add(source.rstrip("/"))
            assert (ROOT / source).exists(), f"the Dockerfile copies {source!r}, not in the repo"
    for needed in ("pyproject.toml", "constraints.txt", "manage.py", "webapp", "workers"):
        assert needed in copied, f"the Dockerfile does not copy {needed!r} into the image"
