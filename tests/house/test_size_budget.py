"""The size budget in place of a line wall (tests/support/size_budget.py): each source file is held to its
own allowance, which may come down and never go up."""

from __future__ import annotations

from pathlib import Path

from tests.support import size_budget
from tests.support.size_budget import Budget, allowance, problems, render, updated


def test_every_file_is_within_its_allowance_and_none_is_well_under_it() -> None:
    budget = size_budget.load()
    wrong = problems(budget, size_budget.sizes(budget))
    assert not wrong, "\n".join(wrong)


def test_the_budget_file_is_as_the_update_writes_it() -> None:
    text = size_budget.BUDGET.read_text(encoding="utf-8")
    assert render(size_budget.load()) == text, f"tests/size_budget.toml: rewrite it with {size_budget.UPDATE}"


def test_the_budget_holds_the_package() -> None:
    budget = size_budget.load()
    assert "jr2_actors" in budget.roots
    assert "jr2_actors/watch/core.py" in budget.files


def test_an_allowance_is_a_little_above_the_size_rounded_up() -> None:
    assert allowance(493) == 500 and allowance(496) == 510 and allowance(500) == 510
    assert allowance(0) == allowance(40) == size_budget.FLOOR  # a small file is not what the budget is for


def test_a_file_over_its_allowance_fails_and_says_to_split_it() -> None:
    budget = Budget(["pkg"], 400, {"pkg/a.py": 300})
    assert problems(budget, {"pkg/a.py": 300}) == []
    [line] = problems(budget, {"pkg/a.py": 301})
    assert line.startswith("pkg/a.py: 301 lines, over its allowance of 300") and "split" in line


def test_a_file_well_under_its_allowance_asks_for_it_to_come_down() -> None:
    budget = Budget(["pkg"], 400, {"pkg/a.py": 300})
    assert problems(budget, {"pkg/a.py": 280}) == []  # a few lines under: no churn
    [line] = problems(budget, {"pkg/a.py": 270})
    assert "well under its allowance of 300" in line and "--update" in line


def test_a_new_file_is_held_to_the_default_and_a_gone_one_asks_for_the_update() -> None:
    budget = Budget(["pkg"], 400, {"pkg/gone.py": 200})
    wrong = problems(budget, {"pkg/new.py": 400, "pkg/big.py": 401})
    assert wrong == ["pkg/big.py: 401 lines, over the default allowance of a new file (400): split it where its "
                     "concepts part",
                     f"pkg/gone.py: listed in the budget but gone: drop it with {size_budget.UPDATE}"]


def test_the_update_lowers_lists_and_drops_and_never_raises() -> None:
    budget = Budget(["pkg"], 400, {"pkg/shrunk.py": 300, "pkg/grown.py": 200, "pkg/gone.py": 150})
    new, refused = updated(budget, {"pkg/shrunk.py": 150, "pkg/grown.py": 250, "pkg/new.py": 120,
                                    "pkg/huge.py": 900})
    assert new.files == {"pkg/shrunk.py": 160, "pkg/grown.py": 200, "pkg/new.py": 130, "pkg/huge.py": 400}
    assert [line.split(":")[0] for line in refused] == ["pkg/grown.py", "pkg/huge.py"]
    assert problems(new, {"pkg/shrunk.py": 150, "pkg/grown.py": 200, "pkg/new.py": 120, "pkg/huge.py": 400}) == []


def test_a_raise_by_hand_keeps_its_reason_through_an_update(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    budget = Budget(["pkg"], 400, {"pkg/a.py": 610, "pkg/b.py": 300},
                    {"pkg/a.py": "# one table of every Turn: its rows part nowhere"})
    path.write_text(render(budget), encoding="utf-8")
    assert '"pkg/a.py" = 610  # one table of every Turn: its rows part nowhere' in path.read_text(encoding="utf-8")
    again = size_budget.load(path)
    assert again == budget
    kept, _ = updated(again, {"pkg/a.py": 600, "pkg/b.py": 200})
    assert kept.notes == budget.notes and kept.files == {"pkg/a.py": 610, "pkg/b.py": 210}
    moved, _ = updated(again, {"pkg/a.py": 500, "pkg/b.py": 300})
    assert moved.notes == {}  # lowered: the reason for the old figure is gone with it
