"""Built-in dialogue suites: conversation, advisory, discussion and engineering.

Every task has a checkable outcome: an exact expected answer (a number, a short string, or a
few accepted spellings) that is only found through the environment's deterministic tools:

* ``conversation`` (``steplab/conversation``): figures from the ``stats`` table
  (``query_stats``), sums and differences of two figures, one answer from another agent
  (``delegate``) and one from a status page (``web_search``);
* ``advisory`` (``steplab/advisory``): policies and product facts in the ``knowledge_base``,
  some combined with a small calculation (seats × price, discounts);
* ``discussion`` (``steplab/discussion``): claims and evidence in the ``knowledge_base``; the
  answer is which of named options the evidence supports, or a count;
* ``engineering`` (``steplab/engineering``): a small project in ``files`` (config, logs, code)
  searched with ``grep`` / ``read_file``, plus a runbook in the ``knowledge_base``.

Each world holds distractors (other months, other plans, other districts, other files), so a
lookup is needed and must be read carefully. Prompts ask for the answer in
``<answer></answer>`` tags (``answer_schema: answer_tag``).

Every task carries a ``reference_solution`` (the lookups, then ``respond``), ``reference_steps``
and in ``metadata``: ``task_set`` (the suite name), ``evidence`` (strings the reference lookups'
observations reveal, none of them in the prompt) and ``distractors`` (plausible wrong answers
found in the world). The content is fixed: the same tasks on every call.
"""

from __future__ import annotations

import copy
from typing import Any

from trainer_core.tasks.model import Task, ToolCall
from trainer_core.tasks.suites import TaskSuite

ANSWER_INSTRUCTION = "Put your final answer in <answer></answer> tags when you respond."
TEXT_OPTIONS = {"ignore_case": True, "collapse_whitespace": True}

ENVIRONMENTS = {
    "conversation": "steplab/conversation",
    "advisory": "steplab/advisory",
    "discussion": "steplab/discussion",
    "engineering": "steplab/engineering",
}


def _call(tool: str, thought: str, **params: Any) -> ToolCall:
    return ToolCall(tool=tool, params=params, thought=thought)


def _stats(query: str, thought: str = "Look the figure up in the statistics table.") -> ToolCall:
    return _call("query_stats", thought, query=query)


def _kb(query: str, thought: str = "Search the knowledge base.") -> ToolCall:
    return _call("knowledge_base", thought, query=query)


def _grep(pattern: str, path: str | None = None, thought: str = "Search the files.") -> ToolCall:
    params: dict[str, Any] = {"pattern": pattern}
    if path is not None:
        params["path"] = path
    return ToolCall(tool="grep", params=params, thought=thought)


def _read(
    path: str, start: int | None = None, end: int | None = None, thought: str = ""
) -> ToolCall:
    params: dict[str, Any] = {"file_path": path}
    if start is not None:
        params["start_line"] = start
    if end is not None:
        params["end_line"] = end
    return ToolCall(tool="read_file", params=params, thought=thought or f"Read {path}.")


def _task(
    suite: str,
    number: int,
    prompt: str,
    answer: Any,
    lookups: list[ToolCall],
    *,
    world: dict[str, Any],
    evidence: list[str],
    distractors: list[Any] | tuple[Any, ...] = (),
    checker: str = "number",
    because: str = "",
    files: dict[str, str] | None = None,
) -> Task:
    """One task: ``lookups`` then ``respond`` with ``<answer>answer</answer>``.

    ``answer`` is the expected answer (a list for ``any_of``: the first is the one the
    reference gives). ``because`` is a short rationale the reference puts before the tag.
    """
    given = answer[0] if isinstance(answer, list) else answer
    message = f"{because} <answer>{given}</answer>".strip()
    reference = [
        *lookups,
        _call("respond", "Answer with what the lookups showed.", message=message),
    ]
    metadata: dict[str, Any] = copy.deepcopy(world)
    metadata["task_set"] = suite
    metadata["evidence"] = list(evidence)
    metadata["distractors"] = list(distractors)
    if checker in ("exact", "any_of"):
        metadata["checker_options"] = dict(TEXT_OPTIONS)
    return Task(
        id=f"{suite}-{number:02d}",
        prompt=f"{prompt} {ANSWER_INSTRUCTION}",
        domain=suite,
        environment=ENVIRONMENTS[suite],
        expected_answer=answer,
        checker=checker,
        answer_schema="answer_tag",
        files=dict(files or {}),
        reference_solution=reference,
        reference_steps=len(reference),
        metadata=metadata,
    )


# ---------------------------------------------------------------------------------------------
# conversation: a statistics table, another agent, a status page
# ---------------------------------------------------------------------------------------------

VENUE_STATS = {
    "bookings aurora hall january 2025": 38,
    "bookings aurora hall february 2025": 41,
    "bookings aurora hall march 2025": 47,
    "bookings aurora hall march 2024": 39,
    "bookings boreal room march 2025": 29,
    "bookings boreal room april 2025": 33,
    "bookings cirrus loft march 2025": 18,
    "cancellations aurora hall march 2025": 6,
    "cancellations boreal room march 2025": 4,
    "revenue eur aurora hall march 2025": 61100,
    "revenue eur boreal room march 2025": 20300,
}

SHOP_STATS = {
    "orders north region q1 2025": 1284,
    "orders south region q1 2025": 973,
    "orders north region q2 2025": 1402,
    "orders south region q2 2025": 1011,
    "returns north region q1 2025": 87,
    "returns south region q1 2025": 64,
    "returns north region q2 2025": 91,
    "new customers north region q2 2025": 295,
    "new customers south region q2 2025": 311,
    "new customers north region q1 2025": 342,
    "average order value eur north region q1 2025": 58.4,
}

