"""Review of round 20's merges: what the changes broke for results and folders made before them.

- **A campaign holding a result made before round 13 broke the site**: such a result has no conditions digest
  (the store reads ""); beside a newer run of the same agent the ranking splits the agent by conditions and
  labels the older row plain `agent` (`site._who`), while round 20's stage profile labelled it `agent []`
  (`leaderboard.agent_labels`): the ranking page's stage chart looked that label up among the ranking's and
  `leaderboard --site` stopped with a ValueError.
"""

from __future__ import annotations

from automedbench_campaign.leaderboard import build
from automedbench_campaign.site import write_site
from automedbench_campaign.store import RunTable
from test_site_conditions import _row


def test_a_result_without_a_conditions_digest_beside_a_newer_run_still_makes_the_site(tmp_path):
    """Before: ValueError ('a []' is not in list) from the ranking page's stage chart. Now the site is written,
    the stage profile's labels are the ranking's, and each row keeps its own mean."""
    table = RunTable.from_rows([_row("a", "", 0.25), _row("a", "0123456789ab", 0.75)])
    board = build(table, by=("agent",), resamples=20)
    profile = board.analyses["stages"]["by_agent"]
    assert sorted(profile) == ["a", "a [0123456789ab]"]
    assert profile["a"]["stages"]["S1"]["mean"] == 0.25
    assert write_site(table, tmp_path, resamples=20, pictures=False)
    ranking = (tmp_path / "index.html").read_text()
    assert "a [0123456789ab] · S1: 0.750" in ranking and "a · S1: 0.250" in ranking


def test_the_picture_legend_names_every_label_of_a_map_past_ten_in_the_colour_it_is_drawn():
    """Before: the legend kept the first ten labels (TotalSegmentator's task has 14), while the drawing colours
    label 11 on in the first colours again: its aorta is drawn red and the legend named red the spleen alone."""
    from automedbench.pictures import LABEL_COLOURS, label_legend
    from automedbench_campaign.viewer.gallery import pictures_legend

    organs = {value: f"organ{value}" for value in range(1, 15)}
    legend = label_legend(organs)
    assert len(legend) == 14 and len(LABEL_COLOURS) == 10
    assert legend[0] == "organ1 red" and legend[10] == "organ11 red" and legend[13] == "organ14 blue"
    page = pictures_legend({"c1": {"case_id": "c1", "marks": ["mask"], "labels": legend}})
    assert "organ1 red" in page and "organ11 red" in page and "organ14 blue" in page


def test_a_picture_index_whose_lists_are_not_lists_still_gives_a_legend():
    """An index entry is read from a run folder: a `labels` or `marks` that is not a list (an edited or foreign
    folder) stopped the run page with a TypeError; it is read as none."""
    from automedbench_campaign.viewer.gallery import pictures_legend

    legend = pictures_legend({"c1": {"case_id": "c1", "marks": ["mask"], "labels": {"1": "organ"}},
                              "c2": {"case_id": "c2", "marks": 3, "labels": 7, "texts": {"title": "x"}}})
    assert legend.startswith("Each case") and "masks in one colour per label" in legend
