"""Coding tasks of kind ``mutable_default``: state shared by accident through a mutable default.

Each task is built by one function from the repository (``*_FILES``) and the hidden
unit tests (``*_HIDDEN_TESTS``) defined just above it."""

from __future__ import annotations

from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.coding.common import coding_task, dedent_block, python_check

TAGS_FILES = {
    "notes/__init__.py": "from notes.tags import add_tag\n",
    "notes/tags.py": dedent_block(
        r'''
        def add_tag(tag, tags=[]):
            """Add ``tag`` (lower-cased, once) to the list ``tags`` and return it.

            Without ``tags``, a new list is started.
            """
            tag = tag.lower()
            if tag not in tags:
                tags.append(tag)
            return tags
        '''
    ),
}

TAGS_HIDDEN_TESTS = {
    "test_tags.py": dedent_block(
        r"""
        import unittest

        from notes import add_tag


        class AddTagTest(unittest.TestCase):
            def test_given_list_is_updated_in_place(self):
                tags = ["work"]
                self.assertIs(add_tag("Urgent", tags), tags)
                self.assertEqual(tags, ["work", "urgent"])

            def test_no_duplicates(self):
                self.assertEqual(add_tag("work", ["work"]), ["work"])

            def test_a_new_list_each_time(self):
                add_tag("urgent")
                self.assertEqual(add_tag("home"), ["home"])

            def test_returned_lists_are_independent(self):
                first = add_tag("a")
                first.append("junk")
                self.assertEqual(add_tag("b"), ["b"])
        """
    )
}


def _mutable_default_tags() -> Task:
    return coding_task(
        "mutable_default",
        1,
        title="add_tag() leaks tags from one note into the next",
        issue="""
            `notes.add_tag(tag, tags=None)` is documented to start a new list when no list is
            given, but tags from earlier calls show up in later ones:

                >>> from notes import add_tag
                >>> add_tag("urgent")
                ['urgent']
                >>> add_tag("home")
                ['urgent', 'home']

            Expected `['home']`. When a list is passed, it is updated in place and returned (that
            part works and must keep working).
        """,
        files=TAGS_FILES,
        hidden=TAGS_HIDDEN_TESTS,
        fix=[
            (
                "notes/tags.py",
                "def add_tag(tag, tags=[]):\n",
                "def add_tag(tag, tags=None):\n",
            ),
            (
                "notes/tags.py",
                "    tag = tag.lower()\n",
                "    if tags is None:\n        tags = []\n    tag = tag.lower()\n",
            ),
        ],
        why="A default list is created once and shared by every call; use None and make a new one.",
        check=python_check(
            """
            from notes import add_tag
            add_tag("urgent")
            print(add_tag("home"))
            assert add_tag("x") == ["x"]
            """
        ),
        wrong=[
            (
                "notes/tags.py",
                "def add_tag(tag, tags=[]):\n",
                "def add_tag(tag, tags=None):\n",
            ),
            (
                "notes/tags.py",
                "    tag = tag.lower()\n",
                "    tags = list(tags or [])\n    tag = tag.lower()\n",
            ),
        ],
    )


CLASS_ATTRIBUTE_FILES = {
    "events/__init__.py": "from events.bus import EventBus\n",
    "events/bus.py": dedent_block(
        r'''
        class EventBus:
            handlers = {}

            def __init__(self, name):
                self.name = name

            def subscribe(self, event, handler):
                self.handlers.setdefault(event, []).append(handler)

            def publish(self, event, payload):
                """Call every handler of ``event``; returns their results in order."""
                return [handler(payload) for handler in self.handlers.get(event, [])]
        '''
    ),
}

CLASS_ATTRIBUTE_HIDDEN_TESTS = {
    "test_bus.py": dedent_block(
        r"""
        import unittest

        from events import EventBus


        class EventBusTest(unittest.TestCase):
            def test_publish_calls_handlers_in_order(self):
                bus = EventBus("main")
                bus.subscribe("order-placed", lambda p: p["id"])
                bus.subscribe("order-placed", lambda p: p["id"] * 2)
                self.assertEqual(bus.publish("order-placed", {"id": 3}), [3, 6])

            def test_a_new_bus_keeps_existing_handlers(self):
                first = EventBus("first")
                first.subscribe("user-joined", lambda p: "welcome")
                EventBus("second")
                self.assertEqual(first.publish("user-joined", {}), ["welcome"])

            def test_buses_are_independent(self):
                orders, audit = EventBus("orders"), EventBus("audit")
                orders.subscribe("created", lambda p: "sent mail")
                self.assertEqual(audit.publish("created", {}), [])

            def test_each_bus_has_its_own_handlers(self):
                self.assertIsNot(EventBus("a").handlers, EventBus("b").handlers)
        """
    )
}


def _mutable_default_class_attribute() -> Task:
    return coding_task(
        "mutable_default",
        2,
        title="Handlers subscribed on one EventBus fire on every bus",
        issue="""
            Each `events.EventBus` should have its own subscribers, but a handler subscribed on
            one bus is called by all of them:

                >>> from events import EventBus
                >>> orders, audit = EventBus("orders"), EventBus("audit")
                >>> orders.subscribe("created", lambda payload: "sent mail")
                >>> audit.publish("created", {})
                ['sent mail']

            Expected `[]`. Creating a new bus must not affect the handlers of existing ones.
        """,
        files=CLASS_ATTRIBUTE_FILES,
        hidden=CLASS_ATTRIBUTE_HIDDEN_TESTS,
        fix=[
            (
                "events/bus.py",
                "    handlers = {}\n\n    def __init__(self, name):\n        self.name = name\n",
                "    def __init__(self, name):\n        self.name = name\n        self.handlers = {}\n",
            )
        ],
        why="A class attribute is shared by all instances; give each bus its own dict.",
        check=python_check(
            """
            from events import EventBus
            orders, audit = EventBus("orders"), EventBus("audit")
            orders.subscribe("created", lambda payload: "sent mail")
            print(orders.publish("created", {}), audit.publish("created", {}))
            assert audit.publish("created", {}) == []
            """
        ),
        wrong=[
            (
                "events/bus.py",
                "    def __init__(self, name):\n        self.name = name\n",
                "    def __init__(self, name):\n        self.name = name\n        self.handlers.clear()\n",
            )
        ],
    )


# The builders of this kind, in the order their tasks appear in the suite.
BUILDERS = (
    _mutable_default_tags,
    _mutable_default_class_attribute,
)