DESK_STATS = {
    "tickets opened support team week 10 2025": 212,
    "tickets closed support team week 10 2025": 198,
    "tickets opened support team week 11 2025": 187,
    "tickets closed support team week 11 2025": 203,
    "tickets opened billing team week 10 2025": 57,
    "tickets closed billing team week 10 2025": 61,
    "median first response minutes billing team week 10 2025": 52,
    "median first response minutes billing team week 11 2025": 37,
    "median first response minutes support team week 11 2025": 19,
}

SHOP_DELEGATES = {
    "billing-agent": (
        "Refunds to enterprise customers in March 2025 totalled 12450 EUR; "
        "refunds to small-business customers totalled 3980 EUR."
    ),
    "support-agent": "I only handle support tickets; ask the billing-agent about refunds.",
}

SHOP_WEB = [
    {
        "title": "Pinecrest status: checkout outage on 14 March 2025",
        "url": "https://status.pinecrest.example/incidents/2025-03-14",
        "text": "Checkout was unavailable from 10:02 to 10:45 UTC. Duration: 43 minutes. "
        "Cause: an expired certificate on the payment gateway.",
    },
    {
        "title": "Pinecrest status: checkout slowdown on 2 February 2025",
        "url": "https://status.pinecrest.example/incidents/2025-02-02",
        "text": "Checkout was slow from 18:20 to 18:37 UTC. Duration: 17 minutes. "
        "Cause: a database failover.",
    },
    {
        "title": "Pinecrest blog: spring collection",
        "url": "https://pinecrest.example/blog/spring-2025",
        "text": "Our spring collection arrives on 1 March 2025 with 120 new products.",
    },
]


def _conversation_venues() -> list[Task]:
    """Tasks 1-4: a venue company's bookings in the statistics table."""
    s = "conversation"
    venues = {"stats": VENUE_STATS, "notes": ["Northwind Venues manages four halls."]}
    return [
        _task(
            s,
            1,
            "How many bookings did Northwind's Aurora hall have in March 2025?",
            47,
            [_stats("bookings aurora hall march 2025")],
            world=venues,
            evidence=["bookings aurora hall march 2025: 47"],
            distractors=[39, 41, 6],
        ),
        _task(
            s,
            2,
            "How many bookings did the Aurora hall and the Boreal room have together "
            "in March 2025?",
            76,
            [_stats("bookings aurora hall march 2025"), _stats("bookings boreal room march 2025")],
            world=venues,
            evidence=[
                "bookings aurora hall march 2025: 47",
                "bookings boreal room march 2025: 29",
            ],
            distractors=[47, 29, 94],
            because="47 + 29 = 76.",
        ),
        _task(
            s,
            3,
            "By how many bookings did the Aurora hall's March 2025 total exceed its "
            "March 2024 total?",
            8,
            [_stats("bookings aurora hall march 2025"), _stats("bookings aurora hall march 2024")],
            world=venues,
            evidence=[
                "bookings aurora hall march 2025: 47",
                "bookings aurora hall march 2024: 39",
            ],
            distractors=[47, 39, 6],
            because="47 - 39 = 8.",
        ),
        _task(
            s,
            4,
            "What were the Boreal room's net bookings in March 2025, that is its bookings "
            "minus its cancellations?",
            25,
            [
                _stats("bookings boreal room march 2025"),
                _stats("cancellations boreal room march 2025"),
            ],
            world=venues,
            evidence=[
                "bookings boreal room march 2025: 29",
                "cancellations boreal room march 2025: 4",
            ],
            distractors=[29, 33],
            because="29 - 4 = 25.",
        ),
    ]


def _conversation_shop() -> list[Task]:
    """Tasks 5-10: a shop's orders, its billing agent and its status page."""
    s = "conversation"
    shop = {"stats": SHOP_STATS, "delegates": SHOP_DELEGATES, "web": SHOP_WEB}
    return [
        _task(
            s,
            5,
            "How many orders did Pinecrest Outfitters receive from its south region in Q1 2025?",
            973,
            [_stats("orders south region q1 2025")],
            world=shop,
            evidence=["orders south region q1 2025: 973"],
            distractors=[1284, 1011],
        ),
        _task(
            s,
            6,
            "By how many orders did Pinecrest's north region grow from Q1 2025 to Q2 2025?",
            118,
            [_stats("orders north region q1 2025"), _stats("orders north region q2 2025")],
            world=shop,
            evidence=["orders north region q1 2025: 1284", "orders north region q2 2025: 1402"],
            distractors=[1402, 38],
            because="1402 - 1284 = 118.",
        ),
        _task(
            s,
            7,
            "How many returns did Pinecrest have in Q1 2025, north and south regions combined?",
            151,
            [_stats("returns q1 2025")],
            world=shop,
            evidence=["returns north region q1 2025: 87", "returns south region q1 2025: 64"],
            distractors=[87, 64, 178],
            because="87 + 64 = 151.",
        ),
        _task(
            s,
            8,
            "Which of Pinecrest's regions gained more new customers in Q2 2025, north or "
            "south? Answer with the region name only.",
            "south",
            [_stats("new customers q2 2025")],
            world=shop,
            evidence=[
                "new customers north region q2 2025: 295",
                "new customers south region q2 2025: 311",
            ],
            distractors=["north"],
            checker="exact",
            because="South had 311 new customers, north 295.",
        ),
        _task(
            s,
            9,
            "Ask Pinecrest's billing agent how much was refunded to enterprise customers in "
            "March 2025 and tell me the amount in EUR as a plain number.",
            12450,
            [
                _call(
                    "delegate",
                    "The billing agent knows the refund totals.",
                    agent="billing-agent",
                    task="Total refunds to enterprise customers in March 2025, in EUR?",
                )
            ],
            world=shop,
            evidence=["12450 EUR"],
            distractors=[3980, 16430],
        ),
        _task(
            s,
            10,
            "According to Pinecrest's status page, how many minutes did the checkout outage "
            "on 14 March 2025 last?",
            43,
            [
                _call(
                    "web_search",
                    "The status page describes incidents.",
                    query="Pinecrest status checkout outage 14 March 2025",
                )
            ],
            world=shop,
            evidence=["Duration: 43 minutes"],
            distractors=[17],
        ),
    ]


