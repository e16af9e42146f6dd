"""Environments: the protocol (``AgentEnv``, ``TimeStep``), wrappers, the registry and
Steplab's own environments, registered on import::

    from trainer_core.envs import make
    env = make("steplab/arithmetic")
"""

from trainer_core.envs.core import Action, AgentEnv, TimeStep, parse_action
from trainer_core.envs.registry import EnvSpec, UnknownEnvironment, list_envs, make, register, spec
from trainer_core.tasks.model import ToolSpec

__all__ = [
    "Action",
    "AgentEnv",
    "EnvSpec",
    "TimeStep",
    "ToolSpec",
    "UnknownEnvironment",
    "list_envs",
    "make",
    "parse_action",
    "register",
    "spec",
]


def _register_builtins() -> None:
    register(
        "steplab/sandbox",
        "trainer_core.envs.coding:CodingEnv",
        domain="coding",
        max_steps=40,
        description="A repository in a sandbox; read, edit, run; hidden tests run at submit.",
    )
    for domain, steps, what in [
        ("conversation", 20, "Answer a user with stats, search and messaging tools."),
        ("engineering", 25, "Investigate files and a knowledge base, then report."),
        ("advisory", 20, "Advise from a knowledge base."),
        ("discussion", 15, "Argue from a knowledge base."),
    ]:
        register(
            f"steplab/{domain}",
            "trainer_core.envs.dialogue:DialogueEnv",
            domain=domain,
            kwargs={"domain": domain},
            max_steps=steps,
            description=what,
        )
    register(
        "steplab/arithmetic",
        "trainer_core.envs.arithmetic:ArithmeticEnv",
        domain="arithmetic",
        max_steps=6,
        description="Compute with a calculator, then submit; tasks generated from a seed.",
    )
    register(
        "steplab/lookup",
        "trainer_core.envs.lookup:LookupEnv",
        domain="lookup",
        max_steps=20,
        description="Multi-hop questions over a generated directory: search, fetch, calculate, "
        "submit; near-duplicate names make the first fetch decisive.",
    )
    register(
        "steplab/customer-service",
        "trainer_core.envs.customer_service:CustomerServiceEnv",
        domain="customer-service",
        max_steps=40,
        description="Serve a simulated customer (tau-bench style): ask them, read and change a "
        "database of orders, accounts and reservations; the final state decides.",
    )
    register(
        "steplab/browser",
        "trainer_core.envs.browser:BrowserEnv",
        domain="browser",
        max_steps=30,
        description="A web shop served on loopback, driven through headless Chromium: the page "
        "as an element list with ids; click, type, select, scroll, go back, read, submit. "
        "Only the episode's own site is reachable.",
    )
    register(
        "steplab/mcp",
        "trainer_core.envs.mcp:McpEnv",
        description="The tools of an MCP server (server=[command...] or url=...), plus finish.",
    )
    register(
        "steplab/agentgym",
        "trainer_core.envs.agentgym:AgentGymEnv",
        description="An AgentGym environment server over HTTP (base_url=..., env_name=textcraft, "
        "webshop, alfworld, ...); one text tool, act.",
    )


_register_builtins()
