"""``steplab/agentgym``: a client for AgentGym's HTTP environment servers, one server per
environment, the protocol picked by ``env_name``::

    env = make("steplab/agentgym", base_url="http://127.0.0.1:36001", env_name="webshop")
    ts = env.reset(task={"prompt": "WebShop #3", "metadata": {"data_idx": 3}})
    ts = env.step({"tool": "act", "params": {"action": "search[red shoes]"}})

Every protocol below was read from the servers' code in ``WooooDyy/AgentGym`` at commit
``3ef9235d23e68e7c2920c5422ad957dc8ced5c6c`` (``agentenv-*/agentenv_*/server.py``, its request
models and environment wrapper; the official clients in ``agentenv/agentenv/envs/*.py`` for how
observation, reward and done are read), and is checked end to end against a loopback server in
``tests/trainer_core/envs/agentgym_*servers.py`` that reproduces that server's routes, fields and
error shapes (each loopback's docstring cites its file and routes). ``SPECS[name].source`` names
the server file a protocol follows and ``SPECS[name].checked`` the loopback that tests it; what
the loopbacks cannot show is how the real environments behind the routes play (their games and
datasets are not run here). ``docs/agentgym.md`` has the table.

Supported ``env_name`` values (``agentgym/<name>`` and any case work too), by protocol family:

(a) ``{id, action}``, failures ``{"error": ...}`` at status 200, unknown bodies FastAPI's 422:
- ``textcraft``: ``POST /create {commands?, goal?}`` → ``{id, observation, reward, done}``;
  ``POST /reset {id, data_idx}`` → ``{id, observation, reward, done}``; ``POST /step
  {id, action}`` → ``{observation, reward, done}``; ``GET /observation?id=`` → text;
  ``POST /close {id}`` → ``true``/``false``.
- ``babyai``: ``/create`` (no body) → ``{id}``; ``/reset {id, data_idx}`` (required) →
  ``{observation, reward, score, deleted, done}``; ``/step`` adds ``score``; ``/close`` →
  ``true``/``false``. ``reward`` is the best progress so far (0..1): a progress reward.
- ``sciworld``: ``/create`` → ``{id}``; ``/reset {id, data_idx}`` →
  ``{task_name, var_num, task_description, observation, reward, score, deleted, done}`` (the
  first observation is the task description, a newline and the observation, as the official
  client shows it); ``/step`` → ``{observation, reward, score, done}``; ``/close`` → ``true``
  or HTTP 500. ``score`` (0..100) is the progress; Steplab divides it by 100.

(b) an integer from ``/create``, then ``env_idx`` in every body; failures are exceptions the
server does not catch: HTTP 500 ``Internal Server Error``:
- ``webshop``: ``/create`` → ``n``; ``/reset {env_idx, session_id}`` → ``[text, null]``, the
  first observation from ``GET /observation?env_idx=``; ``/step {env_idx, action}`` →
  ``{state, reward, done, info}`` (``state`` is the observation); no ``/close``.
- ``sqlgym``: like WebShop with ``item_id`` (required) for the item.
- ``searchqa``: ``/create {id}`` → ``n``; ``/reset {env_idx, id}`` → the observation text;
  ``/step`` → ``{observation, reward, done, info}``; ``/close {env_idx}`` → ``true``/``false``.
- ``weather``, ``movie``, ``academia``, ``todo``, ``sheet`` (``agentenv-tool``): like SearchQA
  without ``/close``; ``reward`` is the progress rate (matched subgoals, the best so far).
- ``webarena`` (Quart, not FastAPI: 500s are HTML): ``/create`` → ``{env_idx}``; ``/reset
  {env_idx, seed, idx}`` → ``{observation, sites, object}`` where ``observation`` is
  ``"TimeoutError"`` for any failure; the first observation from ``GET /observation``; ``/step``
  → ``{observation, reward, terminated, truncated, info}`` (a failed action comes back as its
  error text with reward 0; the reward counts only when ``terminated``, as in the official
  client; ``truncated`` ends the episode as truncated); ``/close`` → ``{closed: ...}``.

(c) LMRL-Gym's per-game routes on one server, ``{id}`` bodies and ``{"error"}`` at 200:
- ``maze``: ``/maze/create`` → ``{id}``; ``/maze/reset {id, game}`` → ``{observation}``;
  ``/maze/step {id, action}`` → ``{observation, reward, done}``; ``/maze/observation?id=``.
- ``wordle``: the same under ``/wordle/`` with ``/wordle/reset {id, seed}`` →
  ``{id, observation}``. No ``/close`` for either.

(d) ALFWorld, ``alfworld``: ``/create`` → ``{id}``; ``/reset {id, game, world_type}`` →
``{id, observation, available_actions, task_type}`` (``world_type`` from ``reset_params``,
default ``"Text"``; the first observation ends with ``AVAILABLE ACTIONS: a,b,...`` as the official
client shows it); ``/step {id, action}`` → ``{observation, reward, available_actions, done}``;
no ``/close``. ``available_actions`` are also in ``info``.

Episodes. The first ``reset`` creates the server-side environment and keeps its id; later
``reset`` calls reuse it. Which item an episode plays (``data_idx``, sent as the server's own
field: ``data_idx``, ``session_id``, ``item_id``, ``id``, ``idx``, ``game``, ``seed``), with
``data_idx_from="task"`` (the default): ``task.metadata["data_idx"]``, else the task id when it
is a whole number, else the ``seed`` given to ``reset``; with ``data_idx_from="seed"``: the seed.
Without one, item 0 — except TextCraft's first episode, played as ``/create`` left it. The first
observation is the server's; the task's prompt is not shown.

Actions. One tool, ``act``, with a text ``action`` (AgentGym actions are text in each
environment's own language; Steplab sends it as is, without the official clients' parsing of a
model's ``Action:`` line).

Rewards. AgentGym scores an episode by the reward of its last step
(``agentenv/controller/task.py``). For *step* rewards (textcraft, webshop, sqlgym, searchqa,
webarena, maze, wordle, alfworld) a step's reward is the server's; for *progress* rewards
(babyai, sciworld, the tool environments) the server's number is the score so far and a step's
reward is its increase, so that an episode's return is the server's final score. When the
server says done, ``info["outcome"]``: the task's checker when it has one (``checker`` or
``expected_answer``), else success iff the score is at least 1 (``score`` clipped to 0..1).
``info["server_reward"]`` is the server's number (SciWorld's divided by 100).

Errors. Errors are data where the agent caused them: an ``{"error"}`` from ``/step`` is an
observation (``info["error"] = "env_error"``) and the episode goes on, and WebArena's failed
actions are observations already. Everything else is
:class:`~trainer_core.errors.EnvironmentUnavailable` with what came back and what to check: a
refused connection, a timeout, an ``{"error"}`` from ``/create`` or ``/reset``, a 422 (the
fields do not fit: usually the wrong ``env_name``), a 404 (no such route), a 500 (an unknown
id or item: the ``env_idx`` servers' only error shape), a body that is not JSON or not the
expected shape. ``close()`` sends ``/close`` where the server has one and never raises (a
``false`` or a failure is logged); servers without ``/close`` keep the environment until they
restart.

Bounds: ``timeout`` per request, answers over ``max_answer_bytes`` (8 MiB) refused,
observations cut to ``max_observation_chars`` (32,000) with a note of how much was cut.
"""

from trainer_core.envs.agentgym.env import ACT_TOOL, DATA_IDX_SOURCES, AgentGymEnv, server_spec
from trainer_core.envs.agentgym.protocols import COMMIT, SPECS

SUPPORTED = tuple(SPECS)

__all__ = ["ACT_TOOL", "COMMIT", "DATA_IDX_SOURCES", "SUPPORTED", "AgentGymEnv", "server_spec"]