def _conversation_desk() -> list[Task]:
    """Tasks 11-12: a support desk's ticket figures."""
    s = "conversation"
    desk = {"stats": DESK_STATS}
    return [
        _task(
            s,
            11,
            "By how many tickets did the support team's backlog grow in week 10 of 2025 "
            "(tickets opened minus tickets closed)?",
            14,
            [_stats("tickets support team week 10 2025")],
            world=desk,
            evidence=[
                "tickets opened support team week 10 2025: 212",
                "tickets closed support team week 10 2025: 198",
            ],
            distractors=[-16, 212, 198],
            because="212 - 198 = 14.",
        ),
        _task(
            s,
            12,
            "What was the billing team's median first-response time, in minutes, in week 11 "
            "of 2025?",
            37,
            [_stats("median first response minutes billing team week 11 2025")],
            world=desk,
            evidence=["median first response minutes billing team week 11 2025: 37"],
            distractors=[52, 19],
        ),
    ]


def _conversation() -> list[Task]:
    return [*_conversation_venues(), *_conversation_shop(), *_conversation_desk()]


# ---------------------------------------------------------------------------------------------
# advisory: policies and product facts in a knowledge base
# ---------------------------------------------------------------------------------------------

LUMEN_KB = [
    {
        "title": "Refunds: annual plans",
        "text": "Customers on an annual plan get a full refund if they cancel within 30 days of "
        "purchase. After 30 days annual plans are not refundable.",
    },
    {
        "title": "Refunds: monthly plans",
        "text": "Monthly plans can be refunded within 14 days of the latest charge. Only the "
        "latest charge is refundable.",
    },
    {
        "title": "Pricing: Starter plan",
        "text": "The Starter plan is free for a single seat. API limit: 60 requests per minute.",
    },
    {
        "title": "Pricing: Team plan",
        "text": "The Team plan costs 12 EUR per seat per month, with a minimum of 3 seats. "
        "API limit: 600 requests per minute.",
    },
    {
        "title": "Pricing: Business plan",
        "text": "The Business plan costs 25 EUR per seat per month, with a minimum of 5 seats. "
        "API limit: 3000 requests per minute.",
    },
    {
        "title": "Support response times",
        "text": "Standard support replies within 2 business days. Priority support replies "
        "within 4 hours; it is included only in the Business plan.",
    },
    {
        "title": "Trash and data retention",
        "text": "Deleted projects stay in the trash for 45 days and are then deleted "
        "permanently. Audit logs are kept for 400 days.",
    },
    {
        "title": "Account security: password rules",
        "text": "A password must be at least 12 characters long. Two-factor authentication is "
        "mandatory for workspace admins.",
    },
    {
        "title": "Discounts",
        "text": "Registered non-profits get 40 percent off the Team plan. Schools and "
        "universities get 50 percent off the Team and Business plans. Discounts cannot be "
        "combined.",
    },
    {
        "title": "Data residency",
        "text": "Workspaces of EU customers are hosted in Frankfurt, of Swiss customers in "
        "Zurich, of UK customers in London, and all others in Virginia.",
    },
    {
        "title": "Billing contacts",
        "text": "Invoice questions go to invoices@lumen.example; failed payments go to "
        "payments@lumen.example; contract questions go to legal@lumen.example.",
    },
]

SKYLARK_KB = [
    {
        "title": "Checked baggage allowance",
        "text": "Economy fares include one checked bag of up to 23 kg. Business fares include "
        "two checked bags of up to 32 kg each.",
    },
    {
        "title": "Extra baggage fees",
        "text": "A second checked bag in Economy costs 45 EUR. Overweight bags (23 to 32 kg) "
        "cost 60 EUR each.",
    },
    {
        "title": "Cabin baggage",
        "text": "One cabin bag of up to 8 kg and one personal item are allowed on every fare.",
    },
]


LUMEN_INTRO = "A Lumen Cloud customer asks:"


def _advisory_lumen_plans() -> list[Task]:
    """Tasks 1-6: Lumen Cloud's plans, prices, refunds and limits."""
    s = "advisory"
    lumen = {"knowledge_base": LUMEN_KB}
    return [
        _task(
            s,
            1,
            f"{LUMEN_INTRO} I bought an annual plan. Within how many days of purchase can I "
            "cancel for a full refund? Answer with the number of days.",
            30,
            [_kb("refund annual plan")],
            world=lumen,
            evidence=["within 30 days of purchase"],
            distractors=[14],
        ),
        _task(
            s,
            2,
            f"{LUMEN_INTRO} What will the Team plan cost per month for 7 seats, in EUR? "
            "Answer with the number only.",
            84,
            [_kb("Team plan price per seat")],
            world=lumen,
            evidence=["12 EUR per seat per month"],
            distractors=[175, 12],
            because="7 seats x 12 EUR = 84 EUR.",
        ),
        _task(
            s,
            3,
            f"{LUMEN_INTRO} What is the lowest possible monthly price of the Business plan, "
            "in EUR? Answer with the number only.",
            125,
            [_kb("Business plan price minimum seats")],
            world=lumen,
            evidence=["25 EUR per seat per month", "minimum of 5 seats"],
            distractors=[25, 36],
            because="5 seats minimum x 25 EUR = 125 EUR.",
        ),
        _task(
            s,
            4,
            f"{LUMEN_INTRO} I deleted a project by mistake. For how many days can it still be "
            "recovered from the trash?",
            45,
            [_kb("deleted projects trash")],
            world=lumen,
            evidence=["stay in the trash for 45 days"],
            distractors=[400, 30],
        ),
        _task(
            s,
            5,
            f"{LUMEN_INTRO} How many API requests per minute does the Business plan allow?",
            3000,
            [_kb("Business plan API limit requests per minute")],
            world=lumen,
            evidence=["API limit: 3000 requests per minute"],
            distractors=[600, 60],
        ),
        _task(
            s,
            6,
            f"{LUMEN_INTRO} Which plan do I need to get priority support? Answer with the "
            "plan name only.",
            "Business",
            [_kb("priority support plan")],
            world=lumen,
            evidence=["included only in the Business plan"],
            distractors=["Team", "Starter"],
            checker="exact",
        ),
    ]


