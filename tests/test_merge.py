"""The three-way merge of the memory editor (gateway/core/text/merge.py): the owner's edit and
the assistant's note, both kept; where both changed the same lines, a conflict with each
side's lines, never a choice made for the owner."""

from __future__ import annotations

from gateway.core.text.merge import Conflict, Merge, merge

BASE = "# Memory\n\n- Ann likes tea.\n- Bo plays chess.\n"


def test_changes_to_different_lines_are_both_kept() -> None:
    mine = BASE.replace("Ann likes tea", "Ann likes green tea")
    theirs = BASE + "- Cy moved to Oslo.\n"
    assert merge(BASE, mine, theirs).text == (
        "# Memory\n\n- Ann likes green tea.\n- Bo plays chess.\n- Cy moved to Oslo.\n"
    )
    assert merge(BASE, theirs, mine).text == merge(BASE, mine, theirs).text


def test_a_line_removed_on_one_side_stays_removed_beside_a_change_elsewhere() -> None:
    mine = BASE.replace("- Bo plays chess.\n", "")
    theirs = BASE.replace("# Memory", "# Long-term memory")
    assert merge(BASE, mine, theirs).text == "# Long-term memory\n\n- Ann likes tea.\n"


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    both = BASE + "- Cy moved to Oslo.\n"
    assert merge(BASE, both, both) == Merge((both,))
    assert merge(BASE, BASE, BASE).text == BASE


def test_lines_added_at_the_same_place_are_a_conflict_of_just_those_lines() -> None:
    mine = BASE + "- The cat is Pixel.\n"
    theirs = BASE + "- Cy moved to Oslo.\n"
    merged = merge(BASE, mine, theirs)
    assert merged.text is None
    assert merged.parts == (BASE, Conflict("", "- The cat is Pixel.\n", "- Cy moved to Oslo.\n"))


def test_a_last_line_without_its_end_both_sides_completed_is_not_part_of_the_conflict() -> None:
    """The assistant ends the file's last line before appending its note: the line itself,
    ended the same way on both sides, is merged; only the two new lines conflict."""
    base = "# Memory\n- Ann likes tea."
    mine = base + "\n- The cat is Pixel.\n"
    theirs = base + "\n- Cy moved to Oslo.\n"
    assert merge(base, mine, theirs).parts == (
        "# Memory\n- Ann likes tea.\n",
        Conflict("- Ann likes tea.", "- The cat is Pixel.\n", "- Cy moved to Oslo.\n"),
    )


def test_a_line_changed_on_one_side_and_removed_on_the_other_is_a_conflict() -> None:
    mine = BASE.replace("Bo plays chess", "Bo plays go")
    theirs = BASE.replace("- Bo plays chess.\n", "")
    merged = merge(BASE, mine, theirs)
    assert merged.conflicts == (Conflict("- Bo plays chess.\n", "- Bo plays go.\n", ""),)
    assert merged.parts[0] == "# Memory\n\n- Ann likes tea.\n"
