"""`make bench`: how checkpointing, restoring and reading history scale with a conversation's
length. Prints a table; the targets are flat lines for create and restore."""

from __future__ import annotations

import time

import pytest

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import message_append, session_create
from tests.conftest import grow

pytestmark = pytest.mark.django_db

SIZES = (10, 1_000, 10_000, 50_000)
REPEAT = 30


def _best(fn, repeat=REPEAT) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1000


def test_bench_cost_against_conversation_length(alice):
    rows = []
    for size in SIZES:
        branch = current_branch(session_create(owner=alice, name=f"{size}"))
        grow(branch, size)
        cp = checkpoint_create(branch=branch, name="bench")
        create_ms = _best(lambda b=branch: checkpoint_create(branch=b, name="c"))
        restore_ms = _best(lambda cp=cp: checkpoint_restore(checkpoint=cp))
        append_ms = _best(
            lambda s=branch.session: message_append(
                branch=current_branch(s), role="user", content="x"
            )
        )
        head = current_branch(branch.session)
        last_page_ms = _best(lambda h=head: branch_history(h, start=h.message_count - 50))
        full_ms = _best(lambda h=head: branch_history(h), repeat=3)
        rows.append((size, create_ms, restore_ms, append_ms, last_page_ms, full_ms))
    print()
    print(
        f"{'messages':>9} {'checkpoint':>11} {'restore':>9} {'append':>8} "
        f"{'last 50':>9} {'full history':>13}   (best of {REPEAT}, ms)"
    )
    for size, c, r, a, p, f in rows:
        print(f"{size:>9} {c:>11.2f} {r:>9.2f} {a:>8.2f} {p:>9.2f} {f:>13.1f}")