def _advisory_lumen_policies() -> list[Task]:
    """Tasks 7-11: Lumen Cloud's passwords, discounts, hosting and contacts."""
    s = "advisory"
    lumen = {"knowledge_base": LUMEN_KB}
    return [
        _task(
            s,
            7,
            f"{LUMEN_INTRO} What is the minimum password length, in characters?",
            12,
            [_kb("password length")],
            world=lumen,
            evidence=["at least 12 characters"],
            distractors=[8],
        ),
        _task(
            s,
            8,
            f"{LUMEN_INTRO} We are a registered non-profit and want the Team plan for 10 "
            "seats. What is our monthly price in EUR after the discount?",
            72,
            [_kb("Team plan price per seat"), _kb("non-profits discount")],
            world=lumen,
            evidence=["12 EUR per seat per month", "non-profits get 40 percent off"],
            distractors=[120, 60, 48],
            because="10 x 12 EUR = 120 EUR, minus 40 percent = 72 EUR.",
        ),
        _task(
            s,
            9,
            f"{LUMEN_INTRO} We are a Swiss company. In which city will our workspace be "
            "hosted? Answer with the city name only.",
            "Zurich",
            [_kb("data residency Swiss customers hosted")],
            world=lumen,
            evidence=["Swiss customers in Zurich"],
            distractors=["Frankfurt", "Virginia"],
            checker="exact",
        ),
        _task(
            s,
            10,
            f"{LUMEN_INTRO} Which email address should I write to with a question about an "
            "invoice? Answer with the address only.",
            "invoices@lumen.example",
            [_kb("invoice questions email billing contacts")],
            world=lumen,
            evidence=["Invoice questions go to invoices@lumen.example"],
            distractors=["payments@lumen.example", "legal@lumen.example"],
            checker="exact",
        ),
        _task(
            s,
            11,
            f"{LUMEN_INTRO} Our university wants the Business plan for 8 seats. What is the "
            "monthly price in EUR after the education discount?",
            100,
            [_kb("Business plan price per seat"), _kb("universities discount")],
            world=lumen,
            evidence=["25 EUR per seat per month", "universities get 50 percent off"],
            distractors=[200, 120],
            because="8 x 25 EUR = 200 EUR, minus 50 percent = 100 EUR.",
        ),
    ]


def _advisory_skylark() -> list[Task]:
    """Task 12: an airline's baggage rules."""
    s = "advisory"
    skylark = {"knowledge_base": SKYLARK_KB}
    return [
        _task(
            s,
            12,
            "A Skylark Air passenger flying Economy asks: what is the maximum weight of my "
            "included checked bag, in kg?",
            23,
            [_kb("Economy checked bag weight")],
            world=skylark,
            evidence=["one checked bag of up to 23 kg"],
            distractors=[32, 8],
        ),
    ]


def _advisory() -> list[Task]:
    return [*_advisory_lumen_plans(), *_advisory_lumen_policies(), *_advisory_skylark()]


# ---------------------------------------------------------------------------------------------
# discussion: claims and evidence in a knowledge base
# ---------------------------------------------------------------------------------------------

BIKE_LANE_KB = [
    {
        "title": "Elm Street bike lane: decision rule",
        "text": "The council agreed in advance: make the lane permanent if cyclist injuries fell "
        "by at least 20 percent and shop footfall did not fall; extend the pilot if injuries "
        "fell but footfall fell; remove the lane if injuries did not fall.",
    },
    {
        "title": "Elm Street bike lane: pilot evaluation 2024",
        "text": "Over the 12-month pilot, cyclist injuries on Elm Street fell by 31 percent and "
        "footfall at Elm Street shops rose by 4 percent.",
    },
    {
        "title": "Oak Avenue bike lane: pilot evaluation 2024",
        "text": "On Oak Avenue cyclist injuries fell by 9 percent and shop footfall fell by "
        "6 percent.",
    },
    {
        "title": "Public comments on bike lanes",
        "text": "Of 412 public comments, 58 percent favoured keeping the lanes.",
    },
]

FOUR_DAY_KB = [
    {
        "title": "Four-day week trials: productivity summary",
        "text": "Five company trials were reviewed. Alder Ltd: productivity up 6 percent. "
        "Birchworks: productivity down 2 percent. Cedar Foods: productivity up 11 percent. "
        "Dunmore Bank: no measurable change. Elmwood Studio: productivity up 3 percent.",
    },
    {
        "title": "Four-day week trials: staff wellbeing",
        "text": "All five companies reported lower sick leave, and four reported lower staff "
        "turnover.",
    },
    {
        "title": "Nine-day fortnight pilots",
        "text": "Two councils piloted a nine-day fortnight; both reported higher productivity.",
    },
]

