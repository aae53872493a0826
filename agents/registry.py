"""The registry of the built-in tools: one declaration (`BuiltinTool`) per tool.

Everything that knows a built-in tool by name is built from its declaration: the tools a
RollbackAgent offers the model (in the registry's order), the effect recorded on each call's tool
message and the calls that wait for approval (agents.tools.effects_of), the checkpoint tools
(whose use takes no automatic checkpoint), the lines of the agent's instructions that name the
tools (`Group`), and the requests the offline demo model understands (`Intent`) and the words it
uses for a tool in a result it shows the user. The declarations are in agents.builtin_tools;
adding a tool is adding one there (with its implementation: a function given in the declaration,
or a method of the agent of the tool's name).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

# What a tool call does beyond the conversation (api-contract.md), recorded on its tool message:
# `none` it only reads (or changes only the conversation's own checkpoints), `workspace` it
# changes what a restore brings back (the files, the plan in the session state), `external`
# nothing here can undo it.
Effect = Literal["none", "workspace", "external"]
EFFECTS: tuple[Effect, ...] = ("none", "workspace", "external")

Arguments = Callable[[dict[str, Any]], dict[str, Any]]


def no_arguments(groups: dict[str, Any]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Group:
    """Tools the agent's instructions present together, in one line: `instruction`, with
    `{names}` replaced by the group's tool names ("a, b and c"). The lines come in the order of
    their `rank`."""

    key: str
    rank: int
    instruction: str


@dataclass(frozen=True)
class Intent:
    """A request the offline demo model answers with a call of the tool: a message `pattern`
    matches, tried in the order of `rank` over every offered tool's intents (lower first), the
    call's arguments made by `arguments` from the pattern's named groups."""

    rank: int
    pattern: re.Pattern[str]
    arguments: Arguments = no_arguments


@dataclass(frozen=True)
class BuiltinTool:
    """One built-in tool.

    - `name`: the name the model sees (api-contract.md).
    - `effect`: what its call does beyond the conversation (`Effect`).
    - `group`: where the instructions present it.
    - `checkpoint`: a checkpoint tool: a turn that used only such tools takes no automatic
      checkpoint.
    - `approval`: each call waits for the owner's approval (agents.approval_gate).
    - `function`: its implementation; None for a method of the agent of the tool's name.
    - `intents`: the demo model's requests for it; `asked_as`: the user's words for it, which the
      demo puts in place of its name in a result it shows; `rewrites`: whole phrases of results
      that point to it, each with the user's words for them (a regular expression, the words).
    - `reply`: the demo's reply for a result of this tool (None: the result in the user's
      words); `empty_reply`: its reply for an empty result.
    - `offered`: whether agents offer it in this process (None: always); one that is not
      offered is left out of their tools and instructions (the shell tools without a sandbox).
    - `settled`: its effect and approval as the settings make them now, when they depend on
      them (the shell tools: `external`, and approved, when the sandbox has a network); None:
      `effect` and `approval` as declared. Read by `effect_now` and `approval_now`.
    """

    name: str
    effect: Effect
    group: Group
    checkpoint: bool = False
    approval: bool = False
    function: Callable[..., str] | None = None
    intents: tuple[Intent, ...] = ()
    asked_as: str | None = None
    rewrites: tuple[tuple[str, str], ...] = ()
    reply: Callable[[str], str | None] | None = None
    empty_reply: str = "Done."
    offered: Callable[[], bool] | None = None
    settled: Callable[[], tuple[Effect, bool]] | None = None

    def __post_init__(self) -> None:
        if self.effect not in EFFECTS:
            raise ValueError(f"{self.name}: unknown effect {self.effect!r}")

    def effect_now(self) -> Effect:
        return self.settled()[0] if self.settled is not None else self.effect

    def approval_now(self) -> bool:
        return self.settled()[1] if self.settled is not None else self.approval

    def implementation(self, agent: object) -> Callable[..., str]:
        """The callable the agent offers: the declared function, else its method."""
        if self.function is not None:
            return self.function
        method: Callable[..., str] = getattr(agent, self.name)
        return method


def names_in_words(names: Iterable[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    listed = list(names)
    return listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]


class ToolRegistry:
    """The built-in tools in the order the agent offers them."""

    def __init__(self, tools: Iterable[BuiltinTool] = ()) -> None:
        self._tools: dict[str, BuiltinTool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: BuiltinTool) -> BuiltinTool:
        if tool.name in self._tools:
            raise ValueError(f"A built-in tool {tool.name!r} is registered already.")
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        del self._tools[name]

    def __iter__(self) -> Iterator[BuiltinTool]:
        return iter(list(self._tools.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def get(self, name: str | None) -> BuiltinTool | None:
        return self._tools.get(name) if name is not None else None

    def names(self, *, checkpoint: bool | None = None, group: str | None = None) -> frozenset[str]:
        """The tools' names, only the checkpoint tools (or the others), or one group's."""
        return frozenset(
            t.name
            for t in self
            if (checkpoint is None or t.checkpoint == checkpoint)
            and (group is None or t.group.key == group)
        )

    def effects(self) -> dict[str, Effect]:
        return {t.name: t.effect_now() for t in self}

    def approvals(self) -> frozenset[str]:
        return frozenset(t.name for t in self if t.approval_now())

    def offered(self) -> list[BuiltinTool]:
        """The tools agents offer in this process, in the registry's order."""
        return [t for t in self if t.offered is None or t.offered()]

    def implementations(
        self, agent: object, *, groups_off: frozenset[str] = frozenset()
    ) -> list[Callable[..., str]]:
        """What `agent` offers the model for the built-in tools, in the registry's order, but
        for those of the groups in `groups_off` (the owner's access takes them away)."""
        return [t.implementation(agent) for t in self.offered() if t.group.key not in groups_off]

    def instructions(self, intro: str, *, groups_off: frozenset[str] = frozenset()) -> list[str]:
        """The agent's instructions: `intro`, then a line per group of the offered tools."""
        groups: dict[str, tuple[Group, list[str]]] = {}
        for tool in self.offered():
            if tool.group.key in groups_off:
                continue
            groups.setdefault(tool.group.key, (tool.group, []))[1].append(tool.name)
        ordered = sorted(groups.values(), key=lambda g: g[0].rank)
        return [intro] + [g.instruction.format(names=names_in_words(n)) for g, n in ordered]

    def intents(self) -> list[tuple[BuiltinTool, Intent]]:
        """Every tool's demo intents, in the order the demo tries them."""
        found = [(tool, intent) for tool in self for intent in tool.intents]
        return sorted(found, key=lambda pair: pair[1].rank)
