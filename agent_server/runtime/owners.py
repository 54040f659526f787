"""Principals (DESIGN 3.10): whose each session, turn and background turn is, and the check made before the store.

A *principal* is whoever a call is made for: a name the front door decides (an HTTP bearer token's principal,
`local` on stdio, ACP and an unauthenticated loopback bind, or a Python program's `AgentRuntime.as_principal`).
Every session belongs to the principal that made it, and its turns with it; another principal's session or
turn is reported exactly as an unknown one (`SessionNotFound`, `TurnNotFound`), so that ids are never
confirmed to someone they do not belong to.

The store keeps each session's principal; `SessionOwners` remembers (bounded, least recently used dropped
first) whose the sessions this process has seen are, so that the check of a session met before costs no store
round trip. That is safe: a session never changes hands and its id is never reused.

`Waiting` counts, per principal, the calls that wait for something shared (turns queued behind an earlier turn
of their session), so that one principal's flood is refused at its own limit without taking anyone else's room.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Generator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agent_server.errors import InvalidArgument, SessionNotFound
from agent_server.types import principal_problem

if TYPE_CHECKING:
    from agent_server.store.base import SessionStore

REMEMBERED_SESSIONS = 4096


def check_principal(name: str) -> str:
    """`name` when it can be a principal (`types.principal_problem`).

    Raises:
        InvalidArgument: it cannot.
    """
    problem = principal_problem(name)
    if problem is not None:
        raise InvalidArgument(problem)
    return name


class SessionOwners:
    """Session id -> its principal, as the store said (see the module docstring)."""

    def __init__(self, limit: int = REMEMBERED_SESSIONS) -> None:
        self._limit = limit
        self._owners: OrderedDict[str, str] = OrderedDict()

    def remember(self, session_id: str, principal: str) -> None:
        self._owners[session_id] = principal
        self._owners.move_to_end(session_id)
        while len(self._owners) > self._limit:
            self._owners.popitem(last=False)

    def forget(self, session_id: str) -> None:
        self._owners.pop(session_id, None)

    async def check(self, store: SessionStore, session_id: str, principal: str) -> None:
        """Return when the session is `principal`'s.

        Raises:
            SessionNotFound: the session is unknown, or another principal's.
        """
        owner = self._owners.get(session_id)
        if owner is None:
            owner = await store.session_owner(session_id)
            self.remember(session_id, owner)
        else:
            self._owners.move_to_end(session_id)
        if owner != principal:
            raise SessionNotFound(session_id)


class Waiting:
    """How many calls of each principal wait for one kind of thing, each principal within `limit`."""

    def __init__(self, limit: int, what: str, setting: str) -> None:
        self._limit = limit
        self._what = what
        self._setting = setting
        self._counts: defaultdict[str, int] = defaultdict(int)

    @contextmanager
    def one(self, principal: str) -> Generator[None]:
        """Count one more of `principal`'s calls waiting while the block runs.

        Raises:
            InvalidArgument: `limit` of its calls wait already.
        """
        if self._counts[principal] >= self._limit:
            raise InvalidArgument(
                f"{self._counts[principal]} of your turns wait {self._what} already (the limit, {self._setting}):"
                " wait for them, or cancel one"
            )
        self._counts[principal] += 1
        try:
            yield
        finally:
            self._counts[principal] -= 1
            if not self._counts[principal]:
                del self._counts[principal]