SLEEP_KB = [
    {
        "title": "Hollins district sleep survey 2023",
        "text": "After the school start moved from 7:45 to 8:30, Hollins students slept "
        "34 minutes more per night on average. Attendance did not change measurably.",
    },
    {
        "title": "Marlow district sleep survey 2022",
        "text": "Marlow moved its school start by 10 minutes; students' average sleep did not "
        "change and attendance fell slightly.",
    },
    {
        "title": "School start times: opinion poll",
        "text": "61 percent of Hollins parents prefer the later start.",
    },
]

GRID_KB = [
    {
        "title": "Veland grid operator annual report 2024",
        "text": "Electricity supplied in 2024: wind 31 percent, natural gas 27 percent, "
        "solar 18 percent, hydro 14 percent, other 10 percent.",
    },
    {
        "title": "Veland grid operator annual report 2023",
        "text": "Electricity supplied in 2023: natural gas 35 percent, wind 26 percent, "
        "hydro 16 percent, solar 15 percent, other 8 percent.",
    },
    {
        "title": "Veland energy ministry press release",
        "text": "The ministry plans to add 2 gigawatts of solar capacity by 2027.",
    },
]

RENT_CAP_KB = [
    {
        "title": "Fact-check: the case for the Torvik rent cap",
        "text": "Argument 1, rents rose faster than wages since 2015: supported. Argument 2, "
        "the cap will lower rents by 20 percent: unsupported. Argument 3, most tenants spend "
        "over 40 percent of income on rent: misleading. Argument 4, evictions doubled since "
        "2019: supported. Argument 5, similar caps raised construction elsewhere: unsupported. "
        "Argument 6, landlords will not leave the market: unsupported.",
    },
    {
        "title": "Fact-check: the case against the Torvik rent cap",
        "text": "Argument 1, caps reduce maintenance: supported. Argument 2, caps shrink the "
        "rental supply: supported. Argument 3, caps favour current tenants: supported.",
    },
    {
        "title": "Torvik housing statistics",
        "text": "Torvik has 48,000 rented homes; the median rent is 1,120 EUR per month.",
    },
]

MUSEUM_KB = [
    {
        "title": "Hearing transcript: museum funding (excerpt)",
        "text": "The mayor said that visits had grown steadily. The curator said: 'Attendance "
        "doubled after the free Sundays started.' The tourism board said that visitor "
        "numbers were in line with the region.",
    },
    {
        "title": "Museum annual report",
        "text": "Visits rose from 81,000 to 118,000 over two years.",
    },
]

FLOOD_KB = [
    {
        "title": "Flood defence proposals: costs",
        "text": "Proposal North costs 14.2 million EUR and protects 8,000 households. Proposal "
        "South costs 9.9 million EUR and protects 6,000 households.",
    },
    {
        "title": "Flood defence proposals: public support",
        "text": "In the consultation 61 percent backed Proposal North and 39 percent backed "
        "Proposal South.",
    },
    {
        "title": "Flood defence proposals: timelines",
        "text": "Proposal North takes 4 years to build; Proposal South takes 3 years.",
    },
]

DAM_KB = [
    {
        "title": "Kessa dam hearing: expert witnesses",
        "text": "Dr. Amara Osei, hydrologist: supports the dam. Prof. Linus Berg, ecologist: "
        "opposes the dam. Ines Valdez, economist: supports the dam. Dr. Tomas Reyes, "
        "geologist: opposes the dam. Mei Lin, engineer: neutral.",
    },
    {
        "title": "Kessa dam hearing: public speakers",
        "text": "Seven residents spoke: four opposed the dam, two supported it and one was "
        "undecided.",
    },
]

BAG_BAN_KB = [
    {
        "title": "Fact-check rating scale",
        "text": "A claim is rated 'supported' when the measured effect is within 10 percentage "
        "points of the claimed effect; 'partly supported' when the measured effect goes in the "
        "claimed direction but differs by more than 10 percentage points; 'refuted' when the "
        "measured effect is zero or goes the other way.",
    },
    {
        "title": "Council audit: Brannock plastic bag ban",
        "text": "Street surveys found 22 percent less bag litter in the year after the ban.",
    },
    {
        "title": "Council audit: Brannock bottle deposit scheme",
        "text": "Street surveys found 47 percent less bottle litter after the deposit scheme.",
    },
]

VOTING_KB = [
    {
        "title": "Voting at 16: countries compared",
        "text": "Veland: 16 in national elections. Ostmark: 18 in national elections, 16 in "
        "local elections only. Sarnia: 16 in national elections. Tervo: 18 in all elections. "
        "Lurien: 16 in national elections since 2021. Pallas: 17 in national elections.",
    },
    {
        "title": "Turnout of first-time voters",
        "text": "In Veland, 71 percent of 16- and 17-year-olds voted in the last national "
        "election.",
    },
]


