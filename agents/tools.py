"""The agent's tools: the built-in names (declared in agents.builtin_tools), the custom tools of
AGENT_TOOLS, and how a custom tool replaces a built-in one.

A custom tool (seed 003's `RollbackAgent(tools=[...])`, or a callable named in AGENT_TOOLS by its
dotted path) is offered beside the built-in tools. One with a built-in's name replaces that
built-in for the agent: the explicit choice wins, never the other way round. agno itself keeps the
first of two tools of one name and drops the other with a warning, so the built-in would win.

agno derives a tool's JSON schema (and its pydantic validator) from the callable, and caches the
derivation on the callable's owner: for a bound method, on the agent object. An agent is built
per turn, so the built-in tools' schemas were derived again on every turn (19% of a turn's own
time, measured). `agno_tools` gives agno a Function per bound method whose schema and validator
were built once per process from the class's function, and bound to this agent's object.
"""

from __future__ import annotations

import inspect
import logging
import types
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, TypeVar

from agno.tools import Toolkit
from agno.tools.function import Function
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .builtin_tools import REGISTRY
from .registry import EFFECTS

log = logging.getLogger(__name__)

# The built-in tools' names and effects, as agents.builtin_tools declares them (when this module
# was imported: what reads them at run time asks REGISTRY itself, so a tool registered later
# counts too). The checkpoint tools take no automatic checkpoint; the memory tools change no
# conversation state (memories belong to the user), so they are not checkpoint tools.
CHECKPOINT_TOOLS = REGISTRY.names(checkpoint=True)
MEMORY_TOOLS = REGISTRY.names(group="memory")
FILE_TOOLS = REGISTRY.names(group="files")
TODO_TOOLS = REGISTRY.names(group="plan")
# Offered only where the sandbox works (sandbox.availability).
SHELL_TOOLS = REGISTRY.names(group="shell")
BUILTIN_TOOLS = REGISTRY.names()
# A custom tool that declares nothing acts on the outside world: the safe assumption.
DEFAULT_EFFECT = "external"
# How a built-in tool's result starts when it refused the call and did nothing (a path outside
# the workspace, a checkpoint that is not there): it never raises, the model reads why.
REFUSED = "✗ "
# The longest deadline a custom tool may declare (a day).
MAX_TIMEOUT = 24 * 3600

T = TypeVar("T")


def tool_effect(
    effect: str, *, approval: bool = False, timeout: float | None = None
) -> Callable[[T], T]:
    """Declare what a custom tool does, for seed 003's `RollbackAgent(tools=[...])` and
    AGENT_TOOLS: `@tool_effect("none")` on a function that only reads, `"workspace"` for one
    whose changes a restore undoes, `"external"` (the default for an undeclared tool) for one that
    acts outside; `approval=True` makes each call wait for the owner's approval; `timeout`, its
    calls' deadline in seconds (else AGENT_TOOL_TIMEOUT_SECONDS: agents.tool_deadline). Works on
    a function, an agno Function or a Toolkit (for all its functions)."""
    if effect not in EFFECTS:
        raise ValueError(f"Unknown tool effect {effect!r}: use one of {', '.join(EFFECTS)}.")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise ValueError(
            f"A tool's timeout is a number of seconds above 0 and at most {MAX_TIMEOUT}, "
            f"not {timeout!r}."
        )

    def declare(tool: T) -> T:
        holders: list[Any] = [tool]
        if isinstance(tool, Function) and tool.entrypoint is not None:
            holders.append(tool.entrypoint)
        for holder in holders:
            setattr(holder, "rollback_effect", effect)  # noqa: B010 - a function's own attribute
            setattr(holder, "rollback_approval", approval)  # noqa: B010
            setattr(holder, "rollback_timeout", timeout)  # noqa: B010
        return tool

    return declare


def _declared(tool: Any, attribute: str) -> Any:
    for holder in (tool, getattr(tool, "entrypoint", None), getattr(tool, "__func__", None)):
        value = getattr(holder, attribute, None) if holder is not None else None
        if value is not None:
            return value
    return None


def declared_effect(tool: Any) -> str:
    """A custom tool's declared effect (`tool_effect`), else `external`."""
    value = _declared(tool, "rollback_effect")
    return value if value in EFFECTS else DEFAULT_EFFECT


def declared_approval(tool: Any) -> bool:
    return bool(_declared(tool, "rollback_approval"))


def timeouts_of(custom: Iterable[Any]) -> dict[str, float]:
    """The deadline in seconds each custom tool declares (`tool_effect(..., timeout=...)`), by
    the name the model calls it: a toolkit's function's own, else the toolkit's."""
    timeouts: dict[str, float] = {}
    for tool in custom:
        functions = tool.functions if isinstance(tool, Toolkit) else {}
        for name in tool_names(tool):
            one = functions.get(name)
            seconds = _declared(one, "rollback_timeout") if one is not None else None
            seconds = seconds if seconds is not None else _declared(tool, "rollback_timeout")
            if seconds is not None:
                timeouts[name] = float(seconds)
    return timeouts


