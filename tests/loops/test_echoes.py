"""Echoes: what a loop wrote, so that the watch bringing it back is not taken for news."""

from __future__ import annotations

from sharekeeper.loops.echoes import Echoes


def test_the_event_of_a_write_is_an_echo_even_before_its_response() -> None:
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.sending("q", {"deserved": "2"})
    # The API server often sends the watch event before the response reaches the writer.
    assert echoes.is_echo("q", {"deserved": "2"})
    assert not echoes.is_echo("q", {"deserved": "3"})  # someone else's value
    echoes.wrote("q", {"deserved": "2"})
    assert echoes.is_echo("q", {"deserved": "2"})


def test_after_the_response_only_the_stored_value_is_an_echo() -> None:
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.sending("q", {"deserved": "2"})
    echoes.wrote("q", {"deserved": "2", "share": "1"})  # what the server really stored
    assert echoes.is_echo("q", {"deserved": "2", "share": "1"})
    assert not echoes.is_echo("q", {"deserved": "2"})


def test_until_the_watch_catches_up_the_diff_base_is_what_we_wrote() -> None:
    echoes: Echoes[str, dict[str, str]] = Echoes()
    echoes.wrote("q", {"deserved": "2"})
    assert echoes.current("q", {"deserved": "1"}) == {"deserved": "2"}
    assert echoes.current("q", {"deserved": "2"}) == {"deserved": "2"}  # caught up: forgotten
    assert echoes.current("q", {"deserved": "5"}) == {"deserved": "5"}