def _discussion_debates() -> list[Task]:
    """Tasks 1-5: debates settled by a rule, a survey or a report."""
    s = "discussion"
    return [
        _task(
            s,
            1,
            "The council is debating the Elm Street bike lane pilot. Applying the council's "
            "decision rule to the pilot evaluation in the knowledge base, what should happen: "
            "'make permanent', 'extend the pilot' or 'remove'? Answer with one of those phrases.",
            "make permanent",
            [_kb("Elm Street bike lane decision rule pilot evaluation")],
            world={"knowledge_base": BIKE_LANE_KB},
            evidence=["fell by 31 percent", "rose by 4 percent", "at least 20 percent"],
            distractors=["extend the pilot", "remove"],
            checker="exact",
            because="Injuries fell 31 percent (at least 20) and footfall rose.",
        ),
        _task(
            s,
            2,
            "In the debate on the four-day work week: how many of the company trials "
            "summarised in the knowledge base reported higher productivity?",
            3,
            [_kb("four-day week trials productivity")],
            world={"knowledge_base": FOUR_DAY_KB},
            evidence=[
                "Alder Ltd: productivity up 6 percent",
                "Cedar Foods: productivity up 11 percent",
                "Elmwood Studio: productivity up 3 percent",
            ],
            distractors=[5, 2, 4],
            because="Alder, Cedar Foods and Elmwood reported gains.",
        ),
        _task(
            s,
            3,
            "Which claim does the Hollins district sleep survey support? (A) later school start "
            "times increased students' average sleep; (B) later start times had no effect on "
            "sleep; (C) later start times reduced attendance. Answer with the letter only.",
            "A",
            [_kb("Hollins district sleep survey")],
            world={"knowledge_base": SLEEP_KB},
            evidence=["34 minutes more per night"],
            distractors=["B", "C"],
            checker="exact",
        ),
        _task(
            s,
            4,
            "One side of a debate claims that natural gas was still Veland's largest source of "
            "electricity in 2024. According to the grid operator's 2024 report, which source "
            "supplied the largest share in 2024: wind, solar, natural gas or hydro? Answer with "
            "the source name.",
            "wind",
            [_kb("Veland grid operator annual report 2024 electricity")],
            world={"knowledge_base": GRID_KB},
            evidence=["wind 31 percent, natural gas 27 percent"],
            distractors=["natural gas", "solar"],
            checker="exact",
        ),
        _task(
            s,
            5,
            "How many of the arguments made in favour of the Torvik rent cap were rated "
            "'supported' by the fact-check in the knowledge base?",
            2,
            [_kb("fact-check case for the Torvik rent cap")],
            world={"knowledge_base": RENT_CAP_KB},
            evidence=[
                "rents rose faster than wages since 2015: supported",
                "evictions doubled since 2019: supported",
            ],
            distractors=[3, 6],
            because="Arguments 1 and 4 were rated supported.",
        ),
    ]


def _discussion_hearings_and_claims() -> list[Task]:
    """Tasks 6-10: hearings, proposals and claims checked against the evidence."""
    s = "discussion"
    return [
        _task(
            s,
            6,
            "At the museum funding hearing, who claimed that attendance doubled after free "
            "Sundays started: the mayor, the curator or the tourism board? Answer with the "
            "speaker.",
            ["curator", "the curator"],
            [_kb("museum funding hearing transcript")],
            world={"knowledge_base": MUSEUM_KB},
            evidence=["The curator said"],
            distractors=["mayor", "tourism board"],
            checker="any_of",
        ),
        _task(
            s,
            7,
            "Which flood defence proposal has the lower projected cost per protected "
            "household: Proposal North or Proposal South?",
            ["Proposal South", "South"],
            [_kb("flood defence proposals costs households")],
            world={"knowledge_base": FLOOD_KB},
            evidence=[
                "14.2 million EUR and protects 8,000 households",
                "9.9 million EUR and protects 6,000 households",
            ],
            distractors=["Proposal North", "North"],
            checker="any_of",
            because="North: 1775 EUR per household; South: 1650 EUR per household.",
        ),
        _task(
            s,
            8,
            "How many of the expert witnesses at the Kessa dam hearing opposed the dam?",
            2,
            [_kb("Kessa dam hearing expert witnesses")],
            world={"knowledge_base": DAM_KB},
            evidence=["ecologist: opposes the dam", "geologist: opposes the dam"],
            distractors=[4, 5],
            because="The ecologist and the geologist opposed it.",
        ),
        _task(
            s,
            9,
            "A campaigner claims that Brannock's plastic bag ban cut bag litter by half "
            "(50 percent). Using the council audit and the fact-check rating scale in the "
            "knowledge base, how should the claim be rated: 'supported', 'partly supported' or "
            "'refuted'?",
            "partly supported",
            [_kb("council audit Brannock plastic bag ban"), _kb("fact-check rating scale")],
            world={"knowledge_base": BAG_BAN_KB},
            evidence=["22 percent less bag litter", "within 10 percentage points"],
            distractors=["supported", "refuted"],
            checker="exact",
            because="The measured drop of 22 percent is in the claimed direction but far from 50.",
        ),
        _task(
            s,
            10,
            "For the motion 'This house would lower the voting age to 16': how many of the "
            "countries compared in the knowledge base let 16-year-olds vote in national "
            "elections?",
            3,
            [_kb("voting at 16 countries compared")],
            world={"knowledge_base": VOTING_KB},
            evidence=[
                "Veland: 16 in national elections",
                "Sarnia: 16 in national elections",
                "Lurien: 16 in national elections",
            ],
            distractors=[4, 6],
            because="Veland, Sarnia and Lurien.",
        ),
    ]


def _discussion() -> list[Task]:
    return [*_discussion_debates(), *_discussion_hearings_and_claims()]


# ---------------------------------------------------------------------------------------------
# engineering: a small project's files and a runbook
# ---------------------------------------------------------------------------------------------

