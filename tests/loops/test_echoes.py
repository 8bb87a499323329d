"""Echoes: what a loop wrote, so that the watch bringing it back is not taken for news, and
another client's write after it is."""

from __future__ import annotations

from sharekeeper.loops.echoes import Echoes

OURS = {"deserved": "2"}
THEIRS = {"deserved": "99"}  # another client overwrote our field
BEFORE = {"deserved": "1"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_event_of_a_write_is_an_echo_even_before_its_response() -> None:
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.sending("q", OURS)
    # The API server often sends the watch event before the response reaches the writer.
    assert not echoes.shown("q", THEIRS)
    assert echoes.shown("q", OURS)
    echoes.wrote("q", OURS)
    assert echoes.current("q", OURS) == OURS


def test_after_the_response_only_the_stored_value_is_an_echo() -> None:
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.sending("q", OURS)
    stored = {"deserved": "2", "share": "1"}  # what the server really stored
    echoes.wrote("q", stored)
    assert not echoes.shown("q", OURS)
    assert echoes.shown("q", stored)


def test_until_the_watch_catches_up_the_diff_base_is_what_we_wrote() -> None:
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.sending("q", OURS)
    echoes.wrote("q", OURS)
    assert echoes.current("q", BEFORE) == OURS
    # A late event from before our write is not news; the watch is still behind.
    assert not echoes.shown("q", BEFORE)
    assert echoes.current("q", BEFORE) == OURS
    assert echoes.current("q", OURS) == OURS  # caught up: forgotten
    assert echoes.current("q", {"deserved": "5"}) == {"deserved": "5"}


def test_another_clients_write_after_our_echo_is_the_diff_base() -> None:
    """The race: our write, its echo (no round runs for an echo), then another client's write
    before the next round. Found: the round diffed against our remembered write, saw nothing
    to do, and the other client's value stayed."""
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.sending("q", OURS)
    echoes.wrote("q", OURS)
    assert echoes.shown("q", OURS)
    assert not echoes.shown("q", THEIRS)  # news: the loop wakes
    assert echoes.current("q", THEIRS) == THEIRS  # and the round restores ours


def test_another_clients_write_between_our_echo_and_our_response_is_the_diff_base() -> None:
    """The same race when the echo beats the response: by the time we record the write, the
    watch has shown it and something newer."""
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.sending("q", OURS)
    assert echoes.shown("q", OURS)
    assert not echoes.shown("q", THEIRS)
    echoes.wrote("q", OURS)
    assert echoes.current("q", THEIRS) == THEIRS


def test_a_write_whose_echo_never_comes_is_trusted_for_a_while_only() -> None:
    """E.g. a relist that no longer shows our write, or a loop that is not told of watch
    events (the QoS loop reads its policies' statuses only at each check)."""
    clock = Clock()
    echoes: Echoes[str, dict[str, str]] = Echoes(hold_seconds=30, clock=clock)
    echoes.wrote("q", OURS)
    clock.now += 29
    assert echoes.current("q", THEIRS) == OURS
    clock.now += 2
    assert echoes.current("q", THEIRS) == THEIRS
    assert echoes.current("q", BEFORE) == BEFORE  # forgotten for good


def test_a_gone_object_leaves_nothing_behind() -> None:
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.sending("q", OURS)
    assert echoes.shown("q", OURS)
    echoes.wrote("q", None)
    assert echoes.current("q", BEFORE) == BEFORE
    echoes.wrote("q", OURS)
    echoes.forget("q")
    assert echoes.current("q", BEFORE) == BEFORE
    assert not echoes.shown("q", OURS)
