"""The change sequence's one position type (``berth.position``): its
text form as the Berth-Position header, the feed and its watch write
it, and the comparisons the caches, the watch and the client make."""

from __future__ import annotations

import pytest

from berth.position import Position


@pytest.mark.parametrize("text", ["0", "1:42", "1:5,7:3", "2:1,10:9"])
def test_the_text_form_reads_back(text: str) -> None:
    assert str(Position.parse(text)) == text


def test_text_is_by_slot_without_slots_at_their_start() -> None:
    assert str(Position.of({7: 3, 1: 5})) == "1:5,7:3"
    assert str(Position.of({1: 0, 2: 4})) == "2:4"
    assert str(Position.of({1: 0})) == str(Position()) == "0"
    assert Position.parse("7:3,1:5") == Position.of({1: 5, 7: 3})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "1:",
        ":1",
        "a:1",
        "1:-2",
        "1:2,",
        "1:2,1:3",
        "0,1:2",
        "1:2;2:3",
        "1" * 12 + ":1",
        "1:" + "9" * 19,
    ],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a position"):
        Position.parse(text)


def test_comparisons() -> None:
    a, b = Position.parse("1:5,7:3"), Position.parse("1:4,7:9")
    assert a.get(1) == 5 and a.get(2) == 0 and a.total == 8
    assert not a >= b and not b >= a
    both = a.merged(b)
    assert str(both) == "1:5,7:9" and both >= a and both >= b
    assert a.merged(Position.parse("1:2")) is a
    assert Position() >= Position.of({1: 0})
    assert str(a.past(1, 6)) == "1:6,7:3" and a.past(1, 4) is a
    assert str(a.past(9, 1)) == "1:5,7:3,9:1"
    assert dict(a.seqs) == {1: 5, 7: 3}


def test_earliest_takes_each_slot_at_its_lowest() -> None:
    def earliest(*texts: str) -> str:
        return str(Position.earliest(Position.parse(t) for t in texts))

    assert earliest("1:5,7:3", "1:4,7:9") == "1:4,7:3"
    assert earliest("1:5", "1:6,7:2") == "1:5"  # slot 7 from its start
    assert earliest("0", "1:2") == "0"
    assert earliest("3:1") == "3:1"