ORBIT_FILES = {
    "README.md": (
        "# Orbit\n\nOrbit runs the api, billing, search and worker services.\n"
        "Configuration lives in config/; logs in logs/.\n"
    ),
    "config/services.yaml": (
        "services:\n"
        "  api:\n"
        "    host: 0.0.0.0\n"
        "    port: 8080\n"
        "    replicas: 3\n"
        "  billing:\n"
        "    host: 0.0.0.0\n"
        "    port: 8443\n"
        "    replicas: 2\n"
        "  search:\n"
        "    host: 0.0.0.0\n"
        "    port: 9200\n"
        "    replicas: 1\n"
        "  worker:\n"
        "    queue: jobs\n"
        "    concurrency: 8\n"
    ),
    "config/production.env": (
        "ORBIT_ENV=production\n"
        "ORBIT_MAX_RETRIES=6\n"
        "ORBIT_LOG_LEVEL=warning\n"
        "BILLING_URL=https://billing.internal:8443\n"
    ),
    "config/staging.env": (
        "ORBIT_ENV=staging\nORBIT_MAX_RETRIES=2\nORBIT_LOG_LEVEL=debug\n"
        "BILLING_URL=https://billing.staging.internal:8443\n"
    ),
    "requirements.txt": "requests==2.31.0\npydantic==2.6.4\npydantic-settings==2.2.1\nredis==5.0.3\n",
    "src/orbit/__init__.py": '"""Orbit."""\n',
    "src/orbit/client.py": (
        '"""HTTP client for the Orbit API."""\n'
        "\n"
        "import os\n"
        "\n"
        "DEFAULT_TIMEOUT = 12.5  # seconds\n"
        'MAX_RETRIES = int(os.environ.get("ORBIT_MAX_RETRIES", "4"))\n'
        "BACKOFF_SECONDS = 0.5\n"
        "\n"
        "\n"
        "class OrbitClient:\n"
        "    def __init__(self, base_url: str, timeout: float = DEFAULT_TIMEOUT):\n"
        "        self.base_url = base_url\n"
        "        self.timeout = timeout\n"
        "\n"
        "    def get(self, path: str) -> dict:\n"
        "        for attempt in range(MAX_RETRIES):\n"
        "            try:\n"
        "                return self._get(path)\n"
        "            except TimeoutError:\n"
        "                if attempt == MAX_RETRIES - 1:\n"
        "                    raise\n"
        "        return {}\n"
    ),
    "src/orbit/auth.py": (
        '"""Token checks."""\n'
        "\n"
        "import hmac\n"
        "import time\n"
        "\n"
        "\n"
        "class InvalidToken(Exception):\n"
        "    pass\n"
        "\n"
        "\n"
        "def parse_header(header: str) -> str:\n"
        '    scheme, _, token = header.partition(" ")\n'
        '    if scheme.lower() != "bearer" or not token:\n'
        '        raise ValueError("expected a bearer token")\n'
        "    return token\n"
        "\n"
        "\n"
        "def verify_token(token: str, secret: bytes, now: float | None = None) -> dict:\n"
        '    payload, _, signature = token.rpartition(".")\n'
        '    expected = hmac.new(secret, payload.encode(), "sha256").hexdigest()\n'
        "    if not hmac.compare_digest(expected, signature):\n"
        '        raise InvalidToken("bad signature")\n'
        "    claims = decode(payload)\n"
        '    if claims["exp"] < (now or time.time()):\n'
        '        raise InvalidToken("expired")\n'
        "    return claims\n"
        "\n"
        "\n"
        "def decode(payload: str) -> dict:\n"
        "    import base64\n"
        "    import json\n"
        "\n"
        "    return json.loads(base64.urlsafe_b64decode(payload + '=='))\n"
    ),
    "tests/test_client.py": (
        "from orbit.client import OrbitClient\n"
        "\n"
        "\n"
        "def test_timeout_is_configurable():\n"
        '    client = OrbitClient("http://localhost:8080", timeout=3)\n'
        "    assert client.timeout == 3\n"
    ),
    "logs/worker.log": (
        "2025-03-14 09:10:02 INFO worker started (concurrency=8)\n"
        "2025-03-14 09:11:15 INFO job 5118 done in 1.2s\n"
        "2025-03-14 09:12:44 ERROR job 5121 failed: TimeoutError after 12.5s\n"
        "2025-03-14 09:12:45 WARN retrying job 5121 (attempt 2 of 6)\n"
        "2025-03-14 09:13:30 INFO job 5121 done in 3.4s\n"
        "2025-03-14 09:20:07 ERROR job 5127 failed: ConnectionRefusedError (billing.internal:8443)\n"
        "2025-03-14 09:20:08 WARN retrying job 5127 (attempt 2 of 6)\n"
        "2025-03-14 09:31:51 ERROR job 5127 failed: ConnectionRefusedError (billing.internal:8443)\n"
        "2025-03-14 09:31:52 WARN giving up on job 5127\n"
        "2025-03-14 09:45:00 INFO heartbeat\n"
        "2025-03-14 10:02:19 ERROR job 5140 failed: InvalidToken (expired)\n"
        "2025-03-14 10:05:00 INFO heartbeat\n"
    ),
    "logs/api.log": (
        "2025-03-14 08:58:10 ERROR GET /health 503 (warming up)\n"
        "2025-03-14 09:00:00 INFO listening on 0.0.0.0:8080\n"
        "2025-03-14 09:15:31 ERROR POST /invoices 502 (billing unavailable)\n"
        "2025-03-14 09:15:40 INFO POST /invoices 201\n"
    ),
}

ORBIT_KB = [
    {
        "title": "Service ownership",
        "text": "api: Team Heron. billing: Team Osprey. search: Team Kestrel. worker: Team Heron.",
    },
    {
        "title": "On-call rota",
        "text": "Team Heron is on call in odd weeks and Team Osprey in even weeks; search "
        "incidents page the #search-alerts channel.",
    },
    {
        "title": "Deploy checklist",
        "text": "Run the migrations, deploy billing before api, then restart the workers.",
    },
]


ORBIT_WORLD = {"knowledge_base": ORBIT_KB}
ORBIT_INTRO = "In the Orbit project's files:"