def effects_of(builtins: Iterable[Any], custom: Iterable[Any]) -> tuple[dict[str, str], set[str]]:
    """The effect of each tool name an agent offers, and the names that wait for approval: the
    built-ins as their declarations say (agents.builtin_tools), the custom ones as they declare
    (a custom tool that replaces a built-in is a custom tool: its own declaration counts)."""
    effects: dict[str, str] = {}
    approvals: set[str] = set()
    for tool in builtins:
        for name in tool_names(tool):
            declared = REGISTRY.get(name)
            effects[name] = declared.effect_now() if declared is not None else DEFAULT_EFFECT
            if declared is not None and declared.approval_now():
                approvals.add(name)
    for tool in custom:
        functions = tool.functions if isinstance(tool, Toolkit) else {}
        for name in tool_names(tool):
            one = functions.get(name)
            source = one if one is not None and _declared(one, "rollback_effect") else tool
            effects[name] = declared_effect(source)
            if declared_approval(tool) or (one is not None and declared_approval(one)):
                approvals.add(name)
    return effects, approvals


def tool_names(tool: Any) -> list[str]:
    """The names the model sees for one entry of an agent's `tools`: a toolkit's functions, a
    Function's name, a callable's `__name__`."""
    if isinstance(tool, Toolkit):
        return list(tool.functions) or [
            t.name if isinstance(t, Function) else t.__name__ for t in tool.tools
        ]
    if isinstance(tool, Function):
        return [tool.name]
    name = getattr(tool, "__name__", None)
    return [name] if isinstance(name, str) else []


def names_of(tools: Iterable[Any]) -> set[str]:
    return {name for tool in tools for name in tool_names(tool)}


def without_replaced(builtins: Iterable[Any], custom: Iterable[Any]) -> list[Any]:
    """The built-in tools whose names no custom tool takes."""
    taken = names_of(custom)
    return [tool for tool in builtins if not set(tool_names(tool)) & taken]


def _load(path: str) -> Any:
    """One AGENT_TOOLS entry: a function (or other callable), an agno Function or Toolkit, or a
    Toolkit class (made with no arguments)."""
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"AGENT_TOOLS: {path!r} could not be imported ({exc}). Each entry is the dotted path "
            "of a function, e.g. mypackage.tools.lookup_order."
        ) from None
    if isinstance(found, type) and issubclass(found, Toolkit):
        try:
            found = found()
        except Exception as exc:
            raise ImproperlyConfigured(
                f"AGENT_TOOLS: the toolkit {path!r} could not be made without arguments: {exc}"
            ) from None
    if isinstance(found, type) or (not callable(found) and not isinstance(found, Toolkit)):
        raise ImproperlyConfigured(
            f"AGENT_TOOLS: {path!r} is not a function the agent can call (it is "
            f"{type(found).__name__})."
        )
    if not tool_names(found):
        raise ImproperlyConfigured(f"AGENT_TOOLS: {path!r} has no name the model could call.")
    return found


@lru_cache(maxsize=4)
def _loaded(paths: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(_load(path) for path in paths)


def configured_tools() -> list[Any]:
    """The tools AGENT_TOOLS names, loaded once per process (ImproperlyConfigured when one cannot
    be loaded; `check_agent_tools` reports that at the start)."""
    paths = getattr(settings, "AGENT_TOOLS", None) or []
    if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
        raise ImproperlyConfigured("AGENT_TOOLS must be a list of dotted paths.")
    return list(_loaded(tuple(paths)))


def check_agent_tools() -> None:
    """At the start: load AGENT_TOOLS (a clear ImproperlyConfigured naming the setting and the
    entry otherwise) and log each built-in tool an entry replaces."""
    tools = configured_tools()
    paths = list(getattr(settings, "AGENT_TOOLS", None) or [])
    for path, tool in zip(paths, tools, strict=True):
        for name in sorted(set(tool_names(tool)) & REGISTRY.names()):
            log.info("AGENT_TOOLS: %s replaces the built-in tool %r for every agent", path, name)


class MethodFunction(Function):
    """agno's Function for a bound method, with the parameters the framework supplies (agent,
    run_context, images...) resolved once per process, by the template: agno resolves them again
    for every run's copy (`process_entrypoint`), from a cache it keeps on the method's object,
    which lives one turn here (the agent's toolsets are built per turn), so every turn paid for
    inspecting each method's signature and type hints again."""

    def _resolve_framework_params(self) -> set[str]:
        if self._framework_params is not None:  # the template's, carried by each copy
            return set(self._framework_params)
        return super()._resolve_framework_params()


@lru_cache(maxsize=256)
def _method_template(function: Callable[..., Any], name: str) -> Function:
    """A processed Function for a class's function: its schema (without `self`) and its
    validating wrapper, built once per process and never handed to a run itself."""
    template = MethodFunction(name=name, entrypoint=function)
    template.process_entrypoint()
    return template


def method_tool(method: types.MethodType) -> Function:
    """The agno Function of a bound method, from the process's template: the same schema,
    bound to `method`'s object. agno copies it per run and does not process it again."""
    template = _method_template(method.__func__, method.__name__)
    if template.entrypoint is None:  # process_entrypoint keeps one (wrapped, or as it was)
        raise TypeError(f"{method!r} has no entrypoint")
    function = template._per_run_copy()
    function.entrypoint = types.MethodType(template.entrypoint, method.__self__)
    function.skip_entrypoint_processing = True
    return function


def agno_tools(tools: Iterable[Any]) -> list[Any]:
    """An agent's tools as agno gets them: bound methods as Functions whose schemas were built
    once per process (`method_tool`); functions, Functions and toolkits as they are (agno caches
    a function's schema per function, a toolkit's on the toolkit, and those live on)."""
    return [
        method_tool(tool)
        if inspect.ismethod(tool) and not isinstance(tool.__self__, type)
        else tool
        for tool in tools
    ]