def _engineering_config_and_code() -> list[Task]:
    """Tasks 1-5: facts in the Orbit project's config, logs, code and pins."""
    s = "engineering"
    return [
        _task(
            s,
            1,
            f"{ORBIT_INTRO} which port does the billing service listen on?",
            8443,
            [
                _grep("billing:", "config/services.yaml", "Find the billing service's block."),
                _read("config/services.yaml", 6, 9, "Read the billing block."),
            ],
            world=ORBIT_WORLD,
            evidence=["config/services.yaml:6:  billing:", "port: 8443"],
            distractors=[8080, 9200],
            files=ORBIT_FILES,
        ),
        _task(
            s,
            2,
            f"{ORBIT_INTRO} how many ERROR lines does logs/worker.log contain?",
            4,
            [_grep("ERROR", "logs/worker.log", "List the worker log's error lines.")],
            world=ORBIT_WORLD,
            evidence=[
                "logs/worker.log:3:",
                "logs/worker.log:6:",
                "logs/worker.log:8:",
                "logs/worker.log:11:",
            ],
            distractors=[6, 3],
            files=ORBIT_FILES,
            because="Lines 3, 6, 8 and 11.",
        ),
        _task(
            s,
            3,
            f"{ORBIT_INTRO} what is the Orbit client's default request timeout, in seconds?",
            12.5,
            [_grep("DEFAULT_TIMEOUT", "src", "Find the default timeout constant.")],
            world=ORBIT_WORLD,
            evidence=["DEFAULT_TIMEOUT = 12.5"],
            distractors=[3, 0.5],
            files=ORBIT_FILES,
        ),
        _task(
            s,
            4,
            f"{ORBIT_INTRO} which function raises InvalidToken? Answer with the function name only.",
            "verify_token",
            [
                _grep("raise InvalidToken", "src", "Find where the exception is raised."),
                _read("src/orbit/auth.py", 18, 26, "Read the enclosing function."),
            ],
            world=ORBIT_WORLD,
            evidence=["def verify_token(", 'raise InvalidToken("expired")'],
            distractors=["parse_header", "decode"],
            checker="exact",
            files=ORBIT_FILES,
        ),
        _task(
            s,
            5,
            f"{ORBIT_INTRO} which version of pydantic is pinned in requirements.txt? Answer with the "
            "version number only, e.g. 1.2.3.",
            "2.6.4",
            [_grep("^pydantic==", "requirements.txt", "Find the pydantic pin.")],
            world=ORBIT_WORLD,
            evidence=["pydantic==2.6.4"],
            distractors=["2.2.1", "2.31.0"],
            checker="exact",
            files=ORBIT_FILES,
        ),
    ]


def _engineering_runbook_and_logs() -> list[Task]:
    """Tasks 6-9: the runbook, the logs and the effective configuration."""
    s = "engineering"
    return [
        _task(
            s,
            6,
            "According to the Orbit runbook in the knowledge base, which team owns the search "
            "service? Answer with the team name.",
            ["Kestrel", "Team Kestrel"],
            [_kb("search service owner team", "The runbook lists service owners.")],
            world=ORBIT_WORLD,
            evidence=["search: Team Kestrel"],
            distractors=["Heron", "Osprey"],
            checker="any_of",
            files=ORBIT_FILES,
        ),
        _task(
            s,
            7,
            f"{ORBIT_INTRO} at what time did the first ERROR in logs/worker.log occur? Answer as "
            "HH:MM:SS.",
            "09:12:44",
            [_grep("ERROR", "logs/worker.log", "The first error line has the time.")],
            world=ORBIT_WORLD,
            evidence=["2025-03-14 09:12:44 ERROR"],
            distractors=["08:58:10", "09:20:07"],
            checker="exact",
            files=ORBIT_FILES,
        ),
        _task(
            s,
            8,
            f"{ORBIT_INTRO} how many times at most does the Orbit client try a request in production "
            "(the effective MAX_RETRIES there)?",
            6,
            [_grep("MAX_RETRIES", None, "Find the constant and where it is configured.")],
            world=ORBIT_WORLD,
            evidence=['"ORBIT_MAX_RETRIES", "4"', "config/production.env:2:ORBIT_MAX_RETRIES=6"],
            distractors=[4, 2],
            files=ORBIT_FILES,
            because="The code reads ORBIT_MAX_RETRIES (default 4); production sets it to 6.",
        ),
        _task(
            s,
            9,
            f"{ORBIT_INTRO} which job number failed with InvalidToken according to the worker log?",
            5140,
            [_grep("InvalidToken", "logs", "Search the logs for the error.")],
            world=ORBIT_WORLD,
            evidence=["ERROR job 5140 failed: InvalidToken"],
            distractors=[5121, 5127],
            files=ORBIT_FILES,
        ),
    ]


def _engineering() -> list[Task]:
    return [*_engineering_config_and_code(), *_engineering_runbook_and_logs()]


# ---------------------------------------------------------------------------------------------


def dialogue_suites() -> list[TaskSuite]:
    """The four dialogue suites (fresh Task objects on every call)."""
    return [
        TaskSuite(
            "conversation",
            "conversation",
            ENVIRONMENTS["conversation"],
            "Answer a user from a statistics table, another agent and a status page; "
            "sums and differences of two figures.",
            _conversation(),
        ),
        TaskSuite(
            "advisory",
            "advisory",
            ENVIRONMENTS["advisory"],
            "Advise customers from a knowledge base of policies and prices; some answers need "
            "a small calculation.",
            _advisory(),
        ),
        TaskSuite(
            "discussion",
            "discussion",
            ENVIRONMENTS["discussion"],
            "Decide which named option the evidence in a knowledge base supports, or count "
            "the supporting items.",
            _discussion(),
        ),
        TaskSuite(
            "engineering",
            "engineering",
            ENVIRONMENTS["engineering"],
            "Investigate a small project's config, logs and code with grep and read_file, "
            "plus a runbook; report one exact fact.",
            _engineering(),
        ),
    ]
